"""The scenario harness (bench/scenarios) against the fake Messages server: its assertions can fail, its judge reads
what it is sent.

One daemon for the module; each run seeds a tenant of its own on it and drives a real `arbiter mcp` through the
official SDK client, as `python -m bench.scenarios --fake` does.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path

import anthropic
import anyio
import pytest

from bench.scenarios import agents, tools
from bench.scenarios.corpus import TEAMMATE, seed
from bench.scenarios.driver import MAX_TURNS, Event, Transcript
from bench.scenarios.judge import judge
from bench.scenarios.runner import Harness, run_all, scoreboard
from bench.scenarios.scenarios import BY_KEY, SCENARIOS, Ctx
from tests.conftest import DaemonProcess
from tests.fake_messages import FakeMessages

#: What ignoring the briefing breaks: every scenario but a plain new memory, each through these assertions.
CARELESS_FAILS = {
    "reply-to-thread": {"replied in the Safari thread", "no new top-level entry"},
    "cluster-recall": {"read the memory", "answer uses both rollback runbooks"},
    "teammate-thread": {"replied in raj's thread", "no new top-level entry"},
    "tag-conventions": {"tagged eng + one priority + one area"},
    "no-duplicate": {"read before writing", "no duplicate entry"},
    "cross-reference": {"linked with the rate-limit ticket"},
    "supersede": {"old runbook superseded by a new entry"},
    "topics-from-briefing": {"names three topics"},
    "cluster-vocabulary": {"reuses the runbook cluster's tags"},
}
#: What reading and then misusing the memory breaks: the assertions the careless agent never reaches.
MEDDLER_FAILS = {
    "new-memory": {"not filed as a reply"},
    "cluster-recall": {"wrote nothing"},
    "teammate-thread": {"replied in raj's thread", "overwrote nothing"},
    "cross-reference": {"a new entry holds the note", "linked with the rate-limit ticket"},
    "cluster-vocabulary": {"one new entry"},
}


@pytest.fixture(scope="module")
def bench_env():
    """A daemon and a fake Messages server, shared by the module's runs."""
    home = Path(tempfile.mkdtemp(prefix="arb-"))
    d = DaemonProcess(home).start()
    with FakeMessages() as fake:
        yield d, fake
    d.stop()
    shutil.rmtree(home, ignore_errors=True)


def _harness(bench_env, agent: str, *, judge_model: str | None = None) -> Harness:
    d, fake = bench_env
    client = anthropic.AsyncAnthropic(api_key="test", base_url=fake.base_url, max_retries=0)
    return Harness(home=d.home, socket=d.socket, admin_token=d.admin_token, model_client=client, model="scripted",
                   judge_model=judge_model, fake=fake, agent=agent)


def _run(h: Harness, scenarios) -> list:
    return anyio.run(lambda: run_all(h, scenarios, 1, progress=False))


@pytest.fixture(scope="module")
def careful_runs(bench_env):
    h = _harness(bench_env, "careful", judge_model="scripted-judge")
    return h, _run(h, SCENARIOS)


def test_the_careful_agent_passes_all_ten(careful_runs):
    h, results = careful_runs
    failed = {r.scenario: {k: v for k, v in r.checks.items() if v} for r in results if not r.passed}
    assert failed == {}
    assert [r.scenario for r in results] == [s.key for s in SCENARIOS]
    board = scoreboard(h, results, 1)
    assert (board.passed, board.runs, board.pass_rate) == (10, 10, 1.0)
    # Every run was judged, and the verdicts decoded as they came.
    assert board.judge_failures == 0 and {r.judged.repair for r in results} == {"clean"}
    assert board.judge_usage.requests == 10


def test_the_careful_agent_read_its_ids_from_the_briefing(careful_runs):
    """The thread reply needed no lookup: the open thread's full id was in the briefing the model was given."""
    _, results = careful_runs
    run = next(r for r in results if r.scenario == "reply-to-thread")
    assert run.usage.requests == 2  # the reply, then the answer


def test_the_careless_agent_fails_what_ignoring_the_briefing_breaks(bench_env):
    results = _run(_harness(bench_env, "careless"), SCENARIOS)
    failed = {r.scenario: {k for k, v in r.checks.items() if v} for r in results if not r.passed}
    assert failed == CARELESS_FAILS
    assert [r.scenario for r in results if r.passed] == ["new-memory"]


def test_the_meddling_agent_fails_what_misusing_the_memory_breaks(bench_env):
    results = _run(_harness(bench_env, "meddler"), [BY_KEY[k] for k in agents.MEDDLES])
    assert {r.scenario: {k for k, v in r.checks.items() if v} for r in results} == MEDDLER_FAILS


