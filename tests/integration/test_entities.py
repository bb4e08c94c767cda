"""Entities through the daemon: the client methods, the wire errors and the CLI."""

from __future__ import annotations

import pytest

from arbiter.errors import Conflict, InvalidParams, NotFound
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
