"""Run the scenario harness: `python -m bench.scenarios --help`."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio

from arbiter import paths
from bench.longmemeval.daemon import Daemon
from bench.scenarios import agents
from bench.scenarios.driver import BRIEFINGS
from bench.scenarios.runner import Harness, render, run_all, scoreboard
from bench.scenarios.scenarios import BY_KEY, SCENARIOS

MODEL = "claude-sonnet-4-6"
JUDGE_MODEL = "claude-opus-4-1"
OUT = Path(__file__).resolve().parents[1] / "results" / "scenarios"


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.scenarios",
        description="Drive a model through the ten memory scenarios (seed 000, §5) and print the scoreboard.",
        epilog="examples:\n  ANTHROPIC_API_KEY=... python -m bench.scenarios --reps 3\n"
               "  python -m bench.scenarios --briefing flat-tags --scenario supersede\n"
               "  python -m bench.scenarios --fake --agent careless",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=3, help="repetitions of each scenario (default 3)")
    p.add_argument("--scenario", action="append", choices=list(BY_KEY), help="run only this one (repeatable)")
    p.add_argument("--briefing", choices=BRIEFINGS, default="full",
                   help="what the model gets on connect: the server's briefing, its flat tag list alone "
                        "(the seed's baseline), or nothing")
    p.add_argument("--model", default=MODEL, help=f"the driven model (default {MODEL})")
    p.add_argument("--judge-model", default=JUDGE_MODEL, help=f"the rubric judge (default {JUDGE_MODEL})")
    p.add_argument("--no-judge", action="store_true", help="hard assertions only: no judge calls")
    p.add_argument("--fake", action="store_true",
                   help="no key: the local fake Messages server answers, with a scripted agent")
    p.add_argument("--name-clusters", action="store_true",
                   help="give the daemon the key too, so it names topic clusters with the model as in production "
                        "(a few fast-model calls a run); by default they keep their tag-list names")
    p.add_argument("--agent", choices=list(agents.AGENTS), default="careful", help="the scripted agent for --fake")
    p.add_argument("--out", type=Path, default=OUT,
                   help="results.jsonl (appended) and transcripts/ go here (default bench/results/scenarios)")
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error("--reps must be at least 1")
    if not args.fake and not os.environ.get("ANTHROPIC_API_KEY"):
        p.error("set ANTHROPIC_API_KEY to drive a real model, or pass --fake for the scripted agents")
    return args


async def _main(args: argparse.Namespace, home: Path, daemon: Daemon, fake, key: str | None) -> str:
    import anthropic

    client = (anthropic.AsyncAnthropic(api_key="fake", base_url=fake.base_url, max_retries=0) if fake
              else anthropic.AsyncAnthropic(api_key=key))
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    h = Harness(home=home, socket=daemon.socket_path, admin_token=paths.admin_token_path(home).read_text().strip(),
                model_client=client, model="scripted" if fake else args.model,
                judge_model=None if args.no_judge else ("scripted-judge" if fake else args.judge_model),
                briefing=args.briefing, transcripts=args.out / "transcripts" / run_id, fake=fake, agent=args.agent)
    chosen = [BY_KEY[k] for k in args.scenario] if args.scenario else SCENARIOS
    results = await run_all(h, chosen, args.reps)
    board = scoreboard(h, results, args.reps)
    args.out.mkdir(parents=True, exist_ok=True)
    import msgspec

    with open(args.out / "results.jsonl", "ab") as log:
        log.write(msgspec.json.encode({"run": run_id, **msgspec.structs.asdict(board)}) + b"\n")
    return render(board) + f"\n\ntranscripts: {h.transcripts}\nresults log: {args.out / 'results.jsonl'}"


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    key = None if args.fake else os.environ["ANTHROPIC_API_KEY"]
    if args.fake or not args.name_clusters:
        # The daemon inherits this environment: with a key it would name clusters through the API, which a
        # scripted run must never reach and a keyed run pays for only when asked.
        os.environ.pop("ANTHROPIC_API_KEY", None)
    with tempfile.TemporaryDirectory(prefix="arb-scn-") as tmp:
        home = Path(tmp)
        with Daemon(home) as daemon:
            if args.fake:
                from tests.fake_messages import FakeMessages

                with FakeMessages() as fake:
                    print(anyio.run(_main, args, home, daemon, fake, None))
            else:
                print(anyio.run(_main, args, home, daemon, None, key))


if __name__ == "__main__":
    sys.exit(main())
