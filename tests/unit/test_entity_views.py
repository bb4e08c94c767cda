"""What each user sees of the tenant's entities: lists, counts, dates and graphs ranked by the mentions that
user sees, never by another's private notes (arbiter/entities/visibility.py), on both engines."""

from __future__ import annotations

import msgspec
import pytest

from arbiter import verbs
from arbiter._time import format_time
from arbiter.entities import core, visibility
from arbiter.errors import NotFound
from arbiter.store import tenants, users
from arbiter.verb import Context
from tests.unit.conftest import execute
from tests.unit.test_entities import NOW

pytestmark = pytest.mark.both_engines


def every_seed_on_sqlite(cases: list[tuple]) -> list[tuple]:
    """`db` with a test's random cases: every one on SQLite, the first on PostgreSQL. The seeds vary the data, not
    the statements, and a PostgreSQL write costs three SQLite ones: the engines' parity is the first case's."""
    return [("sqlite", *case) for case in cases] + [("postgresql", *cases[0])]


def test_a_writer_s_names_never_meet_an_entity_only_another_user_sees(db, tenant):
    with db:
        ann, ben = (users.create_user(db, tenant, name, now=NOW)[0] for name in ("ann", "ben"))

    def write(user, content, **kw):
        spec = verbs.VERBS["remember"]
        params = msgspec.convert(dict(type="project", title="Note", content=content, **kw), spec.params)
        return execute(db, tenant, "remember", params, now=NOW, user_id=user)

    secret = write(ann, "private", entities=["International Business Machines Corporation", "Project Apollo",
                                             "Zephyr"])
    known = {m.name: m.id for m in secret.entities}
    # For ben (who sees none of them) a near spelling is a new entity, with no "possibly the same as".
    near = write(ben, "mine", entities=["International Busines Machines", "Project Apollonia"])
    assert [(m.created, m.possibly_same_as) for m in near.entities] == [(True, []), (True, [])]
    assert not {m.id for m in near.entities} & set(known.values())
    assert write(ben, "we deploy Zephyr today").entities == []  # a lone capitalised word links no unseen entity
    # For ann, who sees it, the word links her entity (tests above show near names meeting a seen entity).
    assert [m.id for m in write(ann, "we deploy Zephyr today").entities] == [known["Zephyr"]]


def test_a_relation_is_dated_for_a_user_of_part_of_the_tenant_by_when_they_met_both_ends(db, tenant):
    """`entity show` and the export date a relation for a user who does not see the whole tenant by the later of
    its own time and when they first saw each end: ann's private note named both ends first."""
    with db:
        ann, ben = (users.create_user(db, tenant, name, now=NOW)[0] for name in ("ann", "ben"))
    for user, at in ((ann, NOW), (ben, NOW + 100)):
        execute(db, tenant, "remember", dict(type="project", title="Stack", content="Apollo runs on Zephyr",
                                             entities=["Apollo", "Zephyr"]), now=at, user_id=user)
    execute(db, tenant, "entity_relate", dict(source="Apollo", relation="depends_on", target="Zephyr"),
            now=NOW + 10, user_id=ann)
    shown = execute(db, tenant, "entity_show", dict(name="Apollo"), now=NOW + 200, user_id=ben)
    assert [(r.relation, r.target.name, r.created_at) for r in shown.relations] == [
        ("depends_on", "Zephyr", format_time(NOW + 100))]
    page = execute(db, tenant, "export_page", dict(kind="entity_relation"), now=NOW + 200, user_id=ben)
    assert [msgspec.json.decode(r)["created_at"] for r in page.records] == [format_time(NOW + 100)]
    mine = execute(db, tenant, "entity_show", dict(name="Apollo"), now=NOW + 200, user_id=ann)
    assert [r.created_at for r in mine.relations] == [format_time(NOW + 10)]


