"""bench/longmemeval/__main__.py: the paths that end before any daemon starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.longmemeval.__main__ import cli

TINY = Path(__file__).parents[1] / "data" / "longmemeval_tiny.json"


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ARBITER_DEBUG", raising=False)
    return CliRunner()


def test_help_carries_examples(runner: CliRunner) -> None:
    for command in ([], ["run"], ["ingest"], ["query"], ["grade"]):
        result = runner.invoke(cli, [*command, "--help"])
        assert result.exit_code == 0
        assert "Example" in result.output


def test_grade_without_key_says_so(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["grade", "--dataset", str(TINY), "--home", str(tmp_path)])
    assert result.exit_code == 1
    assert "ANTHROPIC_API_KEY" in result.output


def test_malformed_dataset_fails_before_any_daemon(runner: CliRunner, tmp_path: Path) -> None:
    questions = json.loads(TINY.read_text(encoding="utf-8"))
    questions[3]["haystack_dates"][0] = 20230701
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(questions), encoding="utf-8")
    home = tmp_path / "home"
    result = runner.invoke(cli, ["run", "--dataset", str(bad), "--home", str(home)])
    assert result.exit_code == 1
    assert "tiny_update_abs" in result.output and "haystack_dates[0]" in result.output
    assert not home.exists()


def test_unknown_variant_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["run", "--dataset", str(TINY), "--variants", "bm25,vector"])
    assert result.exit_code == 2


@pytest.mark.parametrize("command", ["ingest", "query"])
def test_persistent_commands_need_a_home(runner: CliRunner, command: str) -> None:
    args = [command] + (["--dataset", str(TINY)] if command == "ingest" else [])
    result = runner.invoke(cli, args)
    assert result.exit_code == 2
    assert "--home" in result.output
