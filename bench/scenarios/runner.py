"""The runner: scenarios x repetitions against one daemon, each run on a freshly seeded memory.

Each run: a new tenant seeded with the corpus (`corpus.seed`), an `arbiter
mcp` session as ana driven by the model (`driver.drive`), the hard
assertions over the transcript and the memory afterwards
(`scenarios.check`), then the judge on the rubric (`judge.judge`) unless
it is switched off. `scoreboard` is the seed's table: assertion pass rate
and rubric mean, per scenario and overall.
"""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import msgspec

from bench.scenarios import agents
from bench.scenarios.corpus import USER, seed
from bench.scenarios.driver import Usage, drive, server_params
from bench.scenarios.judge import SYSTEM as JUDGE_SYSTEM
from bench.scenarios.judge import Judged, judge
from bench.scenarios.scenarios import Ctx, Scenario, check


class RunResult(msgspec.Struct, kw_only=True):
    scenario: str
    rep: int
    #: Assertion name -> None (held) or what went wrong.
    checks: dict[str, str | None]
    judged: Judged | None = None
    usage: Usage
    error: str | None = None

    @property
    def passed(self) -> bool:
        """Every assertion held, and the model answered: a run cut short has not done its task."""
        return self.error is None and all(v is None for v in self.checks.values())


#: Runs started by this process, across runners: each names its tenant.
_TENANTS = itertools.count(1)


@dataclass
class Harness:
    """What every run shares: the daemon, the Messages client, the models and the briefing mode."""

    home: Path
    socket: Path
    admin_token: str
    model_client: anthropic.AsyncAnthropic
    model: str
    judge_model: str | None
    briefing: str = "full"
    #: Where transcripts go (one JSON file a run); None keeps none.
    transcripts: Path | None = None
    #: `--fake`: the fake Messages server and the scripted agent answering on it.
    fake: Any = None
    agent: str = "careful"

    async def run(self, scenario: Scenario, rep: int) -> RunResult:
        # A tenant per run: a fresh memory on the same daemon, which no other run's session can see.
        # Named for this process's count: two runners on one daemon in the same second once took the same name.
        tenant = f"run{next(_TENANTS)}-{os.getpid()}-{int(time.time())}"
        fx = seed(self.socket, self.admin_token, tenant)
        token_file = self.home / f"{tenant}.token"
        token_file.touch(mode=0o600)
        token_file.write_text(fx.tokens[USER])
        if self.fake is not None:
            self.fake.set_script(self._responder(scenario.key))
        with open(self.home / "mcp-stderr.log", "a") as errlog:
            t = await drive(server=server_params(self.home, token_file), model_client=self.model_client,
                            model=self.model, turns=scenario.turns, briefing=self.briefing,
                            scenario=scenario.key, rep=rep, errlog=errlog)
        with fx.client(self.socket) as client:
            checks = check(scenario, Ctx(t, fx, client))
        judged = await judge(self.model_client, self.judge_model, scenario, t) if self.judge_model else None
        if self.transcripts is not None:
            self.transcripts.mkdir(parents=True, exist_ok=True)
            path = self.transcripts / f"{scenario.key}-{rep}.json"
            path.write_bytes(msgspec.json.format(msgspec.json.encode({"transcript": t, "checks": checks,
                                                                      "judged": judged})))
        return RunResult(scenario=scenario.key, rep=rep, checks=checks, judged=judged, usage=t.usage, error=t.error)

    def _responder(self, key: str):
        from tests.fake_messages import Reply

        agent = agents.AGENTS[self.agent]

        def respond(body: dict[str, Any]):
            if body.get("system") == JUDGE_SYSTEM:
                return agents.judge_reply(body)
            blocks, stop = agents.content(agents.act(agent, key, body))
            return Reply(blocks, stop)

        return respond


async def run_all(h: Harness, scenarios: list[Scenario], reps: int, *, progress: bool = True) -> list[RunResult]:
    results = []
    for scenario in scenarios:
        for rep in range(1, reps + 1):
            r = await h.run(scenario, rep)
            results.append(r)
            if progress:
                failed = [f"{k}: {v}" for k, v in r.checks.items() if v is not None]
                cut = f" [{r.error}]" if r.error else ""
                print(f"{scenario.key} #{rep}: {'pass' if r.passed else 'FAIL ' + '; '.join(failed)}{cut}",
                      file=sys.stderr)
    return results


