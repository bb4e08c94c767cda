"""Entities through the daemon: the client methods, the wire errors and the CLI."""

from __future__ import annotations

import json

import pytest

from arbiter import paths
from arbiter.errors import Conflict, InvalidParams, NotFound
from arbiter.store import connect
from tests.conftest import DaemonProcess
from tests.integration.test_cli import arbiter, js, ok, one_line_error


def test_remember_returns_entities_and_show_lists_them(client):
    first = client.remember(type="project", title="Database", content="Apollo runs on Postgres.", entities=["Apollo"])
    assert [(m.name, m.type, m.created) for m in first.entities] == [
        ("Apollo", "other", True), ("PostgreSQL", "tool", True),
    ]
    client.remember(type="project", title="Ops", content="PostgreSQL upgrade for Apollo")
    client.entity_relate("Apollo", "depends_on", "postgres")
    shown = client.entity_show("apollo")
    assert shown.entity.mentions == 2 and len(shown.entries) == 2
    assert [(r.source.name, r.relation, r.target.name) for r in shown.relations] == [
        ("Apollo", "depends_on", "PostgreSQL"),
    ]
    assert [e.name for e in client.entities("ap")] == ["Apollo"]


def test_wire_errors_are_typed(client):
    client.remember(type="project", title="x", content="Redis and Kafka")
    with pytest.raises(InvalidParams) as e:
        client.remember(type="project", title="x", content="y", entities=["a\x07b"])
    assert e.value.path == "entities[0]"
    with pytest.raises(InvalidParams):
        client.entity_merge("Redis", "redis")
    with pytest.raises(NotFound):
        client.entity_show("Nobody")
    with pytest.raises(Conflict):
        client.entity_rename("Redis", "Kafka")
    with pytest.raises(InvalidParams):
        client.entity_relate("Redis", "adores", "Kafka")


def test_cli_entities(daemon, home):
    proc = arbiter(home, "remember", "--type", "project", "--title", "Plan", "--content",
                   "Alice Smith owns the MemoryGraph port.", "--entity", "Apollo")
    assert proc.returncode == 0 and proc.stdout.count("\n") == 1  # stdout stays one line per entry
    assert "entities: Apollo (new), Alice Smith (new), MemoryGraph (new)" in proc.stderr
    ok(home, "entity", "rename", "Alice Smith", "Alice")
    ok(home, "entity", "relate", "Alice", "works_on", "Apollo")
    assert "Alice works_on Apollo" in ok(home, "entity", "show", "alice smith")
    merged = js(home, "entity", "merge", "Apollo", "MemoryGraph")
    assert merged["aliases"] == ["MemoryGraph"]
    assert [e["name"] for e in js(home, "entities")] == ["Apollo", "Alice"]
    assert "cannot merge an entity into itself" in one_line_error(home, "entity", "merge", "Apollo", "memorygraph")
    assert "Example" in ok(home, "entity", "relate", "--help")


# ---- extract_entities: the advisor adds names, the lexical result stands without it ----------------


@pytest.fixture
def llm(home, fake_messages):
    d = DaemonProcess(home, extra_env={"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_messages.base_url})
    d.start()
    with d.client() as c:
        yield c
    d.stop()


TEXT = "Dinner with my sister's coach at the old boathouse; we use Redis at work"


def test_the_advisor_adds_entities_linked_as_advisor(llm, fake_messages, home):
    fake_messages.set_script([json.dumps({"entities": [
        {"name": "old boathouse", "type": "location"}, {"name": "redis", "type": "tool"}, {"name": "Coach", "type": "?"},
    ]})])
    r = llm.remember(type="user", title="Dinner", content=TEXT, extract_entities=True)
    # Redis was already found lexically: the model's copy is dropped, not linked twice.
    assert [(m.name, m.type, m.created) for m in r.entities] == [
        ("Redis", "tool", True), ("old boathouse", "location", True), ("Coach", "other", True),
    ]
    assert r.note == "extract_entities: the advisor named old boathouse, Coach"
    (request,) = fake_messages.requests
    assert "Already found: Redis" in request["messages"][0]["content"]
    db = connect(paths.db_path(home), readonly=True)
    try:
        how = dict(db.execute("SELECT e.name, l.how FROM entry_entities l JOIN entities e ON e.id = l.entity_id "
                              "WHERE l.entry_id = ?", (r.id,)).fetchall())
    finally:
        db.close()
    assert how == {"Redis": "extracted", "old boathouse": "advisor", "Coach": "advisor"}


@pytest.mark.parametrize("step, reason", [("no json here", "malformed output"), (500, "server error (500)")])
def test_a_failed_advisor_leaves_the_lexical_entities(llm, fake_messages, step, reason):
    fake_messages.set_script(lambda body: step)
    r = llm.remember(type="user", title="Dinner", content=TEXT, extract_entities=True)
    assert [m.name for m in r.entities] == ["Redis"] and r.note == f"extract_entities failed ({reason})"


def test_without_a_key_extract_entities_is_skipped_with_a_note(client):
    r = client.remember(type="user", title="Dinner", content=TEXT, extract_entities=True)
    assert [m.name for m in r.entities] == ["Redis"]
    assert r.note == "extract_entities skipped: no ANTHROPIC_API_KEY on the daemon"


def test_remember_many_refuses_extract_entities(client):
    with pytest.raises(InvalidParams) as e:
        client.remember_many([{"type": "user", "title": "t", "content": "c", "extract_entities": True}])
    assert e.value.path == "entries[0].extract_entities"


def test_entity_show_finds_a_first_name_several_notes_mention(client):
    """The first note names Dana only at a sentence's start; the second writes the name mid-sentence, which makes
    the entity and links the first note too; later notes link it, at a sentence's start as well."""
    notes = ["Dana is still on the ingest bug.", "Lee reviewed the change Dana opened.", "Dana wants to own the migration.",
             "Pair Bartholomew with Dana for two weeks."]
    ids = [client.remember(type="context", title="Standup", content=text).id for text in notes]
    shown = client.entity_show("Dana")
    assert shown.entity.name == "Dana" and sorted(e.id for e in shown.entries) == ids
    assert [e.name for e in client.entities("ISO")] == []  # and no unit became one on the way