@pytest.mark.parametrize("db, seed, share", every_seed_on_sqlite([(1, 0.6), (2, 0.6), (3, 0.3), (4, 0.45)]),
                         indirect=["db"])
def test_a_users_list_ranks_by_the_mentions_they_see_though_others_mention_more(db, tenant, seed, share):
    """The list walks entities by everyone's mentions and stops early (or, for a user who sees little of the tenant,
    counts from what they see): the page is still exactly the viewer's top."""
    import random

    rng = random.Random(seed)  # ann writes `share` of the notes
    with db:
        ann, ben = (users.create_user(db, tenant, name, now=NOW)[0] for name in ("ann", "ben"))
    pool = [f"Rankling {chr(65 + i)}{chr(65 + j)}" for i in range(10) for j in range(10)]  # more than a chunk
    seen: dict[int, int] = {}
    spec = verbs.VERBS["remember"]
    for n in range(300):
        user = ann if rng.random() < share else ben  # ann's private notes skew the counts by everyone
        named = rng.sample(pool[:8] if user == ann and rng.random() < 0.7 else pool, rng.randint(1, 3))
        params = msgspec.convert(dict(type="project", title="Note", content=f"note {n}", entities=named), spec.params)
        written = execute(db, tenant, "remember", params, now=NOW + n, user_id=user)
        if user == ben:
            for m in written.entities:
                seen[m.id] = seen.get(m.id, 0) + 1
    v = users.viewer(db, tenant, ben, "ben")
    expected = sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))
    for limit in (1, 5, 12, 70, 200):
        listed = core.list_entities(db, v, limit=limit)
        assert [(e.id, e.mentions) for e in listed] == expected[:limit]


@pytest.mark.parametrize("sample", [1000, 8])
def test_the_list_walk_goes_past_a_chunk_of_entities_others_mention_more(db, tenant, sample, monkeypatch):
    """64 entities ann mentions 5 times and ben once come first by everyone's mentions; ben's top is past them.
    Ben sees a fifth of the tenant, so the list counts from what he sees; judged by the newest 8 entries (his),
    it walks."""
    monkeypatch.setattr(visibility, "SAMPLE", sample)
    with db:
        ann, ben = (users.create_user(db, tenant, name, now=NOW)[0] for name in ("ann", "ben"))
    crowded = [f"Crowdling {i:02d}" for i in range(64)]
    his = [f"Bensling {i}" for i in range(5)]
    spec = verbs.VERBS["remember"]
    n = 0

    def write(user, named):
        nonlocal n
        n += 1
        params = msgspec.convert(dict(type="project", title="Note", content=f"walk note {n}", entities=named),
                                 spec.params)
        return execute(db, tenant, "remember", params, now=NOW + n, user_id=user)

    for _ in range(5):
        for i in range(0, 64, 8):
            write(ann, crowded[i:i + 8])
    for i in range(0, 64, 8):
        write(ben, crowded[i:i + 8])
    for _ in range(2):
        write(ben, his)
    listed = core.list_entities(db, users.viewer(db, tenant, ben, "ben"), limit=5)
    assert [(e.name, e.mentions) for e in listed] == [(name, 2) for name in his]


@pytest.mark.parametrize("db, seed, share", every_seed_on_sqlite([(1, 0.3), (2, 0.45), (3, 0.6), (4, 0.95)]),
                         indirect=["db"])
