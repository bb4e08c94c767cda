"""The LongMemEval harness end to end: its own daemon subprocess, the real socket, the tiny fixture.

In the fixture each question's words occur only in its ground-truth turns, so
any BM25 ranking puts ground truth first: R@K, MRR and session R@5 are 1.0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest import approx

from arbiter.client import Client
from tests.fake_messages import FakeMessages

ROOT = Path(__file__).parents[2]
TINY = ROOT / "tests" / "data" / "longmemeval_tiny.json"
TYPES = {
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
}


def bench(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # A developer's real key never reaches the harness or its daemon; tests that
    # want the LLM variants point both at the fake Messages server instead.
    env = {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "bench.longmemeval", *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def check_results(out: Path, variants: tuple[str, ...] = ("bm25", "graduated")) -> dict:
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert {"dataset", "settings", "version", "machine", "variants", "ingest"} <= data.keys()
    assert data["dataset"]["questions"] == 6 and data["dataset"]["turns"] == 34
    assert data["dataset"]["no_truth"] == ["tiny_no_truth"]
    assert data["dataset"]["truth_from"] == {"turns": 3, "sessions": 2, "none": 1}
    for name in variants:
        # The official mean is over every question but `_abs`: the three with flagged
        # turns, and tiny_multi, with session truth only, which has no correct unit
        # and scores 0 though its sessions' turns rank first (round 1's fallback,
        # which also scores the abstention question, finds them).
        v, f = data["variants"][name], data["fallback"][name]
        assert (v["n"], v["no_truth"]) == (4, 2)
        assert (f["n"], f["no_truth"]) == (5, 1)
        assert (v["r@1"], v["r@5"], v["r@10"], v["mrr"], v["answer_session_turn@5"]) == (0.75,) * 5, name
        assert (f["r@1"], f["r@5"], f["r@10"], f["mrr"], f["answer_session_turn@5"]) == (1.0, 1.0, 1.0, 1.0, 1.0), name
        assert 0 < v["ndcg@10"] <= 1
        assert set(v["latency_ms"]) == {"p50", "p95", "p99"}
        assert 0 < v["latency_ms"]["p50"] <= v["latency_ms"]["p95"] <= v["latency_ms"]["p99"]
        assert set(v["by_type"]) == TYPES
        assert v["by_type"]["single-session-preference"]["n"] == 0
        lines = (out / f"outcomes-{name}.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == 6
    table = (out / "results.md").read_text(encoding="utf-8")
    assert all(f"| {name} | 4 | 75.0% | 75.0% | 75.0% | 0.750 |" in table for name in variants)
    return data


def test_run_on_its_own_daemon(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = bench("run", "--dataset", TINY, "--variants", "bm25,graduated,rerank,cascade", "--out", out)
    assert result.returncode == 0, result.stderr
    data = check_results(out)
    assert data["variants"]["rerank"] == {"status": "not run: no ANTHROPIC_API_KEY"}
    assert data["variants"]["cascade"] == {"status": "not run: no ANTHROPIC_API_KEY"}
    assert data["ingest"]["entries"] == 32
    assert data["ingest"]["skipped_empty"] == 2
    assert data["ingest"]["conversations"] == 6
    assert data["settings"]["daemon"] == "own"
    assert "| graduated | 4 |" in result.stdout


def test_ingest_once_query_twice(home: Path, tmp_path: Path) -> None:
    first = bench("ingest", "--dataset", TINY, "--home", home, "--limit", "2")
    assert first.returncode == 0, first.stderr
    assert "ingested 14 entries into 2 conversations" in first.stdout
    second = bench("ingest", "--dataset", TINY, "--home", home)
    assert second.returncode == 0, second.stderr
    assert "ingested 18 entries into 4 conversations" in second.stdout
    again = bench("ingest", "--dataset", TINY, "--home", home)
    assert again.returncode == 0, again.stderr
    assert "nothing to ingest" in again.stdout
    for run in ("a", "b"):
        result = bench("query", "--home", home, "--variants", "bm25,graduated", "--out", tmp_path / run)
        assert result.returncode == 0, result.stderr
        check_results(tmp_path / run)


def test_run_against_a_running_daemon(daemon, tmp_path: Path) -> None:
    token_file = daemon.home / "tenants" / "default.token"
    state = tmp_path / "state.json"
    args = ["--socket", daemon.socket, "--token-file", token_file, "--state", state]
    result = bench("run", "--dataset", TINY, "--variants", "bm25,graduated", "--out", tmp_path / "out", *args)
    assert result.returncode == 0, result.stderr
    data = check_results(tmp_path / "out")
    assert data["settings"]["daemon"] == "external"
    with Client(daemon.socket, daemon.token) as c:
        assert c.status().entries_active == 32
        # Nothing that says where an answer is reaches a searched column.
        assert all(e.source is None for e in c.list(limit=100))
    # The state's ground-truth ids name the flagged turns themselves.
    saved = json.loads(state.read_text(encoding="utf-8"))
    truth = {q["question_id"]: q["truth_ids"] for q in saved["questions"]}
    with Client(daemon.socket, daemon.token) as c:
        assert "Kamaka ukulele" in c.get(truth["tiny_single_user"][0]).content
        outcomes = [json.loads(line) for line in (tmp_path / "out" / "outcomes-graduated.jsonl").read_text().splitlines()]
        top = {o["question_id"]: o["ranked"][0] for o in outcomes if o["ranked"]}
        assert "Kamaka" in c.get(top["tiny_single_user"]).content
    # A re-run finds the haystacks in the state and writes nothing more.
    rerun = bench("run", "--dataset", TINY, "--variants", "bm25", "--out", tmp_path / "again", *args)
    assert rerun.returncode == 0, rerun.stderr
    with Client(daemon.socket, daemon.token) as c:
        assert c.status().entries_active == 32


def test_a_tenant_with_other_entries_is_refused(daemon, tmp_path: Path) -> None:
    with daemon.client() as c:
        c.remember(type="context", title="unrelated", content="an entry the harness did not write")
    token_file = daemon.home / "tenants" / "default.token"
    result = bench(
        "ingest", "--dataset", TINY, "--socket", daemon.socket, "--token-file", token_file, "--state", tmp_path / "s"
    )
    assert result.returncode == 1
    assert "fresh --home" in result.stderr


def test_limit_runs_the_first_questions(tmp_path: Path) -> None:
    result = bench("run", "--dataset", TINY, "--variants", "bm25", "--limit", "3", "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert data["dataset"]["questions"] == 3
    # The third (tiny_multi) has session truth only: no correct unit, a miss in the official mean.
    assert (data["variants"]["bm25"]["n"], data["variants"]["bm25"]["r@5"]) == (3, approx(2 / 3, abs=1e-4))


def test_llm_variants_run_with_a_key(tmp_path: Path, fake_messages: FakeMessages) -> None:
    # An empty order keeps the lexical order, so rerank scores what graduated scores.
    fake_messages.set_script(lambda body: '{"ids": []}')
    env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_messages.base_url}
    out = tmp_path / "out"
    result = bench("run", "--dataset", TINY, "--variants", "graduated,rerank,cascade", "--out", out, env=env)
    assert result.returncode == 0, result.stderr
    data = check_results(out, ("graduated", "rerank", "cascade"))
    assert data["variants"]["rerank"]["notes"] == data["variants"]["cascade"]["notes"] == 0
    models = {r["model"] for r in fake_messages.requests}
    assert models == {data["settings"]["rerank_model"], data["settings"]["fine_model"]}


def test_grade_with_a_key(home: Path, tmp_path: Path, fake_messages: FakeMessages) -> None:
    def answer(body: dict) -> str:
        prompt = body["messages"][0]["content"]
        return "yes" if "Answer yes or no only." in prompt else "From the chats: Kamaka."

    fake_messages.set_script(answer)
    assert bench("ingest", "--dataset", TINY, "--home", home).returncode == 0
    env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_messages.base_url}
    result = bench("grade", "--dataset", TINY, "--home", home, "--out", tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    graded = json.loads((tmp_path / "grade.json").read_text(encoding="utf-8"))
    assert (graded["n"], graded["accuracy"], graded["abstention"]) == (6, 1.0, 1.0)
    assert len(fake_messages.requests) == 12  # one answer and one verdict per question
    first = fake_messages.requests[0]["messages"][0]["content"]
    assert "Kamaka ukulele" in first and "Which ukulele brand did I buy in Lisbon?" in first


DECOYS = ROOT / "tests" / "data" / "longmemeval_decoys.json"


def test_decoys_separate_a_good_ranking_from_a_bad_one(tmp_path: Path) -> None:
    # decoy_voice: the assistant's "You could buy your sister a book." outscores
    # the user's own "I had to buy my sister a silk scarf..." on BM25 alone;
    # voice must put the user's words first, asked as written or as an agent
    # asks ("the user"). decoy_scope: another question's conversation holds a
    # denser "kayak color" turn; only the graduated scope keeps the answer first.
    out = tmp_path / "out"
    result = bench("run", "--dataset", DECOYS, "--variants", "bm25,graduated", "--phrasing",
                   "as-written,third-person", "--out", out)
    assert result.returncode == 0, result.stderr
    v = json.loads((out / "results.json").read_text(encoding="utf-8"))["variants"]
    assert v["graduated"]["r@1"] == v["graduated (third-person)"]["r@1"] == 1.0
    assert v["bm25"]["r@1"] == v["bm25 (third-person)"]["r@1"] == 0.5
    assert v["bm25"]["r@5"] == 1.0


def odd_fixtures(tmp_path: Path) -> tuple[Path, Path]:
    """The tiny LongMemEval file with control characters and half a surrogate pair in turns, as published
    LongMemEval-S has (`\\x02` and others in five turns' first 200 bytes), and a LoCoMo file with the same."""
    data = json.loads(TINY.read_text(encoding="utf-8"))
    turns = [t for q in data for s in q["haystack_sessions"] for t in s if t["content"].strip()]
    turns[0]["content"] = "\x02Start\x1b[0m of a turn\x7f with " + turns[0]["content"]
    turns[1]["content"] = turns[1]["content"] + " \ud83d and a lone half of an emoji"
    turns[2]["content"] = "\x00\x1f" + turns[2]["content"]
    lme = tmp_path / "lme-odd.json"
    lme.write_text(json.dumps(data), encoding="utf-8")  # ensure_ascii: the half pair is written as \ud83d
    sample = json.loads((ROOT / "tests" / "data" / "locomo_tiny.json").read_text(encoding="utf-8"))
    sample[0]["conversation"]["session_1"][0]["text"] = "I went\x07 to a support group\x0b yesterday."
    loc = tmp_path / "locomo-odd.json"
    loc.write_text(json.dumps(sample), encoding="utf-8")
    return lme, loc


def test_control_characters_and_half_surrogates_never_stop_a_run(tmp_path: Path) -> None:
    lme, loc = odd_fixtures(tmp_path)
    result = bench("run", "--dataset", lme, "--variants", "graduated", "--out", tmp_path / "lme")
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "lme" / "results.json").read_text(encoding="utf-8"))
    # Every turn is written, two with their titles cleaned; the half pair is read as U+FFFD.
    assert (data["ingest"]["entries"], data["ingest"]["cleaned"]) == (32, 2)
    assert "2 titles cleaned of control characters, 1 half surrogate pairs read as U+FFFD" in result.stderr
    assert data["variants"]["graduated"]["n"] == 4
    result = bench("run", "--dataset", loc, "--variants", "graduated", "--out", tmp_path / "loc")
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "loc" / "results.json").read_text(encoding="utf-8"))
    # \x07 is counted; \x0b (vertical tab) is whitespace, folded like a newline.
    assert (data["ingest"]["entries"], data["ingest"]["cleaned"]) == (6, 1)