def test_a_teammates_entry_changed_is_caught(bench_env):
    """The daemon refuses to let ana overwrite raj's entry, so no script can; raj changing it himself must show."""
    d, _ = bench_env
    fx = seed(d.socket, d.admin_token, "untouched")
    check = BY_KEY["teammate-thread"].checks["raj's entries untouched"]
    empty = Transcript(scenario="teammate-thread", rep=1, model="m", briefing="full")
    with fx.client(d.socket) as ana:
        assert check(Ctx(empty, fx, ana)) is None
        with fx.client(d.socket, TEAMMATE) as raj:
            raj.update(fx["deadlock-r1"], content="Rewritten.")
        assert check(Ctx(empty, fx, ana)) == "text changed: ['deadlock-r1']"


def test_an_assertion_flipped_by_hand_fails(bench_env):
    scenario = BY_KEY["reply-to-thread"]
    held = scenario.checks["replied in the Safari thread"]
    flipped = dataclasses.replace(scenario, checks={
        **scenario.checks,
        "replied in the Safari thread": lambda c: "flipped: it held" if held(c) is None else None,
    })
    [result] = _run(_harness(bench_env, "careful"), [flipped])
    assert not result.passed
    assert {k for k, v in result.checks.items() if v} == {"replied in the Safari thread"}


def test_without_the_briefing_the_topics_question_needs_a_tool(bench_env):
    """`--briefing none`: the careful agent has no topic map, so it looks one up and the zero-call assertion fails."""
    h = dataclasses.replace(_harness(bench_env, "careful"), briefing="none")
    [result] = _run(h, [BY_KEY["topics-from-briefing"]])
    assert {k for k, v in result.checks.items() if v} == {"no tool calls"}


def test_a_model_that_never_answers_is_cut_short_and_fails(bench_env, monkeypatch):
    """An agent that calls tools forever stops at the turn limit; the run is marked cut short, and fails."""
    monkeypatch.setitem(agents.AGENTS, "looping", lambda key, view: [tools.recall("anything")])
    h = _harness(bench_env, "looping")
    [result] = _run(h, [BY_KEY["no-duplicate"]])
    assert result.error == f"no answer after {MAX_TURNS} model turns" and result.usage.requests == MAX_TURNS
    # Its assertions hold (it read, and wrote no duplicate), but it never answered the user.
    assert {k for k, v in result.checks.items() if v} == set() and not result.passed
    assert scoreboard(h, [result], 1).scenarios["no-duplicate"].errors == 1


# The judge against the fake: decoding, and the repair of a malformed verdict.

def _verdict(questions: int, score: float = 7) -> dict:
    return {"answers": [{"question": f"q{i}", "verdict": "yes", "why": "ok"} for i in range(questions)],
            "score": score}


def _judge(fake: FakeMessages, script: list):
    fake.set_script(script)
    client = anthropic.AsyncAnthropic(api_key="test", base_url=fake.base_url, max_retries=0)
    t = Transcript(scenario="new-memory", rep=1, model="m", briefing="full",
                   events=[Event(kind="user", text="Please remember the move."), Event(kind="assistant", text="Done.")])
    return anyio.run(judge, client, "judge-model", BY_KEY["new-memory"], t)


def test_a_clean_verdict_decodes_into_structs(bench_env):
    _, fake = bench_env
    out = _judge(fake, [json.dumps(_verdict(3, 8.5))])
    assert out.repair == "clean" and out.verdict.score == 8.5
    assert [a.verdict for a in out.verdict.answers] == ["yes"] * 3
    request = fake.requests[-1]
    assert request["model"] == "judge-model"
    assert "Did the assistant record the move as a new memory" in request["messages"][0]["content"]


def test_a_verdict_inside_prose_and_a_fence_is_cut_out(bench_env):
    _, fake = bench_env
    out = _judge(fake, ["Here is my grading:\n```json\n" + json.dumps(_verdict(3)) + "\n```\nThanks."])
    assert (out.repair, out.verdict.score, out.usage.requests) == ("extracted", 7, 1)


def test_a_malformed_verdict_is_asked_for_again(bench_env):
    _, fake = bench_env
    # A score out of range, and too few answers: neither is a verdict, with or without cutting.
    out = _judge(fake, [json.dumps(_verdict(2, 12)), json.dumps(_verdict(3, 6))])
    assert (out.repair, out.verdict.score, out.usage.requests) == ("asked again", 6, 2)
    retry = fake.requests[-1]["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert "could not be read" in retry[-1]["content"]


def test_a_verdict_unreadable_twice_is_a_judge_failure_not_a_score(bench_env):
    _, fake = bench_env
    out = _judge(fake, ["{'answers': 'yes'}", "I think it went well."])
    assert out.verdict is None and out.error and out.usage.requests == 2


def test_an_api_error_from_the_judge_is_recorded(bench_env):
    _, fake = bench_env
    out = _judge(fake, [529])
    assert out.verdict is None and "OverloadedError" in out.error