def test_a_users_entity_graph_ranks_by_the_mentions_they_see_by_then(db, tenant, seed, share):
    """The web view's entity graph walks as the list does (ties by id at the page's edge, and a reader who sees
    little counted from their entries): its nodes are exactly the viewer's top by their mentions recorded by then."""
    import random

    from arbiter._time import format_time
    from arbiter.ui.model import GraphViewParams

    rng = random.Random(seed)  # ann writes `share` of the notes: ben sees most of them, or little
    with db:
        ann, ben = (users.create_user(db, tenant, name, now=NOW)[0] for name in ("ann", "ben"))
    pool = [f"Graphling {chr(65 + i)}{chr(65 + j)}" for i in range(10) for j in range(10)]  # more than a chunk
    his: list[tuple[int, int]] = []  # (when, entity) for each of ben's mentions
    spec = verbs.VERBS["remember"]
    for n in range(300):
        user = ann if rng.random() < share else ben
        named = rng.sample(pool[:8] if user == ann and rng.random() < 0.7 else pool, rng.randint(1, 3))
        params = msgspec.convert(dict(type="project", title="Note", content=f"graph note {n}", entities=named),
                                 spec.params)
        written = execute(db, tenant, "remember", params, now=NOW + n, user_id=user)
        his += [(n, m.id) for m in written.entities] if user == ben else []
    for upto in (299, 150):
        seen: dict[int, int] = {}
        for n, eid in his:
            if n <= upto:
                seen[eid] = seen.get(eid, 0) + 1
        expected = [i for i, _ in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))]
        for limit in (1, 5, 12, 70, 200):
            p = GraphViewParams(view="entities", limit=limit, as_of=format_time(NOW + upto))
            drawn = execute(db, tenant, "graph_view", p, now=NOW + 400, user_id=ben)
            assert [n.id for n in drawn.nodes] == expected[:limit]
            assert drawn.truncated == (len(expected) > limit)


_HUES = {"red": ["red", "crimson", "scarlet", "ruby"], "blue": ["blue", "navy", "azure", "cobalt"],
         "green": ["green", "olive", "lime", "jade"]}


def _solo_and_shared(db, *, first_in_core: bool = False):
    """A one-user tenant and a shared one: its first user, ann, ben and cat, and teams core and old (ann and ben in
    both, cat in none; the first user in core if asked). Returns (solo, shared, first, ann, ben, cat, old)."""
    with db:
        solo = tenants.create_tenant(db, "solo", now=NOW)[0]
        shared = tenants.create_tenant(db, "shared", now=NOW)[0]
        first = users.first_user(db, shared)
        ann, ben, cat = (users.create_user(db, shared, name, now=NOW)[0] for name in ("ann", "ben", "cat"))
        core, old = (users.create_team(db, shared, name, now=NOW) for name in ("core", "old"))
        for team, member in ((core, ann), (core, ben), (old, ann), (old, ben), *([(core, first)] if first_in_core else [])):
            users.join(db, team, member, now=NOW)
    return solo, shared, first, ann, ben, cat, old


