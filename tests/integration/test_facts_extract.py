"""`fact extract` end to end: a real daemon, the real anthropic SDK inside it, the fake Messages server."""

from __future__ import annotations

import json

import pytest

from arbiter.errors import NotFound
from tests.conftest import DaemonProcess


@pytest.fixture
def llm(home, fake_messages):
    d = DaemonProcess(home, extra_env={"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_messages.base_url})
    d.start()
    with d.client() as c:
        yield c
    d.stop()


def test_extracted_triples_enter_the_gate_as_candidates(llm, fake_messages):
    job = llm.remember(type="user", title="New job", content="I started at Globex last month; I love jazz.").id
    fake_messages.set_script([json.dumps({"facts": [
        {"subject": "user", "predicate": "works at", "object": "Globex", "confidence": 0.9, "source": job,
         "aspects": ["career", "astrology"]},
        {"subject": "user", "predicate": "enjoys", "object": "jazz", "confidence": 0.8, "source": job},
        {"subject": "user", "predicate": "enjoys", "object": "x" * 300, "confidence": 0.8, "source": job},
        {"subject": "user", "predicate": "knows", "object": "Ann", "confidence": 0.8, "source": 999_999},
        {"subject": "user", "predicate": "enjoys"},
    ]})])
    r = llm.fact_extract([job])
    assert r.batch.origin == "extractor" and r.batch.status == "proposed"
    assert [(f.predicate, f.object, f.sources) for f in r.batch.facts] == [("works_at", "Globex", [job]),
                                                                          ("enjoys", "jazz", [job])]
    assert "astrology" in r.note and "1 malformed triple" in r.note
    assert llm.facts("user").facts == []  # proposed, not true
    prompt = fake_messages.requests[0]["messages"][0]["content"]
    assert "works_at" in prompt and "film_tv" in prompt and "Globex" in prompt
    assert llm.batch_apply(r.batch.id).counts == {"active": 2}


def test_the_model_sees_who_said_a_turn_and_the_turn_it_answers(llm, fake_messages):
    # "Two of them, yes" states a fact only beside the question, and only its speaker says whose cats they are.
    chat = llm.conversation_create("catch-up").id
    llm.remember(type="context", title="Pets", content="Do you have cats?", speaker="assistant", conversation_id=chat)
    said = llm.remember(type="context", title="Pets", content="Two of them, yes.", speaker="user",
                        conversation_id=chat).id
    fake_messages.set_script([json.dumps({"facts": []})])
    llm.fact_extract([said])
    prompt = fake_messages.requests[0]["messages"][0]["content"]
    assert f"[id {said}] (context · " in prompt
    assert "· current · said by user)\n(follows: assistant: Do you have cats?)\nPets\nTwo of them, yes." in prompt


def test_a_failed_call_proposes_nothing_and_says_why(llm, fake_messages):
    e = llm.remember(type="user", title="t", content="I live in Oslo").id
    fake_messages.set_script([500, 500])
    r = llm.fact_extract([e], apply=True)
    assert r.batch is None and "server error" in r.note
    assert llm.batch_list().batches == []
    with pytest.raises(NotFound):
        llm.fact_extract([e, 424242])


def test_without_a_key_nothing_is_proposed(client):
    e = client.remember(type="user", title="t", content="I live in Oslo").id
    r = client.fact_extract([e])
    assert r.batch is None and "ANTHROPIC_API_KEY" in r.note
