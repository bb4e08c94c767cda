"""bench/longmemeval/harness.py and grade.py: the parts that need no daemon."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from arbiter.model import RememberParams
from bench.longmemeval import dataset as ds
from bench.longmemeval import harness
from bench.longmemeval.grade import history, judge_prompt

TINY = Path(__file__).parents[1] / "data" / "longmemeval_tiny.json"


def question_state(**changes: object) -> harness.QuestionState:
    fields = dict(
        question_id="q1",
        question_type="multi-session",
        question="Which marathon?",
        abstention=False,
        conversation_id=7,
        turns=3,
        entries=3,
        truth_from="turns",
        truth_ids=[1],
        answer_session_ids=[1, 2],
        skipped_empty=0,
        truncated=0,
    )
    fields.update(changes)
    return harness.QuestionState(**fields)


def test_recall_kwargs_per_variant() -> None:
    q = question_state()

    def kw(v: str) -> dict[str, object]:
        return harness.recall_kwargs(v, q, k=10, rerank_model="fast", fine_model="fine")

    assert kw("bm25") == {"query": "Which marathon?", "limit": 10}
    assert kw("graduated") == {"query": "Which marathon?", "conversation_id": 7, "limit": 10}
    assert kw("rerank") == {**kw("graduated"), "rerank": "fast"}
    assert kw("expand") == {**kw("graduated"), "expand": "fast"}
    assert kw("cascade") == {**kw("graduated"), "rerank": "fast", "rerank_fine": "fine"}
    with pytest.raises(harness.HarnessError):
        kw("vector")


def test_state_round_trip_and_dataset_guard(tmp_path: Path) -> None:
    data = ds.load_corpus(TINY)
    path = tmp_path / harness.STATE_NAME
    state = harness.open_state(path, data)
    assert state.questions == [] and state.tenant_entries == 0
    state.questions.append(question_state())
    state.tenant_entries = 3
    state.save(path)
    assert harness.open_state(path, data) == state
    other = msgspec.structs.replace(data, path="other.json", sha256="0" * 64)
    with pytest.raises(harness.HarnessError):
        harness.open_state(path, other)


def test_state_load_errors(tmp_path: Path) -> None:
    with pytest.raises(harness.HarnessError):
        harness.State.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(harness.HarnessError):
        harness.State.load(bad)


def test_history_orders_recalled_turns_by_time() -> None:
    data = ds.load(TINY)
    by_id = {q.question_id: q for q in data.questions}
    text = history(
        by_id,
        [
            "longmemeval:tiny_temporal:ans_sapporo:0",
            "longmemeval:tiny_temporal:ans_kyoto:0",
            None,
            "elsewhere:1",
        ],
    )
    kyoto, sapporo = text.index("Kyoto temple"), text.index("Sapporo ramen")
    assert kyoto < sapporo
    assert text.startswith("### Session Date: 2023/03/01 (Wed) 10:00\nuser: ")


def test_judge_prompt_follows_the_question_kind() -> None:
    data = ds.load(TINY)
    by_id = {q.question_id: q for q in data.questions}
    assert "unanswerable" in judge_prompt(by_id["tiny_update_abs"], "r")
    assert "Rubric" in judge_prompt(by_id["tiny_no_truth"], "r")
    assert "off-by-one" in judge_prompt(by_id["tiny_temporal"], "r")
    plain = judge_prompt(by_id["tiny_multi"], "my reply")
    assert "Correct Answer: 2" in plain and "Model Response: my reply" in plain


def test_batches_respect_count_and_bytes() -> None:
    params = [
        RememberParams(type="context", title=f"t{i}", content="x" * (1000 if i % 3 else 5000), source=f"s{i}")
        for i in range(50)
    ]
    by_count = list(harness._chunks(params, 7, 10**9))
    assert [len(c) for c in by_count] == [7] * 7 + [1]
    by_size = list(harness._chunks(params, 1000, 12_000))
    assert [p for c in by_size for p in c] == params
    assert all(sum(len(msgspec.json.encode(p)) + 1 for p in c) <= 12_000 for c in by_size)
    assert len(by_size) > 1
