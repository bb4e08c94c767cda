"""bench/longmemeval/dataset.py: loading, checking, turns -> entries, ground truth."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.longmemeval import dataset as ds

TINY = Path(__file__).parents[1] / "data" / "longmemeval_tiny.json"


@pytest.fixture(scope="module")
def tiny() -> ds.Dataset:
    return ds.load(TINY)


def plans(data: ds.Dataset) -> dict[str, ds.Plan]:
    return {q.question_id: ds.plan(q) for q in data.questions}


def test_load_counts_and_hash(tiny: ds.Dataset) -> None:
    assert len(tiny.questions) == 6
    assert tiny.turns == 34
    assert tiny.sha256 == hashlib.sha256(TINY.read_bytes()).hexdigest()
    assert [q.abstention for q in tiny.questions] == [False, False, False, True, False, False]


def test_gzip_reads_the_same(tiny: ds.Dataset, tmp_path: Path) -> None:
    packed = tmp_path / "tiny.json.gz"
    packed.write_bytes(gzip.compress(TINY.read_bytes()))
    again = ds.load(packed)
    assert again.sha256 == tiny.sha256  # of the uncompressed JSON
    assert again.questions == tiny.questions


def test_ground_truth_sources(tiny: ds.Dataset) -> None:
    by_q = plans(tiny)
    assert {qid: p.truth_from for qid, p in by_q.items()} == {
        "tiny_single_user": "turns",
        "tiny_temporal": "turns",
        "tiny_multi": "sessions",
        "tiny_update_abs": "sessions",
        "tiny_assistant": "turns",
        "tiny_no_truth": "none",
    }

    def sources(p: ds.Plan, which: list[int]) -> list[str]:
        return [p.entries[k].key for k in which]

    single = by_q["tiny_single_user"]
    assert sources(single, single.truth) == ["longmemeval:tiny_single_user:ans_ukulele:2"]
    assert sources(single, single.answer_sessions) == [
        f"longmemeval:tiny_single_user:ans_ukulele:{i}" for i in range(4)
    ]
    temporal = by_q["tiny_temporal"]
    assert sources(temporal, temporal.truth) == [
        "longmemeval:tiny_temporal:ans_kyoto:0",
        "longmemeval:tiny_temporal:ans_sapporo:0",
    ]
    multi = by_q["tiny_multi"]  # no flags: every turn of both answer sessions
    assert sources(multi, multi.truth) == [
        "longmemeval:tiny_multi:ans_berlin:0",
        "longmemeval:tiny_multi:ans_berlin:1",
        "longmemeval:tiny_multi:ans_boston:0",
        "longmemeval:tiny_multi:ans_boston:1",
    ]
    assert multi.truth == multi.answer_sessions
    assert by_q["tiny_no_truth"].truth == by_q["tiny_no_truth"].answer_sessions == []


def test_empty_turns_are_skipped_and_counted(tiny: ds.Dataset) -> None:
    p = plans(tiny)["tiny_assistant"]
    assert p.skipped_empty == 2
    # Indexes keep counting skipped turns: the source names the dataset position.
    assert [e.turn_index for e in p.entries if e.session_id == "ans_telescope"] == [2, 3]
    assert sum(len(ds.plan(q).entries) + ds.plan(q).skipped_empty for q in tiny.questions) == tiny.turns


def test_repeated_session_is_ingested_twice(tiny: ds.Dataset) -> None:
    p = plans(tiny)["tiny_multi"]
    garden = [e for e in p.entries if e.session_id == "filler_garden_0"]
    assert len(garden) == 4
    assert garden[0].valid_from != garden[2].valid_from


def test_valid_from_is_session_date_plus_a_minute_per_turn(tiny: ds.Dataset) -> None:
    p = plans(tiny)["tiny_assistant"]
    start = 1688505300  # 2023-07-04T21:15:00Z
    assert [(e.turn_index, e.valid_from) for e in p.entries if e.session_id == "ans_telescope"] == [
        (2, start + 120),
        (3, start + 180),
    ]


def test_titles_fold_whitespace_and_cut_on_a_character(tiny: ds.Dataset) -> None:
    titles = {e.key: e.title for e in plans(tiny)["tiny_assistant"].entries}
    # 199 ASCII bytes then a 2-byte 'é': byte 200 falls inside it, so it goes.
    assert titles["longmemeval:tiny_assistant:filler_q5_0:0"] == "a" * 199
    assert titles["longmemeval:tiny_assistant:filler_q5_0:1"] == "Ünïcödé ✓ folded whitespace"


def test_parse_date() -> None:
    assert ds.parse_date("2023/05/20 (Sat) 02:21") == 1684549260
    with pytest.raises(ValueError):
        ds.parse_date("2023-05-20 02:21")
    with pytest.raises(ValueError):
        ds.parse_date("2023/02/30 (Thu) 02:21")


def test_source_round_trip() -> None:
    assert ds.parse_source(ds.source("q1", "s_2", 7)) == ("q1", "s_2", 7)
    assert ds.parse_source("notes:a:b:1") is None
    assert ds.parse_source("longmemeval:a:b") is None


@given(st.text(), st.integers(min_value=0, max_value=300))
def test_cut_utf8_is_the_longest_fitting_prefix(text: str, limit: int) -> None:
    cut = ds.cut_utf8(text, limit)
    size = len(cut.encode("utf-8", "surrogatepass"))
    assert text.startswith(cut)
    assert size <= limit
    if cut != text:  # one more character would not fit
        assert size + len(text[len(cut)].encode("utf-8", "surrogatepass")) > limit


@given(st.text(alphabet=st.sampled_from(["a", "é", "語", "🌸", " ", "\n", "\t", "\u3000"]), max_size=3000))
def test_title_is_the_folded_text_cut_to_200_bytes(text: str) -> None:
    folded = " ".join(text.split())
    assert ds.make_title(text) == ds.cut_utf8(folded, 200).rstrip()


def write(tmp_path: Path, questions: object) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(questions), encoding="utf-8")
    return path


def raw_tiny() -> list[dict]:
    return json.loads(TINY.read_text(encoding="utf-8"))


def test_wrong_type_names_question_and_field(tmp_path: Path) -> None:
    questions = raw_tiny()
    questions[1]["haystack_sessions"][2][1]["content"] = 42
    with pytest.raises(ds.DatasetError) as e:
        ds.load(write(tmp_path, questions))
    assert (e.value.question_id, e.value.field) == ("tiny_temporal", "haystack_sessions[2][1].content")
    assert "tiny_temporal" in str(e.value) and "haystack_sessions[2][1].content" in str(e.value)


@pytest.mark.parametrize(
    ("index", "field", "expected"),
    [
        (0, "question", "question"),
        (3, "answer_session_ids", "answer_session_ids"),
    ],
)
def test_missing_field_names_question_and_field(tmp_path: Path, index: int, field: str, expected: str) -> None:
    questions = raw_tiny()
    qid = questions[index]["question_id"]
    del questions[index][field]
    with pytest.raises(ds.DatasetError) as e:
        ds.load(write(tmp_path, questions))
    assert (e.value.question_id, e.value.field) == (qid, expected)


def test_missing_turn_field(tmp_path: Path) -> None:
    questions = raw_tiny()
    del questions[4]["haystack_sessions"][0][3]["role"]
    with pytest.raises(ds.DatasetError) as e:
        ds.load(write(tmp_path, questions))
    assert (e.value.question_id, e.value.field) == ("tiny_assistant", "haystack_sessions[0][3].role")


def test_missing_question_id(tmp_path: Path) -> None:
    questions = raw_tiny()
    del questions[2]["question_id"]
    with pytest.raises(ds.DatasetError) as e:
        ds.load(write(tmp_path, questions))
    assert (e.value.question_id, e.value.field) == (None, "question_id")
    assert "question #2" in str(e.value)


@pytest.mark.parametrize(
    ("qindex", "mutate", "field"),
    [
        (2, lambda q: q["haystack_dates"].pop(), "haystack_dates"),
        (2, lambda q: q["haystack_session_ids"].append("extra"), "haystack_session_ids"),
        (1, lambda q: q["haystack_dates"].__setitem__(1, "2023-03-02 12:00"), "haystack_dates[1]"),
        (0, lambda q: q.__setitem__("question", "   "), "question"),
        (0, lambda q: q.__setitem__("question_id", "a:b"), "question_id"),
        (5, lambda q: q["haystack_session_ids"].__setitem__(0, "answer:1"), "haystack_session_ids[0]"),
    ],
)
def test_semantic_errors_name_question_and_field(tmp_path: Path, qindex: int, mutate, field: str) -> None:
    questions = raw_tiny()
    mutate(questions[qindex])
    with pytest.raises(ds.DatasetError) as e:
        ds.load(write(tmp_path, questions))
    assert (e.value.question_id, e.value.field) == (questions[qindex]["question_id"], field)


def test_duplicate_question_id(tmp_path: Path) -> None:
    questions = raw_tiny()
    questions.append(questions[0])
    with pytest.raises(ds.DatasetError) as e:
        ds.load(write(tmp_path, questions))
    assert (e.value.question_id, e.value.field) == ("tiny_single_user", "question_id")


@pytest.mark.parametrize(
    "body",
    [b"[{", b'{"question_id": "x"}', b"", b"\x1f\x8bnot gzip"],
    ids=["truncated", "not-a-list", "empty", "bad-gzip"],
)
def test_unreadable_files(tmp_path: Path, body: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(body)
    with pytest.raises(ds.DatasetError) as e:
        ds.load(path)
    assert e.value.question_id is None
    assert str(path) in str(e.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ds.DatasetError):
        ds.load(tmp_path / "nope.json")