@pytest.mark.parametrize("db, seed", every_seed_on_sqlite([(1,), (2,), (3,)]), indirect=["db"])
def test_the_entity_graph_colours_and_dates_each_entity_by_the_entries_the_viewer_sees(db, seed):
    """Each entity's colour is the topic most of the active entries the viewer sees naming it belong to (an entry's
    topic: the cluster holding most of its tags; ties to the lower index, both times), for a one-user tenant and for
    each user of a shared one, including one who left a team (he sees only what he wrote there) and one who sees
    little (the nodes in order of the mentions they see); and each entry node of the entries view is coloured by its
    own tags the same way. Nothing another user keeps private colours or dates a node: the expected colours and dates
    (the first entry naming it) come only from what each viewer sees."""
    import random

    from arbiter._time import format_time
    from arbiter.ui.model import GraphViewParams

    rng = random.Random(seed)
    solo, shared, first, ann, ben, cat, old_team = _solo_and_shared(db)
    pool = [f"Huebert {chr(65 + i)}" for i in range(14)]
    # ben's private fact names an entity before any entry does: his date for it, no one else's
    execute(db, shared, "facts_propose", {"facts": [{"subject": "user", "predicate": "works_at", "object": pool[0]}],
                                          "apply": True}, now=NOW, user_id=ben, tenant_name="t")
    (fact_entity, fact_at), = db.execute("SELECT object_entity_id, recorded_at FROM facts WHERE status = 'active'")
    spec = verbs.VERBS["remember"]
    written: list[tuple[int, int, int, str | None, bool, int]] = []  # (tenant, entry, author, team, forgotten, when)
    writers = [(solo, users.first_user(db, solo))] * 60 + [(shared, u) for u in (first, ann, ann, ben, ben, cat)] * 40
    for n, (tid, user) in enumerate(writers):
        hue = rng.choice(list(_HUES))
        tags = rng.sample(_HUES[hue], rng.randint(0, 3))
        if rng.random() < 0.4:  # a second topic, often a tie
            tags += rng.sample(_HUES[rng.choice(list(_HUES))], 1)
        if rng.random() < 0.2:
            tags.append(f"lone{rng.randint(1, 5)}")  # a tag in no cluster
        team = rng.choice([None, None, "core", "old"]) if tid == shared and user in (ann, ben) else None
        named = rng.sample(pool, rng.randint(1, 3))
        params = msgspec.convert(dict(type="project", title=f"Hue note {n}", content=f"hue note {n}",
                                      tags=list(dict.fromkeys(tags)), entities=named, team=team), spec.params)
        entry = execute(db, tid, "remember", params, now=NOW + n, user_id=user, tenant_name="t").id
        gone = rng.random() < 0.15
        if gone:
            execute(db, tid, "forget", {"id": entry}, now=NOW + n, user_id=user, tenant_name="t")
        written.append((tid, entry, user, team, gone, NOW + n))
    with db:
        users.leave(db, old_team, ben, now=NOW + 1000)  # ben now sees only what he wrote in "old"

    def sees(user: int | None, author: int, team: str | None) -> bool:
        if user is None or author == user:
            return True
        return team == "core" and user in (ann, ben) or team == "old" and user == ann

    def most(votes: list[int]) -> int | None:  # ties to the lower index
        return min(votes, key=lambda i: (-votes.count(i), i)) if votes else None

    for tid, user in ((solo, None), (shared, first), (shared, ann), (shared, ben), (shared, cat)):
        def view(p: GraphViewParams):
            return execute(db, tid, "graph_view", p, now=NOW + 2000, user_id=user, tenant_name="t")

        drawn = view(GraphViewParams(view="entities", limit=200))
        entries_view = view(GraphViewParams(limit=2000))
        where = {t: i for i, c in enumerate(drawn.clusters) for t in c.tags}
        assert len(drawn.clusters) >= 2 and drawn.clusters == entries_view.clusters
        votes: dict[int, list[int]] = {}
        first: dict[int, int] = {fact_entity: fact_at} if user == ben else {}  # when the viewer first saw it named
        mentions: dict[int, int] = {}
        for wtid, entry, author, team, gone, when in written:
            if wtid != tid or not sees(user, author, team):
                continue
            for (entity,) in db.execute("SELECT entity_id FROM entry_entities WHERE entry_id = ?", (entry,)):
                first[entity] = min(first.get(entity, when), when)
                mentions[entity] = mentions.get(entity, 0) + 1
            if gone:
                continue
            tags = msgspec.json.decode(db.execute("SELECT tags FROM entries WHERE id = ?", (entry,)).fetchone()[0])
            if (c := most([where[t] for t in tags if t in where])) is not None:
                for (entity,) in db.execute("SELECT entity_id FROM entry_entities WHERE entry_id = ?", (entry,)):
                    votes.setdefault(entity, []).append(c)
        assert drawn.nodes and {n.id: n.cluster for n in drawn.nodes} == {n.id: most(votes.get(n.id, []))
                                                                          for n in drawn.nodes}
        assert any(n.cluster is not None for n in drawn.nodes)
        ranked = sorted(mentions, key=lambda i: (-mentions[i], i))
        assert [n.id for n in drawn.nodes] == ranked
        assert [n.id for n in view(GraphViewParams(view="entities", limit=5)).nodes] == ranked[:5]
        assert {n.id: n.valid_from for n in drawn.nodes} == {n.id: format_time(first[n.id]) for n in drawn.nodes}
        if user == ben:  # his fact dates the entity, before any entry he sees names it
            assert [n.valid_from for n in drawn.nodes if n.id == fact_entity] == [format_time(fact_at)]
        assert entries_view.nodes and all(n.cluster == most([where[t] for t in n.tags if t in where])
                                          for n in entries_view.nodes)


