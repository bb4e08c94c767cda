"""Visibility of what Arbiter derives from entries, through a real daemon: entities, associations, facts, salience.

One daemon for the module: the tenant's first user adds alice, bob and
carol; alice starts team `core` and adds bob; carol is in no team. Whatever
is derived from an entry (or a fact) a user cannot see must be missing for
them: not listed, not counted, not ranked, not named.
"""

from __future__ import annotations

import msgspec
import pytest

from arbiter.client import Client
from arbiter.errors import Conflict, Forbidden, NotFound
from arbiter.server import IDLE_S
from tests.conftest import as_user, wait_for




def names(c: Client) -> set[str]:
    return {e.name for e in c.entities(limit=1000)}


# ---- entities ----------------------------------------------------------------------


def test_an_entity_only_private_entries_mention_is_missing_for_everyone_else(people):
    with as_user(people, "alice") as alice:
        alice.remember(type="project", title="Zorbulon Dynamics deal", content="We met Zorbulon Dynamics today.")
        alice.remember(type="project", title="Quillfeather Labs", content="Quillfeather Labs ships in May.",
                       team="core")
        alice.remember(type="project", title="More Quillfeather Labs", content="Quillfeather Labs hired two.")
        assert {"Zorbulon Dynamics", "Quillfeather Labs"} <= names(alice)
        assert alice.entity_show("Quillfeather Labs").entity.mentions == 2
    with as_user(people, "bob") as bob:
        assert "Zorbulon Dynamics" not in names(bob)
        assert names(bob) >= {"Quillfeather Labs"}
        assert bob.entities("zorb") == []
        for call, args in ((bob.entity_show, ("Zorbulon Dynamics",)),
                           (bob.entity_rename, ("Zorbulon Dynamics", "Mine Now")),
                           (bob.entity_merge, ("Quillfeather Labs", "Zorbulon Dynamics")),
                           (bob.entity_relate, ("Quillfeather Labs", "related_to", "Zorbulon Dynamics"))):
            with pytest.raises(NotFound) as hidden:
                call(*args)
            with pytest.raises(NotFound) as missing:
                call(*[a.replace("Zorbulon Dynamics", "Never Said Anywhere") for a in args])
            assert hidden.value.message == missing.value.message.replace("Never Said Anywhere", "Zorbulon Dynamics")
        shown = bob.entity_show("Quillfeather Labs")
        assert shown.entity.mentions == 1  # the shared entry, not alice's private one
        assert [e.title for e in shown.entries] == ["Quillfeather Labs"]
        assert shown.cluster is None
        assert bob.status().entities == len(bob.entities(limit=1000))
        # Naming it himself makes it his too, and new to him.
        said = bob.remember(type="context", title="Zorbulon Dynamics call", content="Zorbulon Dynamics phoned bob.")
        assert [m.created for m in said.entities if m.name == "Zorbulon Dynamics"] == [True]
        assert bob.entity_show("Zorbulon Dynamics").entity.mentions == 1
    with as_user(people, "carol") as carol:
        assert not {"Zorbulon Dynamics", "Quillfeather Labs"} & names(carol)
        assert carol.status().entities == len(carol.entities(limit=1000))


