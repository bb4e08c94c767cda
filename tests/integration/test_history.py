"""Record time through the daemon: known_at reads, history's revisions, restore, supersession integrity."""

from __future__ import annotations

import re

import pytest

from arbiter.errors import Conflict, InvalidParams, NotFound


def test_update_keeps_the_state_it_replaces_and_known_at_reads_it(client):
    e = client.remember(type="project", title="Ship v1", content="Target: Friday", tags=["release"])
    fixed = client.update(e.id, content="Target: Monday", tags=["release", "moved"])
    assert fixed.id == e.id and fixed.revised_at is not None and fixed.revised_at > e.recorded_at

    then = client.get(e.id, known_at=e.recorded_at)
    assert (then.content, then.tags, then.revised_at) == ("Target: Friday", ["release"], None)
    assert client.get(e.id).content == "Target: Monday"
    assert client.get(e.id, known_at=fixed.revised_at).content == "Target: Monday"
    assert [x.content for x in client.list(known_at=e.recorded_at)] == ["Target: Friday"]
    with pytest.raises(NotFound):  # not yet written
        client.get(e.id, known_at="2000-01-01T00:00:00Z")

    h = client.history(e.id)
    assert [(r.change, r.fields) for r in h.revisions] == [("remembered", []), ("updated", ["content", "tags"])]
    assert h.revisions[0].recorded_to == h.revisions[1].recorded_from == fixed.revised_at
    assert h.revisions[1].recorded_to is None
    assert [r.change for r in client.history(e.id, known_at=e.recorded_at).revisions] == ["remembered"]


def test_update_of_a_retired_entry_says_what_to_correct_and_records_nothing(daemon):
    """A retired entry is refused with what to do (the replacement, or restore), never `get`'s as-of hint."""
    from tests.integration.test_cli import one_line_error

    with daemon.client() as c:
        old = c.remember(type="project", title="Ship v1", content="Target: Friday")
        new = c.remember(type="project", title="Ship v1 slips", content="Target: Monday", supersedes_ids=[old.id])
        gone = c.remember(type="context", title="Scratch", content="Not needed")
        c.forget(gone.id)
        for entry_id in (old.id, gone.id):
            with pytest.raises(NotFound):
                c.update(entry_id, content="Target: Tuesday")
        said = {e: one_line_error(daemon.home, "update", str(e), "--content", "Target: Tuesday") for e in (old.id, gone.id)}
        assert f"#{new.id}" in said[old.id] and "restore" in said[gone.id]
        assert not any(re.search("as.of", line) for line in said.values()), said
        assert [[r.change for r in c.history(e).revisions if r.entry.id == e] for e in (old.id, gone.id)] == \
            [["remembered", "superseded"], ["remembered", "retired"]]


def test_a_corrected_speaker_is_a_revision_and_known_at_reads_the_old_one(client):
    e = client.remember(type="context", title="Support group", content="It was powerful", speaker="Melanie")
    fixed = client.update(e.id, speaker="Caroline")
    assert fixed.speaker == "Caroline" and client.get(e.id).speaker == "Caroline"
    assert client.get(e.id, known_at=e.recorded_at).speaker == "Melanie"
    assert [(r.change, r.fields, r.entry.speaker) for r in client.history(e.id).revisions] == \
        [("remembered", [], "Melanie"), ("updated", ["speaker"], "Caroline")]
    assert client.update(e.id, speaker="").speaker is None  # "" removes it
    assert client.get(e.id, known_at=fixed.revised_at).speaker == "Caroline"
    with pytest.raises(InvalidParams) as bad:  # one line, and nothing changes
        client.update(e.id, speaker="a\nb")
    assert bad.value.path == "speaker" and "\n" not in str(bad.value)
    assert len(client.history(e.id).revisions) == 3


def test_recall_with_known_at_searches_the_text_as_it_stood(client):
    e = client.remember(type="project", title="Ship v1", content="We ship on Friday")
    client.remember(type="project", title="Other", content="Friday lunch is pizza")
    client.update(e.id, content="We ship on Monday")
    hits = lambda query, **kw: [h.id for h in client.recall(query, **kw).hits]  # noqa: E731

    assert e.id not in hits("friday")
    past = {h.id: h for h in client.recall("friday", known_at=e.recorded_at).hits}
    assert e.id in past and past[e.id].excerpt == "We ship on **Friday**"
    assert e.id not in hits("monday", known_at=e.recorded_at)
    assert hits("monday") == [e.id]


def test_forget_and_restore_are_recorded_and_combine_with_as_of(client):
    e = client.remember(type="user", title="Prefers tabs", content="Tabs in Go files")
    assert client.forget(e.id)
    gone = client.get(e.id, as_of=e.valid_from)
    assert client.restore(e.id) and not client.restore(e.id)
    back = client.get(e.id)
    assert back.valid_to is None

    # Before the restore was recorded, the store held it retired: default reads miss it, as_of inside its window sees it.
    with pytest.raises(NotFound, match="is retired"):
        client.get(e.id, known_at=gone.revised_at)
    assert client.get(e.id, as_of=e.valid_from, known_at=gone.revised_at).valid_to == gone.valid_to
    assert [r.change for r in client.history(e.id).revisions] == ["remembered", "retired", "restored"]


