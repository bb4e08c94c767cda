"""bench.devsets end to end on the tiny fixtures: its own daemons ingest, the stages run in-process, one table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.devsets import ALL, VARIANTS, Row, mean, moved, table

ROOT = Path(__file__).parents[2]
DATA = ROOT / "tests" / "data"


def test_the_four_sets_every_stage_one_table(tmp_path: Path) -> None:
    args = ["--lme", DATA / "longmemeval_tiny.json", "--locomo", DATA / "locomo_tiny.json", "--work", tmp_path]
    run = subprocess.run(
        [sys.executable, "-m", "bench.devsets", *map(str, args), "--only", "- replies"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert lines[0].startswith("| variant | LME R@1 / R@5 / R@10 | MRR | LME 3rd")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines[2:lines.index("") - 1]}
    assert set(rows) == {"as shipped", "- replies"}
    # Tiny LongMemEval: the three officially scored questions all rank first, in both phrasings.
    assert "| 100.0 / 100.0 / 100.0 | 1.000 | 100.0 / 100.0 / 100.0 | 1.000 |" in rows["as shipped"]
    # Tiny LoCoMo: Caroline's reply to Melanie's "Anything you're excited
    # about...?" holds the answer and shares only her name with the question;
    # the question lends it its match and, said by the person asked about, it
    # ranks first (rank 4 without replies: MRR 1 against 0.8125).
    # Notes: three questions (the fourth's evidence has no note); the adoption question's note is third, under
    # Melanie's note that names Caroline and "adoption process" (a lone note has no replies to lend it a match).
    assert rows["as shipped"].startswith("| as shipped" + " | 100.0 / 100.0 / 100.0 | 1.000" * 3
                                         + " | 66.7 / 100.0 / 100.0 | 0.778 |")
    assert "| 75.0 / 100.0 / 100.0 | 0.812 |" in rows["- replies"]
    # A second run reuses the homes and measures the same.
    again = subprocess.run(
        [sys.executable, "-m", "bench.devsets", *map(str, args), "--only", "as shipped"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[2].rsplit(" | ", 1)[0] == rows["as shipped"].rsplit(" | ", 1)[0]


def test_mean_and_deltas_by_hand() -> None:
    a, b = Row(60, 90, 95, 0.7, 1.0), Row(30, 60, 66, 0.4, 3.0)
    assert mean([a, b]) == pytest.approx((60 + 90 + 95 + 30 + 60 + 66) / 6)
    # Four sets: LME and its third-person copy count half each.
    assert mean([a, a, b, b]) == pytest.approx(((60 + 90 + 95) / 3 + 2 * (30 + 60 + 66) / 3) / 3)
    text = table({"as shipped": [a, b, a, b], "- x": [b, a, a, b]})
    assert "| as shipped | 60.0 / 90.0 / 95.0 | 0.700 |" in text
    assert "+0.0 / +0.0 / +0.0 / +0.0" in text and "-30.0 / +30.0 / +0.0 / +0.0" in text
    assert len(ALL) == 4 and VARIANTS[0][0] == "as shipped"
    # Questions moved: each question's best rank against the first row's (11 is past the top 10).
    shipped, other = Row(0, 0, 0, 0, 0, ranks=(2, 3, 1, 11)), Row(0, 0, 0, 0, 0, ranks=(1, 3, 11, 5))
    assert moved(other, shipped) == "2/1" and moved(shipped, shipped) == "0/0"
    assert moved(a, shipped) == "-"  # no ranks recorded (bench.facts_recall's rows)
    assert "| 2/1 · 0/0 · - |" in table({"as shipped": [shipped, shipped, a], "- y": [other, shipped, a]})


def test_graph_mode_derives_the_edges_and_compares_graph_recall(tmp_path: Path) -> None:
    args = ["--lme", DATA / "longmemeval_tiny.json", "--locomo", DATA / "locomo_tiny.json", "--work", tmp_path]
    run = subprocess.run([sys.executable, "-m", "bench.devsets", *map(str, args), "--graph"],
                         cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "lme-graph" / "derived").exists() and (tmp_path / "locomo-graph" / "derived").exists()
    import apsw

    db = apsw.Connection(str(tmp_path / "locomo-graph" / "arbiter.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert db.execute("SELECT count(*) FROM entry_entities").fetchone()[0] > 0  # the speakers, at least
        assert db.execute("SELECT count(*) FROM derive_queue").fetchone()[0] == 0
    finally:
        db.close()
    rows = [line.split(" | ")[0].lstrip("| ") for line in run.stdout.splitlines()]
    assert "as shipped" in rows and "+ graph" in rows
    assert "| set | type | as shipped R@5 | + graph R@5 |" in run.stdout


def test_reach_counts_a_reply_that_shares_only_its_speakers_name_as_out_of_words_reach(tmp_path: Path) -> None:
    args = ["--lme", DATA / "longmemeval_tiny.json", "--locomo", DATA / "locomo_tiny.json", "--work", tmp_path]
    run = subprocess.run([sys.executable, "-m", "bench.devsets", *map(str, args), "--reach"],
                         cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    # "What is Caroline excited about in the adoption process?" is answered by
    # "Caroline: I'm thrilled to make a family...": only her name is shared, and
    # a speaker's own name does not count. The question before it lends it its
    # match: a hit at every k, out of words' reach.
    assert "| LoCoMo | 1 | 100.0 | 0.0 | 0.0 | 25.0 |" in run.stdout
    assert "| LoCoMo | 5 | 100.0 | 0.0 | 0.0 | 25.0 |" in run.stdout
    assert "| LME | 10 | 100.0 | 0.0 | 0.0 | 0.0 |" in run.stdout
    assert "| LoCoMo | 25 | 100.0 | 0.0 | 0.0 | 25.0 |" in run.stdout  # the rerank head


def test_notes_are_written_by_the_issues_protocol_and_ranked_beside_plain_fts5(tmp_path: Path) -> None:
    args = ["--lme", DATA / "longmemeval_tiny.json", "--locomo", DATA / "locomo_tiny.json", "--work", tmp_path]
    run = subprocess.run([sys.executable, "-m", "bench.devsets", *map(str, args), "--only", "as shipped"],
                         cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    from arbiter.store import connect

    db = connect(tmp_path / "notes" / "arbiter.db", readonly=True)
    try:
        # One tenant per conversation; each observation a learning with no speaker, conversation or tags,
        # titled by its first six words, valid from its session's date (8 May 2023, 13:56 UTC; 20 June, 10:00).
        assert db.execute("SELECT name FROM tenants").fetchall() == [("tiny-1",)]
        rows = db.execute("SELECT type, title, content, speaker, conversation_id, tags, valid_from FROM entries "
                          "ORDER BY id").fetchall()
    finally:
        db.close()
    assert len(rows) == 5
    assert rows[0] == ("learning", "Caroline went to an LGBTQ support…",
                       "Caroline went to an LGBTQ support group and found it powerful.", None, None, "[]",
                       1683554160 * 1_000_000)
    assert rows[2][1] == "Melanie asked Caroline about the adoption…"
    assert rows[4][1:3] == ("Caroline started researching adoption agencies.",) * 2  # five words: no "…"
    assert rows[4][6] == 1687255200 * 1_000_000
    out = run.stdout
    assert "Notes: 3 questions over 5 notes (1 whose evidence has no note skipped)" in out
    assert "| plain FTS5, bm25 10/4 | 66.7 / 100.0 / 100.0 | 0.833 |" in out
    assert "| as shipped | 66.7 / 100.0 / 100.0 | 0.778 |" in out