def test_an_entitys_times_are_the_callers_own_not_those_of_anothers_private_note(people):
    """alice's private note creates "Vantablue Apollo"; bob names it later: his show, list and export date it by his."""
    with as_user(people, "alice") as alice:
        secret = alice.remember(type="project", title="Vantablue Apollo worry", content="A private worry.",
                                entities=["Vantablue Apollo"])
    with as_user(people, "bob") as bob:
        first = bob.remember(type="project", title="Bob meets them", content="Bob meets them.",
                             entities=["Vantablue Apollo"])
        later = bob.remember(type="project", title="Bob again", content="Bob meets them again.",
                             entities=["Vantablue Apollo"])
        assert secret.recorded_at < first.recorded_at < later.recorded_at
        shown = bob.entity_show("Vantablue Apollo").entity
        assert (shown.created_at, shown.updated_at) == (first.recorded_at, later.recorded_at)
        listed = [e for e in bob.entities("vantablue") if e.name == "Vantablue Apollo"]
        assert [(e.created_at, e.updated_at) for e in listed] == [(first.recorded_at, later.recorded_at)]
        records, after = [], 0
        while after is not None:
            page = bob.export_page("entity", after=after)
            records += [msgspec.json.decode(r) for r in page.records]
            after = page.next
        mine = [r for r in records if r["name"] == "Vantablue Apollo"]
        assert [(r["created_at"], r["updated_at"]) for r in mine] == [(first.recorded_at, later.recorded_at)]
        assert {n["created_at"] for r in mine for n in r["names"]} == {first.recorded_at}
    with as_user(people, "alice") as alice:
        assert alice.entity_show("Vantablue Apollo").entity.created_at == secret.recorded_at


def test_entity_relations_show_only_between_entities_the_caller_sees(people):
    with as_user(people, "alice") as alice:
        alice.remember(type="context", title="Hexaplume", content="Hexaplume Systems and Vortiga Mills talk.")
        alice.remember(type="context", title="Vortiga", content="Vortiga Mills again.", team="core")
        alice.remember(type="context", title="Hexaplume shared", content="Hexaplume Systems too.", team="core")
        alice.remember(type="context", title="Private Ostrava", content="Ostrava Foundry is secret.")
        alice.entity_relate("Hexaplume Systems", "works_on", "Vortiga Mills")
        alice.entity_relate("Hexaplume Systems", "uses", "Ostrava Foundry")
        assert len(alice.entity_show("Hexaplume Systems").relations) == 2
    with as_user(people, "bob") as bob:
        rels = bob.entity_show("Hexaplume Systems").relations
        assert [(r.source.name, r.relation, r.target.name) for r in rels] == [
            ("Hexaplume Systems", "works_on", "Vortiga Mills")]
        # Names are the tenant's: one another user's entity holds is taken, but which entity is not said.
        with pytest.raises(Conflict) as taken:
            bob.entity_rename("Vortiga Mills", "Ostrava Foundry")
        assert taken.value.existing_id is None


def export(c: Client, kind: str, **kw) -> list[dict]:
    """Every record of one kind in `c`'s export, page by page."""
    records, after = [], 0
    while after is not None:
        page = c.export_page(kind, after=after, **kw)
        records += [msgspec.json.decode(r) for r in page.records]
        after = page.next
    return records


def test_an_alias_only_anothers_private_note_wrote_is_missing_for_the_caller(people):
    """alice's private notes give "Brontavix Quellmoor Industries" a second spelling; bob names the entity later."""
    with as_user(people, "alice") as alice:
        alice.remember(type="project", title="Brontavix worry", content="Alice frets over Brontavix.",
                       entities=["Brontavix Quellmoor Industries"])
        alice.remember(type="project", title="Brontavix again", content="Alice frets over Brontavix again.",
                       entities=["Brontavix Quelmoor Industries"])
        assert alice.entity_show("Brontavix Quellmoor Industries").entity.aliases == ["Brontavix Quelmoor Industries"]
    with as_user(people, "bob") as bob:
        first = bob.remember(type="project", title="Brontavix for bob", content="Bob meets Brontavix.",
                             entities=["Brontavix Quellmoor Industries"])
        assert bob.entity_show("Brontavix Quellmoor Industries").entity.aliases == []  # before: alice's spelling
        assert bob.entities("brontavix quelm") == []
        with pytest.raises(NotFound) as hidden:
            bob.entity_show("Brontavix Quelmoor Industries")
        with pytest.raises(NotFound) as missing:
            bob.entity_show("Never Said Anywhere")
        assert hidden.value.message == missing.value.message.replace("Never Said Anywhere", "Brontavix Quelmoor Industries")
        (mine,) = [r for r in export(bob, "entity") if r["name"] == "Brontavix Quellmoor Industries"]
        assert mine["names"] == [{"name": "Brontavix Quellmoor Industries", "alias": False,
                                  "created_at": first.recorded_at}]
        # Writing the spelling himself makes it his, dated by his entry.
        said = bob.remember(type="project", title="Brontavix spelt", content="Bob spells it another way.",
                            entities=["Brontavix Quelmoor Industries"])
        assert bob.entity_show("Brontavix Quelmoor Industries").entity.aliases == ["Brontavix Quelmoor Industries"]
        assert [e.name for e in bob.entities("brontavix quelm")] == ["Brontavix Quellmoor Industries"]
        (mine,) = [r for r in export(bob, "entity") if r["name"] == "Brontavix Quellmoor Industries"]
        assert [(n["name"], n["created_at"]) for n in mine["names"]] == [
            ("Brontavix Quellmoor Industries", first.recorded_at), ("Brontavix Quelmoor Industries", said.recorded_at)]