class ScenarioScore(msgspec.Struct, kw_only=True):
    passed: int
    runs: int
    rubric_mean: float | None
    failures: dict[str, int]
    #: Runs cut short (an API error, the turn limit): their assertions ran on what had happened.
    errors: int = 0


class Scoreboard(msgspec.Struct, kw_only=True):
    """One harness run's summary, as appended to the results log."""

    at: str
    model: str
    judge_model: str | None
    briefing: str
    agent: str | None
    reps: int
    passed: int
    runs: int
    pass_rate: float
    rubric_mean: float | None
    judge_failures: int
    agent_usage: Usage
    judge_usage: Usage
    scenarios: dict[str, ScenarioScore]


def scoreboard(h: Harness, results: list[RunResult], reps: int) -> Scoreboard:
    per: dict[str, ScenarioScore] = {}
    agent_usage, judge_usage = Usage(), Usage()
    scores: list[float] = []
    judge_failures = 0
    for r in results:
        s = per.setdefault(r.scenario, ScenarioScore(passed=0, runs=0, rubric_mean=None, failures={}))
        s.runs += 1
        s.passed += r.passed
        s.errors += r.error is not None
        for name, why in r.checks.items():
            if why is not None:
                s.failures[name] = s.failures.get(name, 0) + 1
        agent_usage.add(r.usage)
        if r.judged is not None:
            judge_usage.add(r.judged.usage)
            judge_failures += r.judged.verdict is None
    for key, s in per.items():
        marks = [r.judged.verdict.score for r in results
                 if r.scenario == key and r.judged is not None and r.judged.verdict is not None]
        s.rubric_mean = round(statistics.fmean(marks), 2) if marks else None
        scores += marks
    passed = sum(r.passed for r in results)
    return Scoreboard(
        at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), model=h.model, judge_model=h.judge_model,
        briefing=h.briefing, agent=h.agent if h.fake is not None else None, reps=reps, passed=passed,
        runs=len(results), pass_rate=round(passed / len(results), 4) if results else 0.0,
        rubric_mean=round(statistics.fmean(scores), 2) if scores else None, judge_failures=judge_failures,
        agent_usage=agent_usage, judge_usage=judge_usage, scenarios=per)


def render(board: Scoreboard) -> str:
    who = f"scripted agent '{board.agent}' (fake Messages server)" if board.agent else f"model {board.model}"
    lines = [f"{who}, briefing {board.briefing}, {board.reps} repetition(s)", "",
             f"{'scenario':<22} {'pass':>6} {'rubric':>7}  failed assertions"]
    for key, s in board.scenarios.items():
        rubric = f"{s.rubric_mean:.2f}" if s.rubric_mean is not None else "-"
        failed = ", ".join(f"{name} x{n}" for name, n in s.failures.items())
        if s.errors:
            failed += f" ({s.errors} run(s) cut short: see the transcripts' `error`)"
        lines.append(f"{key:<22} {s.passed:>3}/{s.runs:<2} {rubric:>7}  {failed}")
    rubric = f"{board.rubric_mean:.2f}" if board.rubric_mean is not None else "-"
    lines += ["", f"hard assertions: {board.passed}/{board.runs} runs pass ({100 * board.pass_rate:.1f}%); "
                  f"rubric mean {rubric}" + (f" ({board.judge_failures} unreadable verdicts)"
                                             if board.judge_failures else "")]
    for name, u in (("driven model", board.agent_usage), ("judge", board.judge_usage)):
        if not u.requests:
            continue
        # The fake server's token counts are placeholders: a scripted run reports what it sent, in characters.
        tokens = "" if board.agent else (
            f", tokens: {u.input_tokens} input + {u.cache_read_tokens} cache read + {u.cache_write_tokens} cache "
            f"write, {u.output_tokens} output")
        lines.append(f"{name}: {u.requests} requests, {u.request_chars} characters sent{tokens}")
    return "\n".join(lines)
