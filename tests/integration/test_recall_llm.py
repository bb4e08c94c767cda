"""The LLM layers end to end: a real daemon, the real anthropic SDK inside it,
pointed at the fake Messages server running in this test process."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import DaemonProcess
from tests.fake_messages import Delay


@pytest.fixture
def llm_daemon(home, fake_messages):
    d = DaemonProcess(home, extra_env={"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_messages.base_url})
    d.start()
    yield d
    d.stop()


@pytest.fixture
def llm(llm_daemon):
    with llm_daemon.client() as c:
        yield c


def _deploy_notes(c, n: int = 10) -> list[int]:
    return [
        c.remember(type="learning", title=f"Deploy note {i}", content=f"deploy step {i}: check the canary {i}").id
        for i in range(n)
    ]


def _ids(result) -> list[int]:
    return [h.id for h in result.hits]


def test_rerank_applies_the_models_order(llm, fake_messages):
    ids = _deploy_notes(llm)
    lexical = _ids(llm.recall("deploy canary", limit=10))
    wanted = list(reversed(lexical))
    fake_messages.set_script([json.dumps({"ids": wanted})])
    res = llm.recall("deploy canary", limit=10, rerank=True)
    assert _ids(res) == wanted
    assert res.note is None
    assert fake_messages.requests[0]["model"] == "claude-haiku-4-5"
    assert sorted(lexical) == sorted(ids)


def test_rerank_drops_unknown_ids_and_keeps_missing_ones(llm, fake_messages):
    _deploy_notes(llm, 4)
    lexical = _ids(llm.recall("deploy canary"))
    fake_messages.set_script([json.dumps({"ids": [999_999, lexical[2], lexical[2], -5]})])
    res = llm.recall("deploy canary", rerank=True)
    assert _ids(res) == [lexical[2]] + [i for i in lexical if i != lexical[2]]


@pytest.mark.parametrize(
    "step, reason",
    [("this is not json", "malformed output"), (429, "rate limited (429)"), (500, "server error (500)")],
)
def test_rerank_failure_returns_the_lexical_ranking_with_a_note(llm, fake_messages, step, reason):
    _deploy_notes(llm, 5)
    lexical = _ids(llm.recall("deploy canary"))
    fake_messages.set_script(lambda body: step)
    res = llm.recall("deploy canary", rerank=True)
    assert _ids(res) == lexical
    assert res.note == f"rerank failed ({reason})"


def test_a_slow_model_cannot_hold_recall_past_its_deadline(llm, fake_messages):
    _deploy_notes(llm, 5)
    lexical = _ids(llm.recall("deploy canary"))
    # The model would answer after a minute; the deadline must end the wait far
    # sooner. The bound is loose on purpose: a loaded CI machine is slow, not wrong.
    fake_messages.set_script(lambda body: Delay(60.0))
    started = time.monotonic()
    res = llm.recall("deploy canary", rerank=True, deadline_ms=800)
    assert time.monotonic() - started < 30.0
    assert _ids(res) == lexical
    assert res.note.startswith("rerank failed (")


def test_expand_searches_a_rephrasing_and_a_guessed_answer_and_says_so(llm, fake_messages):
    target = llm.remember(type="reference", title="Rollout runbook", content="how we ship a release to production").id
    guessed = llm.remember(type="context", title="Canary", content="we put the canary at 5% first").id
    assert llm.recall("deployment procedure").hits == []
    fake_messages.set_script([json.dumps({"rephrased": "rollout runbook", "answer": "We start the canary at 5%."})])
    res = llm.recall("deployment procedure", expand=True)
    assert sorted(_ids(res)) == sorted([target, guessed])  # each text's own hits, fused
    assert res.searched == ["rollout runbook", "We start the canary at 5%."]


def test_cascade_reorders_only_the_head_with_the_strong_model(llm, fake_messages):
    _deploy_notes(llm, 12)
    lexical = _ids(llm.recall("deploy canary", limit=12))

    def script(body):
        if body["model"] == "claude-haiku-4-5":
            return json.dumps({"ids": lexical})  # coarse pass keeps the order
        return json.dumps({"ids": list(reversed(lexical[:8]))})

    fake_messages.set_script(script)
    res = llm.recall("deploy canary", limit=12, rerank=True, rerank_fine=True)
    assert _ids(res) == list(reversed(lexical[:8])) + lexical[8:]
    assert [r["model"] for r in fake_messages.requests] == ["claude-haiku-4-5", "claude-sonnet-4-6"]
    fine_prompt = json.dumps(fake_messages.requests[1]["messages"])
    assert "deploy step" in fine_prompt


def test_without_a_key_llm_layers_are_skipped_with_a_note(client):
    client.remember(type="learning", title="Deploy", content="deploy the canary")
    res = client.recall("deploy", rerank=True)
    assert len(res.hits) == 1
    assert "no ANTHROPIC_API_KEY" in res.note


def test_auto_tag_merges_the_models_tags(llm, fake_messages):
    fake_messages.set_script([json.dumps({"tags": ["ops", "release"]})])
    e = llm.remember(type="project", title="Freeze", content="code freeze on Friday", tags=["calendar"], auto_tag=True)
    assert e.tags == ["calendar", "ops", "release"]
    assert e.note == "auto_tag added ops, release"


def test_auto_supersede_retires_what_the_model_flags(llm, fake_messages):
    old = llm.remember(type="user", title="Editor theme", content="The user prefers a dark theme").id
    keep = llm.remember(type="user", title="Editor font", content="The user likes a large editor font").id
    fake_messages.set_script([json.dumps({"ids": [old]})])
    new = llm.remember(type="user", title="Editor theme", content="The user now prefers a light theme",
                       auto_supersede=True)
    assert new.note == f"auto_supersede retired #{old}"
    assert llm.history(new.id).entries[0].id == old
    assert [e.id for e in llm.list(types=["user"])] == [new.id, keep]


def test_auto_supersede_shows_who_said_the_new_entry_as_it_shows_who_said_the_old(llm, fake_messages):
    # The old entries are shown "said by" their speaker: the new one must be too, or "I" in it is no one's.
    old = llm.remember(type="user", title="Home town", content="I live in Oslo.", speaker="Caroline").id
    fake_messages.set_script([json.dumps({"ids": []})])
    llm.remember(type="user", title="Home town", content="I live in Bergen.", speaker="Melanie", auto_supersede=True)
    prompt = fake_messages.requests[-1]["messages"][0]["content"]
    assert "NEW:\n[id 0] (user · new · current · said by Melanie)\nHome town\nI live in Bergen." in prompt
    assert f"[id {old}] (user · " in prompt and "· current · said by Caroline)\nHome town\nI live in Oslo." in prompt


def test_auto_supersede_failure_still_writes_and_retires_nothing(llm, fake_messages):
    old = llm.remember(type="user", title="Editor theme", content="The user prefers a dark theme").id
    fake_messages.set_script(lambda body: 500)
    new = llm.remember(type="user", title="Editor theme", content="light theme now", auto_supersede=True)
    assert new.note == "auto_supersede failed (server error (500))"
    assert {e.id for e in llm.list()} == {old, new.id}


def test_auto_supersede_offers_only_the_writers_own_entries(llm_daemon, fake_messages):
    """A teammate's shared entry is seen but not the writer's to retire: it is never a candidate (nor an error)."""
    from arbiter.client import Client

    with llm_daemon.client() as owner:
        alice_token, bob_token = owner.user_add("alice").token, owner.user_add("bob").token
    with Client(llm_daemon.socket, alice_token) as alice:
        alice.team_add("core")
        alice.team_join("core", "bob")
        theirs = alice.remember(type="user", title="Editor theme", content="The team prefers a dark theme").id
        alice.share(theirs, "core")
    with Client(llm_daemon.socket, bob_token) as bob:
        mine = bob.remember(type="user", title="Editor theme", content="Bob prefers a dark editor theme").id
        assert {h.id for h in bob.recall("Editor theme", types=["user"]).hits} == {theirs, mine}
        fake_messages.set_script([json.dumps({"ids": [theirs, mine]})])
        new = bob.remember(type="user", title="Editor theme", content="Bob now prefers a light theme",
                           auto_supersede=True)
        assert new.note == f"auto_supersede retired #{mine}"
        assert f"[id {theirs}]" not in fake_messages.requests[-1]["messages"][0]["content"]
        assert bob.get(theirs).valid_to is None


def test_the_fine_pass_sees_1500_bytes_of_each_candidate(llm, fake_messages):
    long_text = "deploy canary " + "x" * 1300 + " MARKER " + "y" * 2000
    ids = [llm.remember(type="learning", title="Long deploy note", content=long_text).id, *_deploy_notes(llm, 2)]
    fake_messages.set_script(lambda body: json.dumps({"ids": ids}))
    llm.recall("deploy canary", rerank_fine=True)
    prompt = fake_messages.requests[0]["messages"][0]["content"]
    assert "MARKER" in prompt  # past the advisor's old 1200-character clip
    assert "y" * 300 not in prompt  # cut at 1500 bytes of title + content


def test_rerank_with_known_at_shows_the_model_the_texts_as_they_stood(llm, fake_messages):
    ids = _deploy_notes(llm, 3)
    before = llm.get(ids[-1]).recorded_at  # all three written, none corrected yet
    llm.update(ids[0], content="deploy step 0: check the canary, then the pelican")
    fake_messages.set_script([json.dumps({"ids": ids})])
    res = llm.recall("deploy canary", rerank=True, known_at=before)
    assert res.note is None and sorted(_ids(res)) == sorted(ids)
    shown = json.dumps(fake_messages.requests[-1])
    assert "check the canary 0" in shown and "pelican" not in shown


def test_rerank_shows_who_said_each_turn_and_the_turn_it_follows(llm, fake_messages):
    # "These are for running" answers the question before it: the model can judge it only beside it.
    chat = llm.conversation_create("catch-up").id
    asked = llm.remember(type="context", title="Shoes", content="Love that purple color! For walking or running?",
                         speaker="Caroline", conversation_id=chat).id
    answer = llm.remember(type="context", title="Shoes", content="These are for running, new shoes.",
                          speaker="Melanie", conversation_id=chat).id
    fake_messages.set_script(lambda body: json.dumps({"ids": [answer, asked]}))
    res = llm.recall("what are Melanie's new shoes for", conversation_id=chat, rerank=True)
    assert _ids(res) == [answer, asked] and res.note is None
    prompt = fake_messages.requests[-1]["messages"][0]["content"]
    block = prompt[prompt.index(f"[id {answer}]"):]
    assert block.startswith(f"[id {answer}] (context · ")
    assert "· current · said by Melanie)\n(follows: Caroline: Love that purple color! For walking or running?)\n" \
        "Shoes\nThese are for running" in block