def test_an_alias_a_merge_brought_shows_only_to_who_sees_an_entry_naming_it(people):
    with as_user(people, "alice") as alice:
        private = alice.remember(type="project", title="Tessaline private", content="Alice on Tessaline, privately.",
                                 entities=["Tessaline Ltd"])
        alice.remember(type="project", title="Tessaline shared", content="Alice on Tessaline, to the team.", entities=["Tessaline Group"],
                       team="core")
        alice.entity_merge("Tessaline Group", "Tessaline Ltd")
        assert alice.entity_show("Tessaline Group").entity.aliases == ["Tessaline Ltd"]
    with as_user(people, "bob") as bob:
        assert bob.entity_show("Tessaline Group").entity.aliases == []  # before: the private entity's name
    with as_user(people, "alice") as alice:
        alice.share(private.id, "core")
    with as_user(people, "bob") as bob:
        assert bob.entity_show("Tessaline Group").entity.aliases == ["Tessaline Ltd"]  # now he sees what named it


def test_a_merged_away_entitys_retirement_is_dated_by_what_the_caller_sees(people):
    """carol's fact names "Kelvrin Tessmark"; alice folds it into an entity only her private note names."""
    with as_user(people, "carol") as carol:
        fact = carol.facts_propose([{"subject": "carol", "predicate": "studied_at", "object": "Kelvrin Tessmark"}],
                                   apply=True).facts[0]
    with as_user(people, "alice") as alice:
        alice.remember(type="project", title="Kelvrin both", content="Alice on both Kelvrins.",
                       entities=["Kelvrin Tessmark", "Dovelund Kelvrin"])
        alice.entity_merge("Dovelund Kelvrin", "Kelvrin Tessmark")
    daemon, _ = people
    with daemon.client(daemon.admin_token) as admin:  # the whole tenant's export keeps the merge's own time
        (whole,) = [r for r in export(admin, "entity", tenant="default") if r["name"] == "Kelvrin Tessmark"]
    with as_user(people, "carol") as carol:
        (mine,) = [r for r in export(carol, "entity") if r["name"] == "Kelvrin Tessmark"]
        assert fact.recorded_at < whole["retired_at"]
        assert mine["retired_at"] == fact.recorded_at  # before: when alice merged it into her private entity
        assert not [r for r in export(carol, "entity_merge") if r["id"] == whole["id"]]