def test_the_entity_graph_of_a_past_moment_ranks_by_the_mentions_recorded_by_then(db, tenant):
    """The slider's past: a one-user tenant's graph counted later mentions too, where a shared tenant's did not."""
    from arbiter._time import format_time
    from arbiter.ui.model import GraphViewParams

    spec = verbs.VERBS["remember"]
    for n, named in enumerate([["Alphaville", "Betamax"], ["Alphaville"], ["Betamax"], ["Betamax"], ["Betamax"]]):
        params = msgspec.convert(dict(type="project", title="Note", content=f"note {n}", entities=named),
                                 spec.params)
        execute(db, tenant, "remember", params, now=NOW + 10 * n)
    ids = {r[0]: r[1] for r in db.execute("SELECT name, id FROM entities WHERE tenant_id = ?", (tenant,))}
    def drawn(**at):
        return [n.id for n in execute(db, tenant, "graph_view", GraphViewParams(view="entities", **at), now=NOW + 100).nodes]

    assert drawn(as_of=format_time(NOW + 15)) == [ids["Alphaville"], ids["Betamax"]]  # 2 mentions to 1 by then
    assert drawn() == [ids["Betamax"], ids["Alphaville"]]  # 4 to 2 now


def test_a_users_entity_count_is_the_same_by_either_plan(db, tenant):
    """`count` asks each entity for a user who sees most of the tenant and gathers from what they see for one who
    sees little: both count the entities their entries mention or their active facts name, none merged away."""

    with db:
        ann, ben = (users.create_user(db, tenant, name, now=NOW)[0] for name in ("ann", "ben"))
    spec = verbs.VERBS["remember"]
    for n, (user, named) in enumerate([(ann, [f"Countling {c}", "Countling Z"]) for c in "ABCDEFGHIJ"]
                                      + [(ben, ["Benling X", "Countling A"]), (ben, ["Benling X"])]):
        params = msgspec.convert(dict(type="project", title="Note", content=f"count note {n}", entities=named),
                                 spec.params)
        execute(db, tenant, "remember", params, now=NOW + n, user_id=user)
    # a fact only: ben's applied fact makes "Acme Corp" an entity for him alone
    execute(db, tenant, "facts_propose", {"facts": [{"subject": "user", "predicate": "works_at", "object": "Acme Corp"}],
                                          "apply": True}, now=NOW + 50, user_id=ben, tenant_name="t")
    with db:
        core.merge(db, users.viewer(db, tenant, ann, "ann"), "Countling B", "Countling C", now=NOW + 60)
    a, b = users.viewer(db, tenant, ann, "ann"), users.viewer(db, tenant, ben, "ben")
    assert visibility.sees_most(db, a) and not visibility.sees_most(db, b)
    assert core.count(db, a) == len(core.list_entities(db, a, limit=1000)) == 10  # A..J and Z, C merged into B
    assert {e.name for e in core.list_entities(db, b, limit=1000)} == {"Benling X", "Countling A", "Acme Corp"}
    assert core.count(db, b) == 3


