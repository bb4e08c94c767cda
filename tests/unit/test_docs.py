"""The docs name real things: the protocol reference is generated, and every command line and path they show exists."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_protocol_reference_is_current():
    run = subprocess.run([sys.executable, "docs/gen_protocol.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_every_verb_is_documented():
    from arbiter.verbs import VERBS

    text = (ROOT / "docs" / "protocol.md").read_text()
    missing = [name for name in VERBS if f"### `{name}`" not in text]
    assert not missing


def _invocations(line: str) -> list[list[str]]:
    """The `arbiter ...` commands in one shell line, as argv lists (pipes, `&&` and redirections cut them)."""
    line = re.sub(r"\$\([^)]*\)", "X", line)  # `$(date +%F)` is one word to the command
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    commands, words = [], []
    for token in [*lexer, "|"]:
        if token in ("|", "||", "&&", "&", ";", ">", ">>", "<"):
            if words[:1] == ["arbiter"]:
                commands.append(words[1:])
            words = [] if token != ">" else ["(redirect)"]
        elif words[:1] != ["(redirect)"]:
            words.append(token)
    return commands


def _parse(argv: list[str]) -> None:
    """Resolve argv through the real click group down to its command and parse its options, running nothing."""
    from arbiter.cli import main

    cmd, ctx, name = main, None, "arbiter"
    while True:
        ctx = cmd.context_class(cmd, info_name=name, parent=ctx)
        with ctx.scope(cleanup=False):
            # A group's own parse keeps the subcommand aside; Command's returns every word left, the name first.
            rest = click.Command.parse_args(cmd, ctx, argv)
        if not isinstance(cmd, click.Group):
            return
        name, cmd, argv = cmd.resolve_command(ctx, rest)


def _refused(argv: list[str]) -> str | None:
    try:
        _parse(argv)
    except click.BadParameter as e:
        if isinstance(e.param.type, (click.Path, click.File)):
            return None  # an example's file (notes.jsonl) need not exist here; its flag and place are what count
        return e.format_message()
    except click.ClickException as e:
        return e.format_message()
    return None


#: A shell line that runs `arbiter` (first, or after a pipe or `&&`).
COMMAND_LINE = re.compile(r"^ *((?:arbiter|.*\| arbiter|.*&& arbiter) .*)$", re.M)


def _readme_commands():
    for line in COMMAND_LINE.findall((ROOT / "README.md").read_text()):
        yield from _invocations(line)


def _help_examples():
    from arbiter.cli import main

    def walk(cmd, path=()):
        yield path, cmd
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            yield from walk(sub, (*path, name))

    for path, cmd in walk(main):
        for line in COMMAND_LINE.findall(f"{cmd.help or ''}\n{cmd.epilog or ''}".partition("Example")[2]):
            for argv in _invocations(line):
                yield " ".join(path) or "arbiter", argv


@pytest.fixture
def no_arbiter_env(monkeypatch):
    """Parsing reads ARBITER_* defaults; a developer's (say ARBITER_HOME) must not decide whether a doc is true."""
    for name in [k for k in os.environ if k.startswith("ARBITER_")]:
        monkeypatch.delenv(name)


def test_every_command_line_in_the_readme_parses(no_arbiter_env):
    commands = list(_readme_commands())
    assert len(commands) >= 35  # the tour, entities, facts, users, load, export, backups
    refused = {" ".join(argv): why for argv in commands if (why := _refused(argv))}
    assert not refused


def test_every_help_example_parses(no_arbiter_env):
    examples = list(_help_examples())
    assert len(examples) > 80
    refused = {f"{where}: arbiter {' '.join(argv)}": why for where, argv in examples if (why := _refused(argv))}
    assert not refused


def test_a_misspelt_flag_or_command_is_caught(no_arbiter_env):
    """The checks above would pass vacuously if parsing accepted anything."""
    assert _refused(["recall", "x", "--limt", "3"])
    assert _refused(["entity", "shw", "PostgreSQL"])
    assert _refused(["remember", "--type", "note", "--title", "t", "--content", "c"])
    assert _refused(["load", "notes.jsonl"]) is None


def _named_paths(text: str):
    for token in re.findall(r"`([^`\s]+)`", text):
        token = token.removeprefix("../")
        if re.search(r"[<>$~*]|^[A-Z]+/", token) or "://" in token:
            continue  # a placeholder (`arbiter/mcp/<feature>.py`, `TOKEN/api/`), a URI, a home
        path, _, name = token.partition(":")
        if path.endswith((".py", ".md", ".spec")) or path.startswith(("arbiter/", "tests/", "bench/", "docs/")):
            yield token, path, name
        elif re.fullmatch(r"(arbiter|store|recall|graph|entities|facts|associations|transfer|backup|server|cli|mcp|"
                          r"ui|changes|unit|integration|e2e)/", path):
            yield token, path, name


def _exists(path: str) -> Path | None:
    for base in ("", "arbiter/", "tests/", "docs/"):
        if (ROOT / base / path).exists():
            return ROOT / base / path
    if "/" not in path:  # a file named beside its package, earlier in the same sentence
        return next(iter(ROOT.glob(f"arbiter/**/{path}")), None) or next(iter(ROOT.glob(f"tests/**/{path}")), None)
    return None


def test_every_path_architecture_names_exists():
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = list(_named_paths(text))
    assert len(named) > 60
    missing = sorted({token for token, path, _ in named if _exists(path) is None})
    assert not missing
    # `store/db.py:MIGRATIONS` names something in that file
    undefined = sorted({token for token, path, name in named if name and name not in _exists(path).read_text()})
    assert not undefined


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end, text.index(start))]


def test_architecture_lists_every_migration_in_order():
    from arbiter.store.db import MIGRATIONS

    table = re.findall(r"^\| `(m\d{3}_\w+)` \|", (ROOT / "docs" / "architecture.md").read_text(), re.M)
    assert table == [name for name, *_ in MIGRATIONS]


def test_architecture_files_tables_name_every_module():
    """A newcomer finds every public module of `arbiter/` in "Shape", and every module of `arbiter/mcp/` in "MCP"."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    shape = _section(text, "Files:", "\n## ")
    modules = [p.name for p in (ROOT / "arbiter").glob("[!_]*.py")]
    packages = [f"arbiter/{p.parent.name}/" for p in (ROOT / "arbiter").glob("*/__init__.py")]
    assert [m for m in modules + packages if f"{m}`" not in shape] == []
    mcp = _section(text, "## MCP: the front door", "**Adding a tool")
    tools = [p.name for p in (ROOT / "arbiter" / "mcp").glob("*.py") if p.name != "__init__.py"]
    assert [m for m in tools if f"`{m}`" not in mcp] == []
