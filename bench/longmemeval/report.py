"""The results: `results.json` (typed) and `results.md` (the table people compare)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import msgspec

from bench.longmemeval.metrics import Scores, VariantScores

#: Bumped when the protocol or a metric changes meaning, so old results are not compared blindly.
HARNESS_VERSION = "3"  # 2: no source on entries; official NDCG and abstention; LoCoMo; phrasings
# 3: questions with no has_answer turn score 0 officially (were skipped); session_r@5 is answer_session_turn@5


class DatasetInfo(msgspec.Struct, kw_only=True):
    """Which data was measured.

    `questions` and `turns` count the questions run; `tenant_questions` the
    questions whose haystacks the tenant holds (tenant-wide recall searches
    them all).
    """

    path: str
    sha256: str
    questions: int
    turns: int
    questions_in_file: int
    tenant_questions: int
    abstention: int
    truth_from: dict[str, int]
    no_truth: list[str]


class Settings(msgspec.Struct, kw_only=True):
    """Every knob that changes the numbers."""

    variants: list[str]
    limit: int | None
    k: int
    rerank_model: str
    fine_model: str
    daemon: str
    phrasings: list[str] = msgspec.field(default_factory=lambda: ["as-written"])
    truth: str = "official: every question but _abs ones; one with no has_answer turn scores 0"
    empty_turns: str = "skipped and counted"
    dates: str = "session date read as UTC, + 60 s per turn index"
    title: str = "first 200 bytes, whitespace folded, control characters read as spaces"


class Version(msgspec.Struct, kw_only=True):
    """Harness protocol version, the daemon's version and the checkout's commit (None outside git)."""

    harness: str
    arbiter: str
    commit: str | None


class Machine(msgspec.Struct, kw_only=True):
    """Where it ran: numbers only compare on like machines."""

    platform: str
    python: str
    cpus: int | None
    memory_gib: float | None


class IngestStats(msgspec.Struct, kw_only=True):
    """How the haystacks went in. `reused` when the home already held them all."""

    entries: int
    seconds: float
    entries_per_s: float
    conversations: int
    batch_size: int
    skipped_empty: int
    truncated: int
    reused: bool = False
    #: Turns whose title held control characters, read as spaces (their content is kept as written).
    cleaned: int = 0


class NotRun(msgspec.Struct):
    """A variant that was asked for but not run, and why."""

    status: str


class Results(msgspec.Struct, kw_only=True):
    """Everything `results.json` holds."""

    dataset: DatasetInfo
    settings: Settings
    version: Version
    machine: Machine
    variants: dict[str, VariantScores | NotRun]
    ingest: IngestStats | None
    #: The same runs scored with round 1's truth: every question with any
    #: ground truth, the answer sessions' turns when no turn is flagged.
    fallback: dict[str, VariantScores] = {}


def machine() -> Machine:
    """A description of this machine."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):  # not every platform exposes these
        memory = None
    return Machine(
        platform=platform.platform(),
        python=platform.python_version(),
        cpus=os.cpu_count(),
        memory_gib=round(memory, 1) if memory is not None else None,
    )


def commit() -> str | None:
    """The git commit of this checkout, or None when it is not one."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def write(results: Results, out: Path) -> tuple[Path, Path]:
    """Write results.json and results.md into `out` (created if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "results.json", out / "results.md"
    json_path.write_bytes(msgspec.json.format(msgspec.json.encode(results), indent=2) + b"\n")
    md_path.write_text(markdown(results), encoding="utf-8")
    return json_path, md_path


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.1f}%"


def _num(x: float | None, fmt: str) -> str:
    return "–" if x is None else format(x, fmt)


def _row(name: str, s: Scores) -> str:
    cells = [
        name,
        str(s.n),
        _pct(s.r_at_1),
        _pct(s.r_at_5),
        _pct(s.r_at_10),
        _num(s.mrr, ".3f"),
        _num(s.ndcg_at_10, ".3f"),
        _pct(s.answer_session_turn_at_5),
        _num(s.latency_ms.p50, ".0f"),
        _num(s.latency_ms.p95, ".0f"),
        _num(s.latency_ms.p99, ".0f"),
    ]
    return "| " + " | ".join(cells) + " |"


_HEAD = (
    "| {first} | n | R@1 | R@5 | R@10 | MRR | NDCG@10 | answer-session turn@5 | p50 ms | p95 ms | p99 ms |\n"
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
)


def markdown(results: Results) -> str:
    """The results as Markdown: the variant table, then one per-type table per variant run."""
    d = results.dataset
    lines = [
        "# Retrieval",
        "",
        f"{d.questions} questions, {d.turns} turns from `{Path(d.path).name}` (sha256 {d.sha256[:12]}…); "
        f"Arbiter {results.version.arbiter}, harness v{results.version.harness}.",
    ]
    if d.no_truth:
        lines.append(f"{len(d.no_truth)} question(s) without ground truth were queried but not scored.")
    if results.ingest is not None:
        i = results.ingest
        how = "reused from an earlier ingest" if i.reused else "ingested"
        lines.append(f"{i.entries} entries {how} in {i.seconds:.1f} s ({i.entries_per_s:.0f}/s).")
    lines += ["", _HEAD.format(first="variant")]
    for name, v in results.variants.items():
        if isinstance(v, NotRun):
            lines.append(f"| {name} | {v.status} |" + " |" * 9)
        else:
            lines.append(_row(name, v))
    for name, v in results.variants.items():
        if isinstance(v, VariantScores) and v.notes:
            # A note means a stage (e.g. the LLM rerank) fell back: the row is not what its name says.
            lines.append(f"\n{name}: {v.notes} recall(s) came back with a note; see outcomes-{name}.jsonl.")
    if any(f.n != getattr(results.variants.get(name), "n", f.n) for name, f in results.fallback.items()):
        lines += [
            "",
            "Scored as round 1 did (abstention questions too, whole answer sessions where no turn is flagged):",
            "",
            _HEAD.format(first="variant"),
        ]
        lines += [_row(name, f) for name, f in results.fallback.items()]
    for name, v in results.variants.items():
        if isinstance(v, VariantScores):
            lines += ["", f"## {name} by question type", "", _HEAD.format(first="type")]
            lines += [_row(t, s) for t, s in v.by_type.items()]
    return "\n".join(lines) + "\n"


def official_markdown(summaries) -> str:
    """The official protocol's means, one row per granularity, level and phrasing.

    `official`: the official code's mean (every non-abstention question);
    `scored`: only the questions that have a correct unit.
    """
    lines = [
        "| units | level | phrasing | mean over | n | recall_any@5 | recall_any@10 | recall_all@5 | ndcg_any@5 "
        "| ndcg_any@10 | p50 ms |",
        "|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for s in summaries:
        for label, n, means in (("official", s.questions, s.official), ("scored", s.scored, s.scored_only)):
            for level, m in means.items():
                cells = [
                    s.granularity, level, s.phrasing, label, str(n),
                    *(_pct(m.get(k)) for k in ("recall_any@5", "recall_any@10", "recall_all@5")),
                    *(_num(m.get(k), ".3f") for k in ("ndcg_any@5", "ndcg_any@10")),
                    _num(s.latency_ms_p50, ".2f"),
                ]
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
