"""Recall through the real daemon and socket, and as the CLI renders it."""

from __future__ import annotations

import re

import pytest

from arbiter.errors import InvalidParams
from tests.conftest import arbiter_cli


@pytest.fixture
def chat(client):
    """A conversation about a trip, an unscoped fact, and a second conversation."""
    trip = client.conversation_create("trip").id
    other = client.conversation_create("other").id
    made = {
        "flight": client.remember(type="context", title="Flight booked", conversation_id=trip,
                                  content="I booked my flight to Lisbon for the 14th, window seat").id,
        "hotel": client.remember(type="context", title="Hotel", conversation_id=trip,
                                 content="You could stay near the river in Lisbon; your budget fits").id,
        "visa": client.remember(type="reference", title="Visa rules",
                                content="Lisbon visits under 90 days need no visa for EU citizens").id,
        "elsewhere": client.remember(type="context", title="Other trip", conversation_id=other,
                                     content="Lisbon lisbon lisbon flight flight, a different trip").id,
    }
    return trip, other, made


def test_graduated_recall_through_the_socket(client, chat):
    trip, _, made = chat
    res = client.recall("when is my flight to Lisbon?", conversation_id=trip, explain=True)
    order = [h.id for h in res.hits]
    assert order[0] == made["flight"]
    assert order.index(made["elsewhere"]) > order.index(made["hotel"])  # the other conversation only fills
    by_id = {h.id: h for h in res.hits}
    assert by_id[made["flight"]].scope == "conversation" and by_id[made["visa"]].scope == "tenant"
    assert by_id[made["elsewhere"]].parts["tenant_rank"] == 1.0
    assert set(by_id[made["flight"]].parts) >= {"bm25", "voice", "conversation_rank", "rrf"}
    assert res.hits[0].excerpt and "**" in res.hits[0].excerpt
    assert res.expression and "{scope}" in res.expression


def test_switches_over_the_wire(client, chat):
    trip, _, made = chat
    res = client.recall("my flight to Lisbon", conversation_id=trip, explain=True,
                        disable=["voice", "tenant_fill"], decay=False, intent="off")
    assert made["elsewhere"] not in [h.id for h in res.hits]
    assert all("voice" not in h.parts and "decay" not in h.parts for h in res.hits)


def test_bad_switches_are_clear_errors(client):
    with pytest.raises(InvalidParams) as e:
        client.recall("x", disable=["nonsense"])
    assert e.value.path == "disable[0]"
    with pytest.raises(InvalidParams) as e:
        client.recall("x", floor=2)
    assert e.value.path == "floor"
    with pytest.raises(InvalidParams) as e:
        client.recall("x", intent="maybe")
    assert e.value.path == "intent"


@pytest.mark.parametrize("query", ['NEAR("a" OR', "*", "{scope}: c1", '"', "ünïcödé ✓ 漢字", "\t"])
def test_odd_queries_never_fail(client, chat, query):
    trip, _, made = chat
    for res in (client.recall(query), client.recall(query, conversation_id=trip)):
        found = [h.id for h in res.hits]
        assert len(found) == len(set(found)) and set(found) <= set(made.values())
        if query == 'NEAR("a" OR':
            assert made["hotel"] in found  # "near" is a word ("stay near the river"), not an operator
        if query in ("{scope}: c1", "ünïcödé ✓ 漢字"):
            assert found == []  # words no entry holds; user text never reaches the scope column


def test_forget_and_as_of_through_the_socket(client, chat):
    trip, _, made = chat
    client.forget(made["flight"])
    now = client.recall("flight", conversation_id=trip)
    assert made["flight"] not in [h.id for h in now.hits]
    entry = client.get(made["flight"], as_of=client.get(made["hotel"]).valid_from)
    then = client.recall("flight", conversation_id=trip, as_of=entry.valid_from)
    assert made["flight"] in [h.id for h in then.hits]


LINE = re.compile(r"^#(\d+)  \[(\w+)\]  .+  \((\d{4}-\d\d-\d\d)(?: · (superseded|retired))?\)(  \[conversation\])?$")


def test_the_cli_shows_three_excerpts_then_one_line_each(daemon, client):
    conv = client.conversation_create("ops").id
    first = client.remember(type="project", title="Canary plan v1", content="canary at 5% for an hour",
                            conversation_id=conv)
    old = first.id
    client.remember(type="project", title="Canary plan v2", content="canary at 1% for two hours",
                    conversation_id=conv, supersedes_ids=[old])
    for i in range(4):
        client.remember(type="learning", title=f"Canary note {i}", content=f"the canary {i} taught us something")
    out = arbiter_cli(daemon.home, "recall", "canary plan", "--conversation", str(conv), "--limit", "6")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    heads = [line for line in lines if LINE.match(line)]
    excerpts = [line for line in lines if line.startswith("    ")]
    assert len(heads) == 5 and len(excerpts) == 3  # the superseded plan is retired, so not visible now
    assert heads[0].endswith("[conversation]") and "Canary plan v2" in heads[0]
    assert "**canary**" in excerpts[0].lower()
    then = arbiter_cli(daemon.home, "recall", "canary plan", "--as-of", first.valid_from)
    assert then.returncode == 0, then.stderr
    assert any("Canary plan v1" in line and "superseded" in line for line in then.stdout.splitlines())