def test_an_entity_relations_times_never_precede_the_callers_knowing_both_ends(people):
    """alice relates two entities her private note names; bob names them later: the relation is not older for him."""
    with as_user(people, "alice") as alice:
        alice.remember(type="project", title="Quorvane pair", content="Alice pairs Quorvane and Pellimont.",
                       entities=["Quorvane Labs", "Pellimont Works"])
        made = alice.entity_relate("Quorvane Labs", "works_on", "Pellimont Works")
    with as_user(people, "bob") as bob:
        bob.remember(type="project", title="Quorvane for bob", content="Bob meets one.", entities=["Quorvane Labs"])
        second = bob.remember(type="project", title="Pellimont for bob", content="Bob meets the other.",
                              entities=["Pellimont Works"])
        (rel,) = bob.entity_show("Quorvane Labs").relations
        assert made.created_at < second.recorded_at
        assert (rel.created_at, rel.updated_at) == (second.recorded_at, second.recorded_at)  # before: alice's
        (record,) = [r for r in export(bob, "entity_relation") if r["weight"] == made.weight
                     and r["source_id"] == made.source.id]
        assert (record["created_at"], record["updated_at"]) == (second.recorded_at, second.recorded_at)
        bumped = bob.entity_relate("Quorvane Labs", "works_on", "Pellimont Works")  # his own act keeps its time
        assert bumped.created_at == second.recorded_at < bumped.updated_at
    with as_user(people, "alice") as alice:
        assert alice.entity_show("Quorvane Labs").relations[0].created_at == made.created_at


# ---- associations -----------------------------------------------------------------


def test_associations_list_only_edges_whose_both_ends_the_caller_sees(people):
    text = "the glimmerstone quarry expansion plan needs granite permits before winter arrives early"
    with as_user(people, "alice") as alice:
        secret = alice.remember(type="context", title="Glimmerstone quarry", content=text)
        shared = alice.remember(type="context", title="Glimmerstone quarry", content=text + " again", team="core")
    with as_user(people, "bob") as bob:
        mine = bob.remember(type="context", title="Glimmerstone quarry", content=text + " surely", candidates=True)
        assert secret.id not in [c.id for c in mine.candidates]
        others = {a.other_id for a in bob.associations(mine.id).associations}
        assert secret.id not in others
        assert shared.id in others
        with pytest.raises(NotFound):
            bob.associations(secret.id)
        assert secret.id not in {a.other_id for a in bob.associations(shared.id).associations}
    with as_user(people, "alice") as alice:
        # `shared` was written without candidates: the idle writer derives its edges (polled slower than IDLE_S).
        wait_for(lambda: shared.id in {a.other_id for a in alice.associations(secret.id).associations},
                 what="the idle writer to derive the shared entry's edges", interval=2 * IDLE_S)
        assert mine.id not in {a.other_id for a in alice.associations(secret.id).associations}


# ---- facts ------------------------------------------------------------------------


def test_a_private_batch_and_its_facts_are_missing_for_everyone_else(people):
    with as_user(people, "alice") as alice:
        source = alice.remember(type="user", title="Alice job", content="I work at Plonkware")
        batch = alice.facts_propose([{"subject": "alice", "predicate": "works_at", "object": "Plonkware",
                                      "sources": [source.id]},
                                     {"subject": "alice", "predicate": "hums_quietly", "object": "sea shanties"}],
                                    apply=True)
        assert batch.author == "alice" and batch.team is None
        fact = batch.facts[0]
        assert [f.object for f in alice.facts("alice").facts] == ["sea shanties", "Plonkware"] or \
            {f.object for f in alice.facts("alice").facts} == {"Plonkware", "sea shanties"}
        assert [f.id for f in alice.recall("Plonkware").facts] == [fact.id]
        assert "hums_quietly" in {p.name for p in alice.predicates().predicates}
        assert "Plonkware" in names(alice)  # the typed object became an entity alice's fact names
    with as_user(people, "bob") as bob:
        assert bob.facts("alice").facts == []
        assert bob.facts(status="candidate").facts == [] and bob.facts(status="rejected").facts == []
        assert batch.id not in [b.id for b in bob.batch_list().batches]
        for call in (bob.batch_show, bob.batch_evaluate, bob.batch_apply, bob.batch_reject):
            with pytest.raises(NotFound):
                call(batch.id)
        with pytest.raises(NotFound):
            bob.fact_history(fact.id)
        assert bob.recall("Plonkware").facts == []
        assert "hums_quietly" not in {p.name for p in bob.predicates().predicates}
        assert {p.name: p.active_facts for p in bob.predicates().predicates}["works_at"] == 0
        assert all(a.facts == 0 for a in bob.aspects().aspects)
        assert "Plonkware" not in names(bob)
        assert "Facts: none yet" in bob.briefing().text
        # A source must be an entry the proposer sees.
        with pytest.raises(NotFound):
            bob.facts_propose([{"subject": "bob", "predicate": "knows", "object": "alice", "sources": [source.id]}])


