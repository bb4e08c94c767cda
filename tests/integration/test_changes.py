"""The `changes` verb over the socket: versions move with what the caller sees, and with nothing else."""

from __future__ import annotations

from tests.conftest import as_user


def test_versions_move_with_every_visible_change_and_only_those(people):
    with as_user(people, "alice") as alice, as_user(people, "bob") as bob, as_user(people, "carol") as carol:
        private = alice.remember(type="project", title="Alice keeps this", content="private v1").id
        shared = alice.remember(type="project", title="Alice shares this", content="shared v1", team="core").id
        watched = [private, shared, 10**12]
        seen = bob.changes(watched)
        assert [e.id for e in seen.entries] == [shared]  # alice's private entry is as missing to bob as 10**12
        outside = carol.changes(watched)
        assert outside.entries == []

        alice.update(private, content="private v2")  # moves nothing bob or carol sees
        other = alice.remember(type="project", title="Alice's other note", content="another private one").id
        alice.link(shared, "relates_to", other)  # a link to an entry bob cannot see is as missing to him
        assert bob.changes(watched) == seen
        assert carol.changes(watched) == outside

        def moved(change) -> list[int]:
            nonlocal seen
            change()
            now = bob.changes(watched)
            assert now.memory != seen.memory
            was, seen = {e.id: e.version for e in seen.entries}, now
            return [i for i in watched if was.get(i) != {e.id: e.version for e in now.entries}.get(i)]

        assert moved(lambda: alice.update(shared, content="shared v2")) == [shared]
        assert moved(lambda: alice.forget(shared)) == [shared]
        assert moved(lambda: alice.restore(shared)) == [shared]
        assert moved(lambda: alice.remember(type="project", title="Alice replaces it", content="shared v3",
                                            team="core", supersedes_ids=[shared])) == [shared]
        assert moved(lambda: alice.unshare(shared)) == [shared]
        assert seen.entries == []  # unshared: gone for bob, as if purged
        assert moved(lambda: alice.share(private, "core")) == [private]
        assert moved(lambda: alice.purge(private)) == [private]
        assert moved(lambda: bob.remember(type="project", title="Bob's new note", content="bob's own")) == []


def test_a_supersedes_link_from_an_entry_the_caller_cannot_see_moves_no_version(people):
    with as_user(people, "alice") as alice, as_user(people, "bob") as bob:
        shared = alice.remember(type="project", title="Alice's shared plan", content="plan v1", team="core").id
        secret = alice.remember(type="project", title="Alice's private plan", content="plan v2",
                                supersedes_ids=[shared]).id
        seen, hers = bob.changes([shared]), alice.changes([shared])
        alice.unlink(secret, "supersedes", shared)  # the shared entry stays retired: nothing bob sees changed
        assert bob.changes([shared]) == seen
        assert alice.changes([shared]).entries != hers.entries  # its author saw the link go