def test_a_fact_another_user_keeps_private_neither_makes_dates_nor_counts_an_entity(db, tenant):
    """Every entity read sees a fact through one clause (`visibility._facts_sql`): ben's private active fact names
    an entity as subject (an entity ann sees through a team entry) and as object (one only cat's private note names
    besides); ann's candidate fact names one too. For ann (who sees most of the tenant) and cat (who sees little:
    the other plan of `count` and the list), neither fact makes an entity exist, dates it or counts it; for ben his
    own does, from both ends."""

    with db:
        ann, ben, cat = (users.create_user(db, tenant, name, now=NOW)[0] for name in ("ann", "ben", "cat"))
        team = users.create_team(db, tenant, "core", now=NOW)
        for member in (ann, ben):
            users.join(db, team, member, now=NOW)
    spec = verbs.VERBS["remember"]

    def write(user: int, at: int, name: str, team: str | None) -> None:
        params = msgspec.convert(dict(type="project", title="Note", content=f"note {at} on {name}", entities=[name], team=team),
                                 spec.params)
        execute(db, tenant, "remember", params, now=at, user_id=user, tenant_name="t")

    def propose(user: int, at: int, fact: dict, apply: bool) -> None:
        execute(db, tenant, "facts_propose", {"facts": [fact], "apply": apply}, now=at, user_id=user, tenant_name="t")

    for n in range(3):
        write(ann, NOW + 1 + n, "Quorvel Anstey", "core")
    propose(ben, NOW + 10, {"subject": "Quorvel Anstey", "predicate": "works_at", "object": "Zintari Labs"}, True)
    write(cat, NOW + 20, "Zintari Labs", None)
    propose(ann, NOW + 30, {"subject": "Quorvel Anstey", "predicate": "lives_in", "object": "Brindle Harbour"}, False)
    assert {r for r in db.execute("SELECT status, subject_entity_id IS NOT NULL FROM facts")} == \
        {("active", 1), ("candidate", 1)}  # each names an entity at its subject
    ids = dict(db.execute("SELECT name, id FROM entities WHERE tenant_id = ?", (tenant,)))
    t = format_time
    seen = {  # name: (mentions, created_at, updated_at) as each user may know it
        ann: {"Quorvel Anstey": (3, t(NOW + 1), t(NOW + 3))},
        cat: {"Zintari Labs": (1, t(NOW + 20), t(NOW + 20))},
        ben: {"Quorvel Anstey": (3, t(NOW + 1), t(NOW + 10)), "Zintari Labs": (0, t(NOW + 10), t(NOW + 10))},
    }
    views = {user: users.viewer(db, tenant, user, name) for user, name in ((ann, "ann"), (ben, "ben"), (cat, "cat"))}
    assert visibility.sees_most(db, views[ann]) and not visibility.sees_most(db, views[cat])
    for user, expected in seen.items():
        v = views[user]
        listed = {e.name: (e.mentions, e.created_at, e.updated_at) for e in core.list_entities(db, v, limit=10)}
        assert listed == expected, user
        assert core.count(db, v) == len(expected)
        for name in ("Quorvel Anstey", "Zintari Labs"):
            if name in expected:
                shown = core.get(db, v, ids[name])
                assert (shown.mentions, shown.created_at, shown.updated_at) == expected[name]
            else:
                assert not visibility.visible(db, v, ids[name])
                with pytest.raises(NotFound):
                    core.get(db, v, ids[name])


def test_a_query_naming_an_alias_only_anothers_private_note_wrote_finds_nothing(db, tenant):
    """Recall's `entities` factor and graph recall's ENTITY intent read names as the caller knows them."""
    from arbiter.associations.walk import intent
    from arbiter.entities.recall import query_entities

    with db:
        ann, ben = (users.create_user(db, tenant, name, now=NOW)[0] for name in ("ann", "ben"))
    spec = verbs.VERBS["remember"]
    for n, (user, name) in enumerate([(ann, "Brontavix Quellmoor Industries"), (ann, "Brontavix Quelmoor Industries"),
                                      (ben, "Brontavix Quellmoor Industries")]):
        params = msgspec.convert(dict(type="project", title="Note", content=f"alias note {n}", entities=[name]),
                                 spec.params)
        execute(db, tenant, "remember", params, now=NOW + n, user_id=user)
    question = "What about Brontavix Quelmoor Industries"
    for user, name, found in ((ann, "ann", True), (ben, "ben", False)):
        v = users.viewer(db, tenant, user, name)
        assert bool(query_entities(db, v, question, stopwords=frozenset()).ids) is found
        assert (intent(db, v, question) == "entity") is found
        assert bool(query_entities(db, v, "What about Brontavix Quellmoor Industries", stopwords=frozenset()).ids)