def test_a_team_batch_is_seen_by_the_team_and_judged_only_against_its_scope(people):
    with as_user(people, "alice") as alice:
        private = alice.remember(type="user", title="Note", content="the team lead lives in Brindlemoor")
        alice.facts_propose([{"subject": "team lead", "predicate": "lives_in", "object": "Brindlemoor"}], apply=True)
        shared = alice.facts_propose(
            [{"subject": "team lead", "predicate": "lives_in", "object": "Brindlemoor", "sources": [private.id]}],
            apply=True, team="core",
        )
        # Not swallowed as a duplicate of alice's private fact: the team gets its own.
        assert shared.team == "core" and shared.facts[0].status == "active"
        assert len(alice.facts("team lead").facts) == 2
    with as_user(people, "bob") as bob:
        (seen,) = bob.facts("team lead").facts
        assert seen.id == shared.facts[0].id
        assert seen.sources == []  # alice's private entry is not named to him
        assert shared.id in [b.id for b in bob.batch_list().batches]
        assert bob.batch_show(shared.id).author == "alice"
        assert [f.id for f in bob.recall("Brindlemoor").facts] == [seen.id]
        assert sum(a.facts for a in bob.aspects().aspects) >= 1
        # Bob's private belief is judged against his own facts only: no finding names alice's.
        mine = bob.facts_propose([{"subject": "team lead", "predicate": "lives_in", "object": "Quarrytown"}],
                                 apply=True)
        assert mine.facts[0].finding == "accept"
        assert {f.object for f in bob.facts("team lead").facts} == {"Brindlemoor", "Quarrytown"}
    with as_user(people, "carol") as carol:
        assert carol.facts("team lead").facts == []
        assert carol.recall("Brindlemoor").facts == []
        with pytest.raises(NotFound):
            carol.batch_show(shared.id)
        with pytest.raises(NotFound):
            carol.fact_history(seen.id)


def _proposed_then_left(people, team: str, subject: str, rival: str):
    """alice proposes `subject` in Oslo to `team` and leaves it; bob then applies a fact of his there: (batch, his fact)."""
    with as_user(people, "alice") as alice:
        alice.team_add(team)
        alice.team_join(team, "bob")
        pending = alice.facts_propose([{"subject": subject, "predicate": "located_in", "object": "Oslo"}], team=team)
        alice.team_leave(team, "alice")
    with as_user(people, "bob") as bob:
        theirs = bob.facts_propose([{"subject": subject, "predicate": "located_in", "object": rival,
                                     "valid_from": "2020-01-01T00:00:00Z"}], team=team, apply=True).facts[0]
    return pending, theirs


def test_a_team_batch_is_not_judged_by_its_author_once_they_left_the_team(people):
    """The gate reads the team's facts, names them and retires them: alice left `fens`, so she must not run it."""
    pending, theirs = _proposed_then_left(people, "fens", "Project Kestrel", "Skerry Seven")
    with as_user(people, "alice") as alice:
        for call in (alice.batch_evaluate, alice.batch_apply):
            with pytest.raises(Forbidden):
                call(pending.id)
        shown = alice.batch_show(pending.id)
        assert shown.status == "proposed" and "Skerry" not in msgspec.json.encode(shown).decode()
        assert alice.batch_reject(pending.id).status == "rejected"
    with as_user(people, "bob") as bob:
        assert [(f.id, f.valid_to) for f in bob.facts("Project Kestrel").facts] == [(theirs.id, None)]


