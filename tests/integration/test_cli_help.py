"""Every command's --help answers a user's first questions: what it does, and an example to copy."""

from __future__ import annotations

import os
import shlex

import click
import pytest
from click.testing import CliRunner

from arbiter.cli import main


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the root group imports a command's module only when asked for it
        cmd = group.get_command(ctx, name)
        yield path + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path + (name,))


COMMANDS = [path for path, _ in _commands(main)]


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_says_what_it_does_with_an_example(path):
    out = CliRunner().invoke(main, [*path, "--help"], terminal_width=80)
    assert out.exit_code == 0, out.output
    _, _, rest = out.output.partition("\n\n")
    assert rest.split("Options:")[0].strip(), f"{' '.join(path)} --help says nothing about what it does"
    assert "Example" in out.output, f"{' '.join(path)} --help has no example"


def test_every_option_says_what_it_is():
    """`--help` lists no bare option: `update --source TEXT` alone does not say that '' removes it."""
    bare = [f"{' '.join(path)} {opt.opts[0]}" for path, cmd in _commands(main) for opt in cmd.params
            if isinstance(opt, click.Option) and not opt.help]
    assert bare == []


@pytest.mark.parametrize("path", [("link",), ("unlink",), ("entity", "relate")], ids=" ".join)
def test_a_relation_argument_reads_as_one_word_in_usage(path):
    """The usage line names the argument; the choices are listed below it, not broken across lines."""
    out = CliRunner().invoke(main, [*path, "--help"], terminal_width=80).output
    assert out.splitlines()[0].endswith("SOURCE RELATION TARGET"), out
    assert "supersedes" in out or "depends_on" in out


def test_the_default_home_is_where_help_says(tmp_path):
    """--help names $XDG_DATA_HOME/arbiter as the default home, and a client looks there."""
    assert "$XDG_DATA_HOME/arbiter" in CliRunner().invoke(main, ["--help"]).output
    env = {k: None for k in os.environ if k.startswith("ARBITER_")}
    out = CliRunner().invoke(main, ["status"], env={**env, "XDG_DATA_HOME": str(tmp_path)})
    assert out.exit_code == 1 and str(tmp_path / "arbiter" / "arbiter.sock") in out.stderr


def test_the_examples_of_arbiter_help_run_in_order_on_a_fresh_home(daemon):
    """Pasted one after the other (the daemon already serving), each succeeds: no id or instant is left to guess."""
    from arbiter.cli._common import EXAMPLES

    lines = [shlex.split(line)[1:] for line in EXAMPLES.splitlines() if line.strip().startswith("arbiter ")]
    assert lines[0] == ["serve", "&"] and len(lines) > 4
    env = {k: None for k in os.environ if k.startswith(("ARBITER_", "ANTHROPIC_"))}
    outputs = []
    for argv in lines[1:]:
        out = CliRunner().invoke(main, argv, env={**env, "ARBITER_HOME": str(daemon.home)}, catch_exceptions=False)
        assert out.exit_code == 0, (argv, out.output)
        outputs.append(out.stdout)
    assert "Target: Friday" in outputs[-1]  # get --as-of reads the retired entry as it held then


def test_every_command_a_module_registers_is_reachable():
    """The root group imports a command's module by the name `main.modules` gives it: one left out is unreachable."""
    import importlib
    import pkgutil

    import arbiter.cli

    for module in pkgutil.iter_modules(arbiter.cli.__path__):
        importlib.import_module(f"arbiter.cli.{module.name}")
    assert sorted(main.commands) == sorted(main.modules)