def test_restore_is_refused_while_a_supersedes_link_retires_the_entry(client):
    old = client.remember(type="project", title="v1", content="Friday")
    new = client.remember(type="project", title="v2", content="Monday", supersedes_ids=[old.id])
    h = client.history(old.id)  # the chain's revisions, entry by entry
    assert [(r.id, r.change) for r in h.revisions] == [
        (old.id, "remembered"), (old.id, "superseded"), (new.id, "remembered")
    ]
    assert h.revisions[1].entry.superseded_by == [new.id]
    with pytest.raises(Conflict) as err:
        client.restore(old.id)
    assert f"#{new.id}" in err.value.message and err.value.existing_id is not None
    assert client.get(old.id, as_of=old.valid_from).valid_to is not None  # unchanged
    client.unlink(new.id, "supersedes", old.id)
    assert client.restore(old.id)
    # The link is gone, so the record says "retired" where it said "superseded"; the texts and times stay.
    assert [r.change for r in client.history(old.id).revisions] == ["remembered", "retired", "restored"]


def test_supersedes_needs_active_ends_and_names_the_retired_one(client):
    a = client.remember(type="project", title="a", content="a")
    b = client.remember(type="project", title="b", content="b", supersedes_ids=[a.id])
    c = client.remember(type="project", title="c", content="c")
    retired = client.get(a.id, as_of=a.valid_from).valid_to

    with pytest.raises(InvalidParams) as err:  # a retired source would retire c with nothing to undo it
        client.link(a.id, "supersedes", c.id)
    assert err.value.path == "source_id" and f"entry {a.id} is retired (since {retired})" in err.value.message
    with pytest.raises(InvalidParams) as err:  # the cycle back from b to a
        client.link(b.id, "supersedes", a.id)
    assert err.value.path == "target_id" and f"entry {a.id} is retired" in err.value.message
    with pytest.raises(InvalidParams) as err:
        client.remember(type="project", title="d", content="d", supersedes_ids=[a.id])
    assert err.value.path == "supersedes_ids[0]"
    with pytest.raises(InvalidParams) as err:  # two entries of one batch cannot both retire c
        client.remember_many([
            {"type": "project", "title": "e", "content": "e", "supersedes_ids": [c.id]},
            {"type": "project", "title": "f", "content": "f", "supersedes_ids": [c.id]},
        ])
    assert err.value.path == "entries[1].supersedes_ids[0]"
    assert client.get(c.id).valid_to is None
    client.link(a.id, "relates_to", c.id)  # other relations may point anywhere


def test_get_of_a_retired_entry_says_since_when(client):
    old = client.remember(type="project", title="v1", content="Friday")
    new = client.remember(type="project", title="v2", content="Monday", supersedes_ids=[old.id])
    with pytest.raises(NotFound) as err:
        client.get(old.id)
    assert f"superseded by #{new.id} at {new.valid_from}" in err.value.message
    assert "read it as of an earlier instant" in err.value.message  # in words: each front end spells as_of its own way


def test_thread_and_expand_with_known_at_leave_out_what_came_later(client):
    root = client.remember(type="project", title="Deploy runbook", content="Step one")
    first = client.reply(root.id, "Looks good")
    other = client.remember(type="project", title="Canary", content="canary notes")
    client.link(root.id, "relates_to", other.id)
    client.reply(root.id, "Added step two")
    client.update(root.id, content="Step one, step two")

    then = client.thread(root.id, known_at=first.recorded_at)
    assert then.root.content == "Step one" and [r.id for r in then.replies] == [first.id]
    assert len(client.thread(root.id).replies) == 2
    then = client.expand(root.id, known_at=first.recorded_at)
    assert then.edges == [] and {n.id for n in then.nodes} == {root.id, first.id}  # the link, the later reply: not yet
    now = client.expand(root.id)
    assert [(e.source_id, e.target_id) for e in now.edges] == [(root.id, other.id)]
    assert {n.id for n in now.nodes} >= {root.id, other.id}  # and the replies, by association


def test_a_valid_from_in_the_future_is_refused_so_every_read_agrees(client):
    with pytest.raises(InvalidParams) as err:
        client.remember(type="project", title="Later", content="c", valid_from="2999-01-01T00:00:00Z")
    assert err.value.path == "valid_from"
    e = client.remember(type="project", title="Now", content="c")
    assert client.get(e.id, as_of=client.get(e.id).recorded_at).id == e.id


def test_purge_removes_every_recorded_state(client, daemon):
    e = client.remember(type="project", title="Secret", content="zebra alpha")
    client.update(e.id, content="zebra beta")
    client.purge(e.id)
    with pytest.raises(NotFound):
        client.get(e.id, known_at=e.recorded_at)
    assert client.recall("alpha", known_at=e.recorded_at).hits == []
