"""Tenant-private ranking through the real daemon: nothing another tenant writes moves a score."""

from __future__ import annotations

import msgspec
import pytest

from arbiter.client import Client

B_ENTRIES = [
    ("Deploy runbook", "Roll the canary first, then the fleet; rollback is one command."),
    ("Band practice", "We tuned the xylophone before the concert on Friday."),
    ("Band practice", "We tuned the marimba before the concert on Friday."),
    ("Standup", "The deploy slipped to Monday because the canary failed."),
]
QUERIES = ["deploy canary rollback", "xylophone", "marimba", "tuned concert friday", "Monday deploy"]


@pytest.fixture
def tenants(daemon):
    """(a, b): clients of two tenants; b holds B_ENTRIES, half of them in a conversation."""
    with Client(daemon.socket, daemon.admin_token) as admin:
        token = admin.tenant_create("tenant-b").token
    with daemon.client() as a, daemon.client(token) as b:
        conv = b.conversation_create("band").id
        for i, (title, content) in enumerate(B_ENTRIES):
            b.remember(type="project", title=title, content=content, conversation_id=conv if i % 2 else None)
        yield a, b, conv


def snapshot(b: Client, conv: int) -> list[bytes]:
    """Everything b's recalls say (hits, scores to the last digit, parts, expression), tenant-wide and graduated."""
    out = []
    for q in QUERIES:
        for scope in ({}, {"conversation_id": conv}):
            out.append(msgspec.json.encode(b.recall(q, limit=10, explain=True, **scope)))
    return out


def test_two_entries_differing_in_one_word_score_alike_whatever_another_tenant_uses(tenants):
    a, b, _ = tenants
    for _ in range(20):
        a.remember(type="project", title="xylophone", content="xylophone xylophone lessons")
    x = b.recall("xylophone", explain=True).hits
    m = b.recall("marimba", explain=True).hits
    assert len(x) == len(m) == 1
    assert x[0].score == m[0].score and x[0].parts == m[0].parts


def test_scores_do_not_move_when_another_tenant_writes(tenants):
    a, b, conv = tenants
    before = snapshot(b, conv)
    status = b.status()
    # A writes B's query words, new words, in and out of conversations, updates and retires some.
    words = " ".join(QUERIES) + " zeppelin quasar ".join(t for t, _ in B_ENTRIES)
    theirs = a.conversation_create("noise").id
    written = [
        a.remember(type="project", title=f"deploy {i}", content=words * (1 + i % 3),
                   conversation_id=theirs if i % 2 else None).id
        for i in range(40)
    ]
    a.update(written[0], content="xylophone marimba canary " * 10)
    a.forget(written[1])
    a.purge(written[2])
    assert snapshot(b, conv) == before
    assert b.status() == status
    # And B's own writes do move them: the test can see a change.
    b.remember(type="project", title="xylophone", content="another xylophone")
    assert snapshot(b, conv) != before