def test_no_gold_label_reaches_an_entry(tmp_path: Path) -> None:
    """Every field of every entry is the turn's own: a label anywhere in the store would tell ranking the answer."""
    from arbiter.store import connect
    from bench.longmemeval import dataset as ds

    lme, loc = odd_fixtures(tmp_path)
    for path in (TINY, lme, ROOT / "tests" / "data" / "locomo_tiny.json", loc):
        home = tmp_path / f"home-{path.stem}"
        result = bench("ingest", "--dataset", path, "--home", home)
        assert result.returncode == 0, result.stderr
        raw = json.loads(path.read_text(encoding="utf-8"))
        corpus = ds.load_corpus(path)
        roles: dict[str, set[str]] = {}
        for e in (e for u in corpus.units for e in u.entries):
            roles.setdefault(e.content, set()).add(e.role)
        if corpus.format == "longmemeval":
            labels = {"has_answer", *(q["question_id"] for q in raw), *(q["question_type"] for q in raw),
                      *(s for q in raw for s in q["answer_session_ids"]), *(str(q["answer"]) for q in raw)}
        else:
            labels = {"evidence", "category", *(s["sample_id"] for s in raw),
                      *(str(qa.get("answer") or qa.get("adversarial_answer")) for s in raw for qa in s["qa"]),
                      *(d for s in raw for qa in s["qa"] for d in qa["evidence"]),
                      *(t["dia_id"] for s in raw for k, v in s["conversation"].items() if k[-1].isdigit() for t in v)}
        db = connect(home / "arbiter.db", readonly=True)
        try:
            rows = db.execute("SELECT title, content, tags, source, speaker, type FROM entries").fetchall()
        finally:
            db.close()
        assert len(rows) == sum(len(u.entries) for u in corpus.units)
        for title, content, tags, source, speaker, kind in rows:
            assert speaker in roles[content]  # the content is a turn's text, exactly, and the speaker its own
            assert (title, tags, source, kind) == (ds.make_title(content), "[]", None, "context")
            for label in labels:  # a label may be in the store only where the turn itself says it
                assert label.lower() not in f"{title}\n{speaker}".lower() or label.lower() in content.lower(), label