@pytest.mark.parametrize("db, seed", every_seed_on_sqlite([(1,), (2,)]), indirect=["db"])
def test_the_list_s_names_counts_dates_and_pages_are_each_viewer_s_own(db, seed):
    """The entities list, every page of it (edges inside runs of equal counts), with and without `query` and `type`,
    for a one-user tenant and each user of a shared one: one who sees most of it, one who sees little, one who left a
    team (he sees only what he wrote there). Each viewer's names, mentions, dates and aliases come only from the entries
    (and active facts) they see: an entity only another user's private note names is missing, one merged away is
    gone and its links count for the one it was merged into, and a spelling it had is an alias only to who saw it."""
    import random

    from arbiter._time import format_time

    rng = random.Random(seed)
    solo, shared, first, ann, ben, cat, old_team = _solo_and_shared(db, first_in_core=True)
    typed = {f"Alder {c}": "project" for c in "ABCDE"} | {f"Birch {c}": "person" for c in "ABCDE"}
    pool = list(typed) + ["Cedar Z"]  # Cedar Z is merged into Birch A once written
    # ben's private fact names an entity no entry names (his, with no mentions) and dates one before entries
    execute(db, shared, "facts_propose", {"facts": [{"subject": "user", "predicate": "works_at", "object": "Alder Factual"},
                                                    {"subject": "user", "predicate": "member_of", "object": "Alder E"}],
                                          "apply": True}, now=NOW, user_id=ben, tenant_name="t")
    fact_at, = {r[0] for r in db.execute("SELECT recorded_at FROM facts WHERE status = 'active'")}
    fact_entities = {i for r in db.execute("SELECT subject_entity_id, object_entity_id FROM facts") for i in r if i}
    spec = verbs.VERBS["remember"]
    written: list[tuple[int, int, int, str | None, list[str], int]] = []  # (tenant, entry, author, team, names, when)
    writers = [(solo, users.first_user(db, solo))] * 50 + [(shared, u) for u in (first, ann, ann, ben, ben, cat)] * 30
    for n, (tid, user) in enumerate(writers):
        named = rng.sample(pool[:4] if rng.random() < 0.3 else pool, rng.randint(1, 3))  # ties, and skew
        team = {first: "core", ann: rng.choice(["core", "old", None]), ben: rng.choice(["core", "old", None])}.get(
            user) if tid == shared else None
        args = [{"name": name, "type": typed[name]} if name in typed else name for name in named]
        params = msgspec.convert(dict(type="project", title=f"List note {n}", content=f"list note {n}",
                                      entities=args, team=team), spec.params)
        entry = execute(db, tid, "remember", params, now=NOW + n, user_id=user, tenant_name="t").id
        if rng.random() < 0.15:  # a forgotten entry still counts: mentions are of entries ever seen
            execute(db, tid, "forget", {"id": entry}, now=NOW + n, user_id=user, tenant_name="t")
        written.append((tid, entry, user, team, named, NOW + n))
    secret = execute(db, shared, "remember",  # an entity only ann's private note names
                     dict(type="project", title="Secret", content="secret note", entities=["Alder Secret"]),
                     now=NOW + 500, user_id=ann, tenant_name="t")
    written.append((shared, secret.id, ann, None, ["Alder Secret"], NOW + 500))
    with db:
        for tid, user in ((solo, None), (shared, first)):
            core.merge(db, users.viewer(db, tid, user or users.first_user(db, tid), "t"), "Birch A", "Cedar Z",
                       now=NOW + 600)
        users.leave(db, old_team, ben, now=NOW + 1000)

    def sees(user: int | None, author: int, team: str | None) -> bool:
        if user is None or author == user:
            return True
        return team == "core" and user in (first, ann, ben) or team == "old" and user == ann

    plans = set()
    for tid, user in ((solo, None), (shared, first), (shared, ann), (shared, ben), (shared, cat)):
        v = Context(db, tid, "t", NOW + 2000, user_id=user).viewer
        plans.add((user in (ann, cat), visibility.sees_most(db, v)))
        mentions: dict[int, int] = {}
        times: dict[int, list[int]] = {}
        spelled: dict[int, set[str]] = {}  # names the viewer saw an entry write
        for wtid, entry, author, team, named, when in written:
            if wtid == tid and sees(user, author, team):
                for (entity,) in db.execute("SELECT entity_id FROM entry_entities WHERE entry_id = ?", (entry,)):
                    mentions[entity] = mentions.get(entity, 0) + 1
                    times.setdefault(entity, []).append(when)
                    spelled.setdefault(entity, set()).update(named)
        if user == ben:
            for entity in fact_entities:
                mentions.setdefault(entity, 0)
                times.setdefault(entity, []).append(fact_at)
        rows = {r[0]: r[1:] for r in db.execute(
            "SELECT id, name, type, created_at, updated_at, merged_into FROM entities WHERE tenant_id = ?", (tid,))}
        expected = []
        for entity in sorted(mentions, key=lambda i: (-mentions[i], i)):
            name, etype, created, updated, merged = rows[entity]
            assert merged is None
            aliases = [a for (a,) in db.execute("SELECT name FROM entity_names WHERE entity_id = ? AND is_alias != 0 "
                                                "ORDER BY id", (entity,))]
            if user is not None:  # the row's times and every alias are the whole tenant's; a user's are what they saw
                # (never before the row: an entry naming Cedar Z may be older than Birch A)
                created, updated = max(created, min(times[entity])), max(created, max(times[entity]))
                aliases = [a for a in aliases if a in spelled.get(entity, ())]
            expected.append((name, etype, mentions[entity], format_time(created), format_time(updated), aliases))
        names = [e[0] for e in expected]
        assert "Cedar Z" not in names and "Birch A" in names
        assert ("Alder Secret" in names) == (user == ann)
        assert ("Alder Factual" in names) == (user == ben)
        if user == ben:
            assert expected[names.index("Alder E")][3] == format_time(fact_at) < format_time(NOW + 50)
        for query, etype in (("", None), ("alder", None), ("ALDER f", None), ("ced", None), ("", "person"),
                             ("b", "person"), ("alder", "person")):
            want = [e for e in expected if (etype is None or e[1] == etype)
                    and any(n.lower().startswith(query.lower()) for n in (e[0], *e[5]))]
            if query == "ced":  # through the merged-away name, to who saw an entry write it
                assert [e[0] for e in want] == (["Birch A"] if "Cedar Z" in expected[names.index("Birch A")][5] else [])
            for limit in range(1, len(want) + 2):
                with db:
                    listed = core.list_entities(db, v, query=query, type=etype, limit=limit)
                assert [(e.name, e.type, e.mentions, e.created_at, e.updated_at, e.aliases) for e in listed] == \
                    want[:limit], (user, query, etype, limit)
    assert {(True, True), (True, False)} <= plans  # ann sees most of the tenant, cat little: both of the list's plans


def test_the_whole_tenant_columns_refuse_a_viewer_of_part_of_it_even_under_python_O(db):
    # Dating an entity by the row's own times would tell a partial viewer when another user wrote about it.
    from arbiter.store.users import Viewer

    part = Viewer(tenant_id=1, user_id=2, user_name="ann", scopes=(5,))
    with pytest.raises(RuntimeError):
        core._columns(db, part)
    assert "x.created_at" in core._columns(db, Viewer(tenant_id=1, user_id=2, user_name="ann", solo=True))
