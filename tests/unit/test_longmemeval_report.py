"""bench/longmemeval/report.py: results.json shape and the Markdown table."""

from __future__ import annotations

import json
from pathlib import Path

from bench.longmemeval import report
from bench.longmemeval.metrics import Outcome, variant_scores


def outcome(qid: str, qtype: str, ranked: list[int], truth: list[int], ms: float, **kw) -> Outcome:
    return Outcome(
        question_id=qid, question_type=qtype, ranked=ranked, truth=truth, answer_sessions=truth, latency_ms=ms, **kw
    )


def results() -> report.Results:
    outcomes = [
        outcome("a", "multi-session", [1, 2], [2], 5),
        outcome("b", "temporal-reasoning", [3], [3], 7),
        outcome("c", "temporal-reasoning", [], [], 9),
    ]
    return report.Results(
        dataset=report.DatasetInfo(
            path="data/longmemeval_s.json",
            sha256="ab" * 32,
            questions=3,
            turns=30,
            questions_in_file=3,
            tenant_questions=3,
            abstention=0,
            truth_from={"turns": 2, "none": 1},
            no_truth=["c"],
        ),
        settings=report.Settings(
            variants=["graduated", "rerank"], limit=None, k=10, rerank_model="m1", fine_model="m2", daemon="own"
        ),
        version=report.Version(harness=report.HARNESS_VERSION, arbiter="0.1.0", commit=None),
        machine=report.machine(),
        variants={"graduated": variant_scores(outcomes), "rerank": report.NotRun("not run: no ANTHROPIC_API_KEY")},
        ingest=report.IngestStats(
            entries=30, seconds=0.5, entries_per_s=60.0, conversations=3, batch_size=2000, skipped_empty=0, truncated=0
        ),
    )


def test_results_json_shape(tmp_path: Path) -> None:
    json_path, md_path = report.write(results(), tmp_path / "out")
    data = json.loads(json_path.read_text(encoding="utf-8"))
    assert {"dataset", "settings", "version", "machine", "variants", "ingest"} <= data.keys()
    assert {"path", "sha256", "questions", "turns"} <= data["dataset"].keys()
    assert {"entries", "seconds", "entries_per_s"} <= data["ingest"].keys()
    graduated = data["variants"]["graduated"]
    assert {"n", "r@1", "r@5", "r@10", "mrr", "ndcg@10", "answer_session_turn@5", "latency_ms", "by_type"} <= graduated.keys()
    assert graduated["n"] == 2 and graduated["no_truth"] == 1 and graduated["r@1"] == 0.5
    assert set(graduated["by_type"]) == {"multi-session", "temporal-reasoning"}
    assert data["variants"]["rerank"] == {"status": "not run: no ANTHROPIC_API_KEY"}
    assert md_path.read_text(encoding="utf-8") == report.markdown(results())


def test_markdown_table() -> None:
    md = report.markdown(results())
    lines = md.splitlines()
    header = next(line for line in lines if line.startswith("| variant"))
    rows = {line.split(" | ")[0][2:]: line for line in lines if line.startswith("| ") and " | " in line}
    assert rows["graduated"].startswith("| graduated | 2 | 50.0% | 100.0% | 100.0% | 0.750 |")
    assert "not run: no ANTHROPIC_API_KEY" in rows["rerank"]
    # Every row of the variant table has as many cells as its header.
    assert rows["rerank"].count("|") == rows["graduated"].count("|") == header.count("|")
    assert "## graduated by question type" in md
    assert "1 question(s) without ground truth" in md


def test_notes_are_called_out() -> None:
    r = results()
    noted = outcome("n", "x", [1], [1], 3, note="rerank failed")
    r.variants["rerank"] = variant_scores([noted])
    assert "rerank: 1 recall(s) came back with a note" in report.markdown(r)
    assert "graduated: " not in report.markdown(r)
