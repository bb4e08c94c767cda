"""The official protocol's metrics, LoCoMo's reading and the third-person rewrite, on tiny inputs."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from bench.longmemeval import dataset as ds
from bench.longmemeval import locomo, official
from bench.longmemeval.phrasing import phrase, third_person

TINY = Path(__file__).parents[1] / "data" / "longmemeval_tiny.json"


def units(*spec: tuple[str, str, bool]) -> list[official.Unit]:
    return [official.Unit(uid, session, uid, i, right) for i, (uid, session, right) in enumerate(spec)]


def test_official_metrics_by_hand() -> None:
    # Turns: a1 and a2 are the flagged turns of answer session A; a3 is A's
    # unflagged turn (its own "noans" session); b1, c1 are other sessions.
    u = units(("a1", "A", True), ("b1", "B", False), ("a3", "A#noans", False), ("c1", "C", False), ("a2", "A", True))
    ranking = [1, 0, 2, 3, 4]  # b1, a1, a3, c1, a2
    m = official.evaluate(ranking, u, "turn")
    turn, session = m["turn"], m["session"]
    assert (turn["recall_any@1"], turn["recall_any@3"], turn["recall_all@3"], turn["recall_all@5"]) == (0, 1, 0, 1)
    # Official DCG: rank 2 undiscounted; ideal for 2 relevant = 1 + 1.
    assert turn["ndcg_any@3"] == pytest.approx(1 / 2)
    assert turn["ndcg_any@5"] == pytest.approx((1 + 1 / math.log2(5)) / 2)
    # Session level: k=1 reads to the first session (b1: B), k=3 reads until
    # three distinct sessions (B, A, A#noans), so a2 at rank 5 is outside.
    assert (session["recall_any@1"], session["recall_any@3"]) == (0, 1)
    assert official.widen(ranking, [x.session for x in u], 3) == 3
    assert official.widen(ranking, [x.session for x in u], 4) == 4
    assert official.widen([0, 4, 1], ["A", "B", "C", "D", "A"], 2) == 3


def test_official_corpus_is_user_turns_and_marks_answers() -> None:
    q = {x.question_id: x for x in ds.load(TINY).questions}["tiny_single_user"]
    turns = official.corpus(q, "turn")
    assert all(" " in t.text for t in turns)  # user text only: no assistant reply is a unit
    assert [t.id for t in turns if t.correct] == ["ans_ukulele_3"]
    assert {t.session for t in turns} == {"filler_shared_0", "ans_ukulele", "ans_ukulele#noans"}
    sessions = official.corpus(q, "session")
    assert [(s.id, s.correct) for s in sessions] == [("filler_shared_0", False), ("ans_ukulele", True)]
    assert "Kamaka" in sessions[1].text and "Welcome back" not in sessions[1].text


def test_official_run_ranks_in_a_fresh_index() -> None:
    questions = [q for q in ds.load(TINY).questions if q.question_id in ("tiny_single_user", "tiny_temporal")]
    summary, per = official.run(questions, "session")
    assert summary.questions == summary.scored == 2
    assert summary.official["session"]["recall_any@1"] == 1.0
    assert {p.question_id: p.correct for p in per} == {"tiny_single_user": 1, "tiny_temporal": 2}


def sample() -> dict:
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_2_date_time": "7:05 pm on 9 June, 2023",
            "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "I adopted a dog."}],
            "session_1_date_time": "1:56 am on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I ran a marathon!"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Look at this.", "blip_caption": "a photo of a cat"},
            ],
        },
        "qa": [
            {"question": "When did Ana run a marathon?", "answer": "May 2023", "evidence": ["D1:1"], "category": 2},
            {"question": "What pets has Ben?", "answer": "cat, dog", "evidence": ["D1:2; D2:1"], "category": 1},
            {"question": "Trick?", "adversarial_answer": "x", "evidence": ["D1:1"], "category": 5},
            {"question": "Lost?", "answer": "x", "evidence": ["D9:9"], "category": 4},
        ],
    }


def test_locomo_units(tmp_path: Path) -> None:
    path = tmp_path / "locomo.json.gz"
    path.write_bytes(gzip.compress(json.dumps([sample()]).encode()))
    c = ds.load_corpus(path)
    assert c.format == "locomo" and c.questions_in_file == 4
    (u,) = c.units
    assert [e.content for e in u.entries] == [
        "Ana: I ran a marathon!",
        "Ben: Look at this. [photo: a photo of a cat]",
        "Ben: I adopted a dog.",
    ]
    assert [e.role for e in u.entries] == ["Ana", "Ben", "Ben"]
    assert u.entries[0].valid_from == locomo.parse_date("1:56 am on 8 May, 2023") == 1683510960
    assert u.entries[1].valid_from == u.entries[0].valid_from + ds.TURN_SPACING_S
    asks = {a.question: a for a in u.asks}
    assert "Trick?" not in asks  # category 5 has no evidence and is not asked
    assert asks["When did Ana run a marathon?"].truth == [0]
    assert asks["When did Ana run a marathon?"].question_type == "temporal"
    assert asks["What pets has Ben?"].truth == [1, 2]
    assert asks["What pets has Ben?"].answer_sessions == [0, 1, 2]
    assert (asks["Lost?"].truth, asks["Lost?"].truth_from) == ([], "none")


def test_locomo_pm_dates() -> None:
    assert locomo.parse_date("12:30 pm on 1 January, 2023") - locomo.parse_date("12:30 am on 1 January, 2023") == 12 * 3600


@pytest.mark.parametrize(
    ("asked", "agent"),
    [
        ("How long did I wait for the decision on my asylum application?",
         "How long did the user wait for the decision on the user's asylum application?"),
        ("What did you recommend for my trip?", "What did the assistant recommend for the user's trip?"),
        ("I'm going to Denver. Do you have tips for me?",
         "The user is going to Denver. Does the assistant have tips for the user?"),
        ("Who did I have a chat with?", "Who did the user have a chat with?"),
        ("When did Caroline go to the support group?", "When did Caroline go to the support group?"),
    ],
)
def test_third_person(asked: str, agent: str) -> None:
    assert third_person(asked) == agent
    assert phrase(asked, "third-person") == agent
    assert phrase(asked, "as-written") == asked


@pytest.mark.parametrize(
    ("asked", "phrasing", "sent"),
    [
        ("How many days ago did I meet Emma?", "keywords", "days meet Emma"),
        ("What did you recommend for my trip?", "keywords", "recommend trip"),
        ("What did I buy for my sister's birthday?", "third-person+keywords", "user buy user's sister's birthday"),
    ],
)
def test_keywords_are_what_an_agent_told_to_send_key_words_sends(asked: str, phrasing: str, sent: str) -> None:
    assert phrase(asked, phrasing) == sent


def test_unknown_phrasing() -> None:
    with pytest.raises(ValueError):
        phrase("x", "second-person")