def test_a_batch_a_teammate_applied_names_no_team_fact_to_its_author_who_left(people):
    """bob applies alice's `marsh` batch after she left: its finding retired his fact, which she does not see."""
    pending, theirs = _proposed_then_left(people, "marsh", "Project Heron", "Skerry Eight")
    with as_user(people, "bob") as bob:
        (applied,) = bob.batch_apply(pending.id).facts
        assert (applied.finding, applied.supersedes_fact_id) == ("supersede", theirs.id)
        assert "Skerry Eight" in applied.reason
    with as_user(people, "alice") as alice:
        for shown in (alice.batch_show(pending.id).facts[0], alice.facts("Project Heron").facts[0],
                      alice.fact_history(applied.id).facts[0]):
            assert shown.id == applied.id and shown.supersedes_fact_id is None
            assert "Skerry" not in shown.reason and f"#{theirs.id}" not in shown.reason
        exported = b"".join(alice.export_page("fact").records).decode()
        assert "Oslo" in exported and "Skerry" not in exported


# ---- salience ---------------------------------------------------------------------


def test_reinforce_needs_an_entry_the_caller_sees(people):
    with as_user(people, "alice") as alice:
        secret = alice.remember(type="context", title="Secret", content="a private thought about kelp")
        shared = alice.remember(type="context", title="Shared", content="a shared thought about kelp", team="core")
    with as_user(people, "bob") as bob:
        with pytest.raises(NotFound) as hidden:
            bob.reinforce(secret.id)
        with pytest.raises(NotFound) as missing:
            bob.reinforce(10**9)
        assert hidden.value.message == missing.value.message.replace(str(10**9), str(secret.id))
        assert bob.reinforce(shared.id).reinforcements == 1
    with as_user(people, "carol") as carol:
        with pytest.raises(NotFound):
            carol.reinforce(shared.id)


def test_fact_scores_use_only_the_callers_statistics(people):
    with as_user(people, "alice") as alice:
        alice.facts_propose([{"subject": "the orchard", "predicate": "grows", "object": "medlar trees"},
                             {"subject": "the orchard", "predicate": "grows", "object": "quince"}], apply=True)
        before = [(h.id, h.score) for h in alice.recall("orchard medlar", explain=True).facts]
    with as_user(people, "carol") as carol:
        carol.facts_propose([{"subject": f"medlar orchard {i}", "predicate": "grows", "object": "medlar"}
                             for i in range(8)], apply=True)
        assert len(carol.recall("orchard medlar").facts) == 5
    with as_user(people, "alice") as alice:
        assert [(h.id, h.score) for h in alice.recall("orchard medlar", explain=True).facts] == before


def test_status_shows_the_tenant_wide_maintenance_report_only_in_a_one_user_tenant(people):
    d, _ = people
    with d.client() as owner:
        owner.maintain()
    with as_user(people, "bob") as bob:
        status = bob.status()
        assert (status.last_maintenance, status.average_salience, status.entity_clusters) == (None, None, 0)


def test_a_users_export_carries_no_entity_event_naming_anothers_private_entries(people):
    """A merge's event records the entries it moved, whoever wrote them: only a whole-tenant export carries events."""
    with as_user(people, "alice") as alice:
        secret = alice.remember(type="project", title="Orbix worry", content="A private worry about Orbix.",
                                entities=["Orbix Corpwide"])
    with as_user(people, "bob") as bob:
        bob.remember(type="project", title="Orbix one", content="Bob on them.", entities=["Orbix Corpwide"])
        bob.remember(type="project", title="Orbix two", content="Bob again.", entities=["Orbix Incwide"])
        bob.entity_merge("Orbix Incwide", "Orbix Corpwide")
        records, after = [], 0
        while after is not None:
            page = bob.export_page("entity_event", after=after)
            records += [msgspec.json.decode(r) for r in page.records]
            after = page.next
        assert records == []  # before: the merge's record listed alice's entry among those it moved
    daemon, _ = people
    with daemon.client(daemon.admin_token) as admin:  # the whole tenant's export (--all) keeps the record
        events = [msgspec.json.decode(r) for r in admin.export_page("entity_event", tenant="default").records]
    assert any(e["event"] == "merge" and secret.id in msgspec.json.decode(e["detail"])["entries"] for e in events)
