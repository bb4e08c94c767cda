"""arbiter.entities on a real SQLite file: extraction, name forms, resolution, links, merge, rename, relate."""

from __future__ import annotations

import re

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from arbiter import duplicates, entities
from arbiter._time import US
from arbiter import derive
from arbiter.entities import core, names
from arbiter.entities.extract import TERMS, Found, capitalised, extract
from arbiter.entities.model import ENTITY_RELATIONS, ENTITY_TYPES
from arbiter.errors import Conflict, InvalidParams, NotFound
from arbiter.model import RememberManyParams, RememberParams
from arbiter.store import engine, tenants, users
from arbiter.store.db import MIGRATIONS
from tests.unit.conftest import execute

NOW = 1795168800 * US

pytestmark = pytest.mark.both_engines


def run(db, tenant, verb: str, **params):
    return execute(db, tenant, verb, params, now=NOW)


def remember(db, tenant, content: str, title: str = "Note", **kw):
    return run(db, tenant, "remember", type="project", title=title, content=content, **kw)


# ---- extraction ------------------------------------------------------------------


def test_the_registries_match_the_database_checks(db):
    def allowed(table: str, column: str) -> list[str]:
        if engine.is_postgresql(db):  # CHECK ((type = ANY (ARRAY['person'::text, ...])))
            sql = next(d for (d,) in db.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = CAST(? AS regclass) "
                "AND contype = 'c'", (table,)) if f"({column} = ANY" in d)
            return re.findall(r"'(\w+)'", sql)
        sql = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        return re.findall(r"'(\w+)'", re.search(rf"CHECK \({column} IN \((.*?)\)\)", sql).group(1))

    assert allowed("entities", "type") == list(ENTITY_TYPES)
    assert allowed("entity_relations", "relation") == list(ENTITY_RELATIONS)


def test_the_dictionary_holds_200_terms():
    assert len({canonical for canonical, _ in TERMS.values()}) >= 200


@pytest.mark.parametrize("text, expected", [
    ("We moved the API to postgres on AWS", [("PostgreSQL", "tool"), ("AWS", "tool")]),  # "API": a common noun
    ("The MemoryGraph server uses SQLite.", [("MemoryGraph", "other"), ("SQLite", "tool")]),
    ("see https://example.com/a/b. and src/app/main.py", [("https://example.com/a/b", "other"),
                                                          ("src/app/main.py", "other")]),
    ("ask @bob_k about it, not bob@example.com", [("@bob_k", "person")]),
    ("Yesterday Alice Smith met the Bank of England.", [("Alice Smith", "other"), ("Bank of England", "organisation")]),
    ('I read "Designing Data Intensive Applications" twice', [("Designing Data Intensive Applications", "other")]),
    ("and/or 1/2 OK TODO: nothing here", []),
    ("I love to go to the park in my rust bucket", []),
    ("We met on Tue Nov 24 to plan, and again Monday March 3.", []),
    ("Date:   Tue Nov 24 00:19:31 2026 +0000", []),
    ("April Smith marched in the May Day Parade", [("April Smith", "other"), ("May Day Parade", "other")]),
])
def test_extraction_finds_names_in_order(text, expected):
    assert [(f.name, f.type) for f in extract(text)] == expected


@pytest.mark.parametrize("text, expected", [
    ("Met Lee Chen about hiring", [("Lee Chen", "other")]),
    ("Invited Helena Duarte and Zoë Lindqvist to Université de Montréal",
     [("Helena Duarte", "other"), ("Zoë Lindqvist", "other"), ("Université de Montréal", "organisation")]),
    ("Dentist with Dr. Patel, then Prof. Hiroshi Nakamura", [("Patel", "person"), ("Hiroshi Nakamura", "person")]),
    ("Store it as ISO 8601 in UTC; the LLM judge, a TTL of 60s, the CLI, JSON over HTTP, a 99.9% SLA", []),
    ("piped jq into psql, then kubectl and uv", [("jq", "tool"), ("PostgreSQL", "tool"), ("kubectl", "tool"),
                                                ("uv", "tool")]),
    ("a quote from Okafor & Sons, ex-Shopify, at UC Berkeley",
     [("Okafor & Sons", "organisation"), ("Shopify", "organisation"), ("UC Berkeley", "other")]),
    ("Weekly Sync With Rosa Jiménez", []),  # a Title Case heading's capitals say nothing
    ("Weekly sync with Rosa Jiménez", [("Rosa Jiménez", "other")]),
])
def test_extraction_of_names_agents_write(text, expected):
    assert [(f.name, f.type) for f in extract(text)] == expected


@pytest.mark.parametrize("text, expected", [
    ("we asked Dana, and Apollo's cutover slipped", [("Dana", "candidate"), ("Apollo", "candidate")]),
    ("Dana fixed it. Falcon is next", [("Dana", "initial"), ("Falcon", "initial")]),
    ("Nairobi trip: flying to Nairobi", [("Nairobi", "candidate")]),  # a mid-sentence use wins
    ("the VP Operations and SOC 2 Type II in Spanish, on Monday, Jun 4, and Jun took it",
     [("VP", "known"), ("Operations", "known"), ("Type", "known"), ("Spanish", "known"),
      ("Monday", "known"), ("Jun", "candidate")]),
    ("Diane Roy is the CFO. Diane asked for a discount", [("Diane", "candidate")]),
])
def test_single_capitalised_words_are_weighed_by_where_they_stand(text, expected):
    assert capitalised(text, extract(text)) == expected


@pytest.mark.parametrize("title", [
    "DB choice", "PR merged after QA sign-off", "UI rework for the ID page", "OS upgrade", "HR asked for the CV",
])
def test_a_pair_of_capitals_makes_no_entity_it_is_an_abbreviated_noun(title):
    assert extract(f"{title}\nWe picked Postgres") == [Found("PostgreSQL", "tool")]


def test_a_pair_of_capitals_links_an_entity_that_exists_and_longer_acronyms_still_count(db, tenant):
    first = remember(db, tenant, "We picked Postgres", title="DB choice")
    assert [m.name for m in first.entities] == ["PostgreSQL"] and entities.lookup(db, tenant, "DB") is None
    named = remember(db, tenant, "the reporting database", entities=["DB"])  # someone names it: now it is one
    later = remember(db, tenant, "migrated the DB on AWS with NASA")
    assert _how(db, later.id) == [("AWS", "tool", "extracted"), ("DB", "other", "extracted"),
                                  ("NASA", "other", "extracted")]
    assert named.entities[0].name == "DB"


def test_extraction_is_deterministic_and_dedupes_by_case():
    text = "Kubernetes and k8s and KUBERNETES"
    assert extract(text) == extract(text)
    assert [f.name for f in extract(text)] == ["Kubernetes"]


# ---- name forms ------------------------------------------------------------------


@pytest.mark.parametrize("a, b", [
    ("Acme, Inc.", "ACME"), ("Café Zürich", "cafe zurich"), ("APIs", "API"), ("The Libraries", "library"),
])
def test_normalised_forms_meet(a, b):
    assert names.norm(a) == names.norm(b)


def test_normalisation_keeps_what_tells_names_apart():
    assert names.norm("C++") != names.norm("C") != names.norm("C#")
    assert names.norm("AWS") == "aws" and names.norm("class") == "class"


def test_trigram_similarity():
    grams = lambda s: names.trigrams(names.norm(s))  # noqa: E731
    assert names.similarity(grams("Kubernetes"), grams("Kubernetes")) == 1.0
    assert names.similarity(grams("Quarterly planning meeting"), grams("Quarterly planing meeting")) >= core.SAME
    assert core.MAYBE <= names.similarity(grams("Project Apollo"), grams("Project Apollonia")) < core.SAME
    assert names.similarity(grams("Postgres"), grams("Redis")) < core.MAYBE


NAME_PIECES = st.lists(st.sampled_from([*"abcé ßİ東xyz-.", "ab", "  ", "Inc", "s "]), max_size=20).map("".join)


@settings(max_examples=500, deadline=None)
@given(a=NAME_PIECES, b=NAME_PIECES)
def test_similarity_to_a_form_equals_the_set_jaccard(a, b):
    mine, form = names.trigrams(names.norm(a)), names.norm(b)
    theirs = names.trigrams(form)
    assert names.similarity_to(mine, form, len(theirs)) == names.similarity(mine, theirs)


# ---- resolution ------------------------------------------------------------------


def resolve(db, tenant, name, **kw):
    with db:
        return entities.resolve(db, tenant, name, now=NOW, **kw)


def test_resolution_steps_in_order(db, tenant):
    first = resolve(db, tenant, "International Business Machines Corporation", type="organisation")
    assert first.created and first.matched == "new"
    same = core.Resolution(first.entity_id, False, (), "exact")
    assert resolve(db, tenant, "international business machines corporation") == same
    assert resolve(db, tenant, "International Business Machines, Inc.").matched == "norm"
    assert resolve(db, tenant, "International Busines Machines").matched == "similar"
    # the near spelling became an alias: now it is an exact alias hit
    assert resolve(db, tenant, "international busines machines").matched == "alias"


def test_a_near_but_unsure_name_is_new_with_a_candidate(db, tenant):
    known = resolve(db, tenant, "Project Apollo")
    near = resolve(db, tenant, "Project Apollonia")
    assert near.created and near.possibly_same_as == (known.entity_id,)
    assert not resolve(db, tenant, "Zebra").possibly_same_as


def test_resolution_is_per_tenant(db, tenant):
    with db:
        other, _ = tenants.create_tenant(db, "mallory", now=NOW)
    a = resolve(db, tenant, "Apollo")
    b = resolve(db, other, "Apollo")
    assert b.created and b.entity_id != a.entity_id
    assert entities.lookup(db, other, "Apollo")[0] == b.entity_id


def test_a_given_type_refines_other_but_never_overrides(db, tenant):
    r = resolve(db, tenant, "Alice Smith")
    resolve(db, tenant, "Alice Smith", type="person")
    resolve(db, tenant, "Alice Smith", type="tool")
    assert core.get(db, users.first_viewer(db, tenant), r.entity_id).type == "person"
    kinds = [k for (k,) in db.execute("SELECT kind FROM entity_events WHERE entity_id = ?", (r.entity_id,))]
    assert kinds == ["retype"]


# ---- remember ----------------------------------------------------------------------


def test_remember_links_given_and_extracted_entities(db, tenant):
    r = remember(db, tenant, "We chose PostgreSQL over MySQL.", entities=["Apollo", {"name": "Alice", "type": "person"}])
    assert [(m.name, m.type, m.created) for m in r.entities] == [
        ("Apollo", "other", True), ("Alice", "person", True), ("PostgreSQL", "tool", True), ("MySQL", "tool", True),
    ]
    again = remember(db, tenant, "Postgres is slow today", entities=["apollo"])
    assert [(m.name, m.created) for m in again.entities] == [("Apollo", False), ("PostgreSQL", False)]
    pg = entities.lookup(db, tenant, "postgres")[0]
    assert entities.entries_mentioning(db, tenant, pg) == [again.id, r.id]
    assert [e.name for e in entities.mentions(db, tenant, again.id)] == ["Apollo", "PostgreSQL"]


def test_remember_many_links_given_names_now_and_extracts_after(db, tenant):
    items = [{"type": "project", "title": f"n{i}", "content": f"Deploy to Kubernetes, step {i}", "entities": ["Apollo"]}
             for i in range(3)]
    ids = run(db, tenant, "remember_many", entries=items).ids
    apollo = entities.lookup(db, tenant, "Apollo")[0]
    assert entities.entries_mentioning(db, tenant, apollo) == ids[::-1]
    assert entities.lookup(db, tenant, "k8s") is None and derive.pending(db, tenant, names=("entities",)) == 3
    with db:
        derive.drain(db, now=NOW)
    k8s = entities.lookup(db, tenant, "k8s")[0]
    assert entities.entries_mentioning(db, tenant, k8s) == ids[::-1]
    assert duplicates.duplicate_of(db, users.first_viewer(db, tenant), "project", "N0", "deploy to kubernetes, step 0") == ids[0]


def _how(db, entry_id: int) -> list[tuple[str, str, str]]:
    return db.execute(
        "SELECT e.name, e.type, l.how FROM entry_entities l JOIN entities e ON e.id = l.entity_id "
        "WHERE l.entry_id = ? ORDER BY e.name", (entry_id,),
    ).fetchall()


def test_a_named_speaker_is_a_person_linked_as_speaker(db, tenant):
    r = remember(db, tenant, "I adopted a cat and use Redis at work", speaker="Caroline")
    assert [(m.name, m.type, m.created) for m in r.entities] == [("Caroline", "person", True), ("Redis", "tool", True)]
    assert _how(db, r.id) == [("Caroline", "person", "speaker"), ("Redis", "tool", "extracted")]
    # The same person again, her name also in the text: one link, as speaker; an entity typed only
    # 'other' by extraction becomes a person.
    remember(db, tenant, "Yesterday Bob Stone called")
    again = remember(db, tenant, "Talked with Caroline about Bob Stone", speaker="bob stone")
    assert _how(db, again.id) == [("Bob Stone", "person", "speaker"), ("Caroline", "person", "extracted")]


@pytest.mark.parametrize("role", ["user", "Assistant", "  system "])
def test_a_role_is_no_entity(db, tenant, role):
    r = remember(db, tenant, "hello there", speaker=role)
    assert r.entities == [] and _how(db, r.id) == []


def test_remember_many_links_a_speaker_before_acknowledging(db, tenant):
    items = [{"type": "project", "title": f"t{i}", "content": "we talked", "speaker": who}
             for i, who in enumerate(["Melanie", "user", "Melanie"])]
    ids = run(db, tenant, "remember_many", entries=items).ids
    melanie = entities.lookup(db, tenant, "melanie")[0]
    assert entities.entries_mentioning(db, tenant, melanie) == [ids[2], ids[0]]
    assert _how(db, ids[0]) == [("Melanie", "person", "speaker")]


def test_an_entry_purged_while_queued_leaves_the_queue(db, tenant):
    (entry_id,) = run(db, tenant, "remember_many", entries=[{"type": "project", "title": "t", "content": "Redis"}]).ids
    run(db, tenant, "purge", id=entry_id)
    assert derive.pending(db, tenant) == 0  # the delete trigger took its rows
    with db:
        derive.drain(db, now=NOW)
    assert entities.lookup(db, tenant, "Redis") is None


def test_update_links_what_the_new_text_mentions(db, tenant):
    r = remember(db, tenant, "nothing much")
    run(db, tenant, "update", id=r.id, content="now about Redis")
    assert [e.name for e in entities.mentions(db, tenant, r.id)] == ["Redis"]


def test_a_corrected_speaker_links_the_right_person(db, tenant):
    r = remember(db, tenant, "the support group was powerful", speaker="Melanie")
    run(db, tenant, "update", id=r.id, speaker="Caroline")
    assert _how(db, r.id) == [("Caroline", "person", "speaker")]
    run(db, tenant, "update", id=r.id, speaker="user")  # a role: no one is linked as speaker
    assert _how(db, r.id) == []


def test_retired_and_purged_entries_leave_the_mention_lists(db, tenant):
    a = remember(db, tenant, "Redis one")
    b = remember(db, tenant, "Redis two")
    redis = entities.lookup(db, tenant, "Redis")[0]
    run(db, tenant, "forget", id=a.id)
    run(db, tenant, "purge", id=b.id)
    assert entities.entries_mentioning(db, tenant, redis) == []
    assert db.execute("SELECT count(*) FROM entry_entities WHERE entry_id = ?", (b.id,)).fetchone()[0] == 0


@pytest.mark.parametrize("bad", ["", " padded", "x" * 129, "tab\there", {"name": "Apollo", "type": "planet"}])
def test_bad_entity_names_are_refused(bad):
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"type": "project", "title": "t", "content": "c", "entities": [bad]}, RememberParams)


def test_remember_many_checks_entities_too():
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"entries": [{"type": "project", "title": "t", "content": "c", "entities": [""]}]},
                        RememberManyParams)


# ---- merge, rename, relate ----------------------------------------------------------


def test_merge_folds_names_links_and_relations_and_records_it(db, tenant):
    a = remember(db, tenant, "about Postgres", entities=["Postgres DB"])
    remember(db, tenant, "also", entities=["Apollo"])
    run(db, tenant, "entity_relate", source="Postgres DB", relation="part_of", target="Apollo")
    run(db, tenant, "entity_relate", source="PostgreSQL", relation="part_of", target="Apollo", weight=2)
    kept = run(db, tenant, "entity_merge", keep="PostgreSQL", other="Postgres DB")
    assert kept.name == "PostgreSQL" and kept.aliases == ["Postgres DB"]
    assert entities.lookup(db, tenant, "postgres db") == (kept.id, "alias")
    assert [e.name for e in entities.mentions(db, tenant, a.id)] == ["PostgreSQL"]
    shown = run(db, tenant, "entity_show", name="PostgreSQL")
    assert [(r.relation, r.target.name, r.weight) for r in shown.relations] == [("part_of", "Apollo", 3.0)]
    merged = db.execute("SELECT merged_into, retired_at FROM entities WHERE name = 'Postgres DB'").fetchone()
    assert merged == (kept.id, NOW)
    (detail,) = db.execute("SELECT detail FROM entity_events WHERE kind = 'merge'").fetchone()
    assert msgspec.json.decode(detail)["entries"] == [a.id]
    assert [e.name for e in run(db, tenant, "entities").entities] == ["PostgreSQL", "Apollo"]


def test_a_relation_between_the_two_merged_entities_goes_with_the_merge(db, tenant):
    remember(db, tenant, "x", entities=["Postgres DB", "PostgreSQL", "Apollo"])
    run(db, tenant, "entity_relate", source="Postgres DB", relation="part_of", target="PostgreSQL")
    run(db, tenant, "entity_relate", source="Postgres DB", relation="part_of", target="Apollo")
    run(db, tenant, "entity_merge", keep="PostgreSQL", other="Postgres DB")
    shown = run(db, tenant, "entity_show", name="PostgreSQL")
    assert [(r.relation, r.target.name) for r in shown.relations] == [("part_of", "Apollo")]  # never to itself


def test_merge_refusals_change_nothing(db, tenant):
    remember(db, tenant, "x", entities=["Apollo"])
    with pytest.raises(InvalidParams) as e:
        run(db, tenant, "entity_merge", keep="Apollo", other="apollo")
    assert e.value.path == "other"
    with pytest.raises(NotFound):
        run(db, tenant, "entity_merge", keep="Apollo", other="Nobody")
    assert db.execute("SELECT count(*) FROM entity_events").fetchone()[0] == 0


def test_rename_keeps_the_old_name_as_an_alias(db, tenant):
    remember(db, tenant, "x", entities=["Project X", "Other"])
    e = run(db, tenant, "entity_rename", name="Project X", new_name="Apollo")
    assert (e.name, e.aliases) == ("Apollo", ["Project X"])
    assert entities.lookup(db, tenant, "project x") == (e.id, "alias")
    back = run(db, tenant, "entity_rename", name="Apollo", new_name="project x")
    assert (back.name, back.aliases) == ("project x", ["Apollo"])
    with pytest.raises(Conflict) as err:
        run(db, tenant, "entity_rename", name="Apollo", new_name="other")
    assert err.value.existing_id == entities.lookup(db, tenant, "Other")[0]


def test_relate_strengthens_and_refuses_bad_input(db, tenant):
    remember(db, tenant, "x", entities=["Alice", "Apollo"])
    first = run(db, tenant, "entity_relate", source="Alice", relation="works_on", target="Apollo")
    again = run(db, tenant, "entity_relate", source="alice", relation="works_on", target="apollo", weight=0.5)
    assert (again.id, again.weight) == (first.id, 1.5)
    with pytest.raises(InvalidParams):
        run(db, tenant, "entity_relate", source="Alice", relation="works_on", target="Alice")
    with pytest.raises(NotFound):
        run(db, tenant, "entity_relate", source="Alice", relation="works_on", target="Nobody")
    with pytest.raises(msgspec.ValidationError):
        run(db, tenant, "entity_relate", source="Alice", relation="loves", target="Apollo")


def test_entities_lists_by_prefix_and_type(db, tenant):
    remember(db, tenant, "Redis and Redshift and React", entities=[{"name": "Reed", "type": "person"}])
    assert [e.name for e in run(db, tenant, "entities", query="red").entities] == ["Redis", "Redshift"]
    assert [e.name for e in run(db, tenant, "entities", type="person").entities] == ["Reed"]


def test_another_tenants_entities_are_missing(db, tenant):
    remember(db, tenant, "x", entities=["Apollo"])
    with db:
        other, _ = tenants.create_tenant(db, "mallory", now=NOW)
    with pytest.raises(NotFound):
        run(db, other, "entity_show", name="Apollo")
    assert run(db, other, "entities").entities == []


def test_a_word_capitalised_mid_sentence_is_a_name_unless_the_tenant_writes_it_in_lower_case(db, tenant):
    assert [(m.name, m.created) for m in remember(db, tenant, "we deploy Zephyr today").entities] == [("Zephyr", True)]
    remember(db, tenant, "growth was slow this month")
    remember(db, tenant, "the growth team met")
    assert remember(db, tenant, "they are on the Growth plan").entities == []


def test_a_sentence_initial_word_links_a_known_entity_and_makes_one_only_on_evidence(db, tenant):
    assert remember(db, tenant, "Zephyr is down.").entities == []  # grammar explains the capital
    remember(db, tenant, "x", entities=["Zephyr"])
    later = remember(db, tenant, "Zephyr again. Zephyr and more")
    assert [(m.name, m.created) for m in later.entities] == [("Zephyr", False)]


def test_a_name_found_later_links_the_entries_that_wrote_it_before(db, tenant):
    first = remember(db, tenant, "Dana fixed the flaky test.")
    second = remember(db, tenant, "Budget is tight. Dana reviewed the plan.")
    assert first.entities == second.entities == []  # only at a sentence's start, in two notes
    third = remember(db, tenant, "Paired with Dana on the retry code.")
    assert [(m.name, m.created) for m in third.entities] == [("Dana", True)]
    dana = entities.lookup(db, tenant, "Dana")[0]
    with db:
        assert entities.entries_mentioning(db, tenant, dana) == [third.id, second.id, first.id]
    assert entities.lookup(db, tenant, "Budget") is None


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(["Dana", "dana", "danas", "daned", "a", "A", "-", "'", "’", "_", " ", ".", "1", "é"]),
               max_size=12).map("".join),
       st.sampled_from(["Dana", "D", "Da-na", "O'Dana", "Dana."]))
def test_evidence_finds_a_word_where_its_definition_as_a_pattern_does(text, word):
    """The evidence scans for a word without compiling a pattern for it; it finds what the pattern would."""
    from arbiter.entities.evidence import _INFLECTIONS, _spots

    capital = re.compile(rf"(?<![\w'’-]){re.escape(word)}(?![\w-])")
    lower = re.compile(rf"(?<![\w'’-]){re.escape(word.lower())}(?:s|es|d|ed|ing)?(?![\w-])")
    assert _spots(text, word, ("",)) == [m.start() for m in capital.finditer(text)]
    assert _spots(text, word.lower(), _INFLECTIONS, first=True) == [m.start() for m in lower.finditer(text)][:1]


def test_evidence_is_what_the_writer_sees(db, tenant):
    """Another user's private notes neither make a name of a word for the writer nor get linked by their note."""
    with db:
        ann, ben = (users.create_user(db, tenant, name, now=NOW)[0] for name in ("ann", "ben"))

    def write(user, content):
        return execute(db, tenant, "remember", dict(type="project", title="Note", content=content), now=NOW, user_id=user)

    hidden = [write(ann, "Quillon shipped."), write(ann, "Quillon again.")]
    assert write(ben, "Quillon is late.").entities == []  # ann's two starts are not ben's evidence
    mine = write(ben, "we wait for Quillon")
    assert [m.name for m in mine.entities] == ["Quillon"]
    quillon = entities.lookup(db, tenant, "Quillon")[0]
    with db:
        linked = set(entities.entries_mentioning(db, tenant, quillon))
    assert not linked & {h.id for h in hidden}


@pytest.mark.sqlite_only("a step of the SQLite file's history (PostgreSQL starts at today's schema)")
def test_m026_gives_a_link_made_before_m025_the_alias_its_entry_writes(db, tenant):
    ltd = remember(db, tenant, "Alice on tessaline ltd, privately.", title="T1", entities=["Tessaline Ltd"])
    group = remember(db, tenant, "Alice on Tessaline Group.", title="T2", entities=["Tessaline Group"])
    other = remember(db, tenant, "Nothing by that name here.", title="T3", entities=["Tessaline Ltd"])
    run(db, tenant, "entity_merge", keep="Tessaline Group", other="Tessaline Ltd")
    with db:
        db.execute("UPDATE entry_entities SET name_id = NULL")  # as m025 left every older link
        db.execute(dict(MIGRATIONS)["m026_entry_entities_name_backfill"])
    names = dict(db.execute("SELECT l.entry_id, n.name FROM entry_entities l "
                            "LEFT JOIN entity_names n ON n.id = l.name_id WHERE l.entry_id IN (?, ?, ?)",
                            (ltd.id, group.id, other.id)))
    # The alias its text writes (any case); the display name needs none; a text without the alias gets none.
    assert names == {ltd.id: "Tessaline Ltd", group.id: None, other.id: None}


# ---- the quality bench's scorer (bench/entities_quality.py) -----------------------


SAMPLE = """% a comment
### Call with {Zoë|person|Zoë Lindqvist}
{Zoë Lindqvist|person} met {Dr. Patel|person} at {Acme|organisation}. {Acme|organisation} again; UTC.
### Nothing here
It rained.
"""


def test_the_scorer_parses_marks_and_counts_a_name_once_per_note():
    from bench.entities_quality import Gold, parse
    first, second = parse(SAMPLE)
    assert first.title == "Call with Zoë" and first.content == "Zoë Lindqvist met Dr. Patel at Acme. Acme again; UTC."
    assert first.gold == [Gold("Zoë", "person", "Zoë Lindqvist"), Gold("Zoë Lindqvist", "person"),
                          Gold("Dr. Patel", "person"), Gold("Acme", "organisation")]
    assert (second.content, second.gold) == ("It rained.", [])
    with pytest.raises(ValueError):
        parse("### t\n{broken|person\n")


def test_the_scorer_counts_found_wrong_and_typed():
    from bench.entities_quality import Linked, parse, score
    notes = parse(SAMPLE)
    linked = [[Linked("Zoe Lindqvist", "person"), Linked("Patel", "other", ("Dr Patel",)), Linked("UTC", "other")],
              [Linked("Rain", "other")]]
    s = score(notes, linked)
    # Zoë and Zoë Lindqvist are both found by one entity (any case and diacritics); Patel without the honorific;
    # Acme is missed; UTC and Rain are wrong.
    assert s.result()["precision"] == 0.5 and s.result()["recall"] == 0.75
    assert (s.overall.linked, s.overall.right, s.overall.gold, s.overall.found) == (4, 2, 4, 3)
    assert {t: (x.linked, x.right, x.gold, x.found, x.named) for t, x in s.by_type.items()} == {
        "person": (1, 1, 3, 2, 3), "organisation": (0, 0, 1, 0, 0), "other": (3, 0, 0, 0, 0)}
    assert s.misses == [(0, "Acme (organisation)")] and s.wrong == [(0, "UTC (other)"), (1, "Rain (other)")]


@pytest.mark.parametrize("name", ["entities_notes.txt", "entities_heldout.txt"])
def test_the_labelled_sets_parse(name):
    from pathlib import Path

    from bench.entities_quality import parse
    notes = parse((Path(__file__).parents[2] / "bench" / name).read_text(encoding="utf-8"))
    assert notes and all(n.title and n.content for n in notes)


# ---- clusters --------------------------------------------------------------------


def _co_mentions(db, tenant, groups: list[list[str]]) -> dict[str, int]:
    """An entry per group naming each of its names (linked as given); the entity id of every name."""
    from arbiter.store import entries

    with db:
        v = users.first_viewer(db, tenant)
        linker = core.Linker(db, tenant, NOW)
        for names_ in groups:
            eid = entries.remember(db, v, RememberParams(type="project", title="t", content="x"), now=NOW)
            linker.link(eid, [(n, None, "given") for n in names_])
        return {n: entities.lookup(db, tenant, n)[0] for g in groups for n in g}


def test_entity_clusters_are_the_co_mentioned_groups(db, tenant):
    from arbiter.entities import clusters

    ids = _co_mentions(db, tenant, [["Alder", "Birch", "Cedar"]] * 2 + [["Dune", "Elm"], ["Elm", "Fir"], ["Fir", "Dune"]])
    with db:
        assert clusters.refresh(db, tenant) == 2
        got = clusters.cluster_of(db, users.first_viewer(db, tenant), ids["Birch"])
    assert got.id == min(ids[n] for n in ("Alder", "Birch", "Cedar"))
    assert {e.name for e in got.entities} == {"Alder", "Birch", "Cedar"}


def test_the_same_entity_graph_clusters_the_same_on_both_engines(sqlite_db, pg_url):
    """Louvain depends on the order its edges come in: both engines give them in one order."""
    import random

    from arbiter.entities import clusters
    from arbiter.store import open_database

    rng = random.Random(7)
    print("seed 7")
    names_ = [f"Node {chr(65 + i // 26)}{chr(65 + i % 26)}" for i in range(60)]
    groups = [rng.sample(names_, rng.randint(2, 4)) for _ in range(150)]
    found = []
    pg = open_database(pg_url)
    try:
        for conn in (sqlite_db, pg):
            with conn:
                tenant = tenants.create_tenant(conn, "alice", now=NOW)[0]
            ids = _co_mentions(conn, tenant, groups)
            name_of = {i: n for n, i in ids.items()}
            if conn is pg:  # PostgreSQL groups by hashing where sorting costs more: make it, at this small size
                conn.execute("SET enable_sort = off")
            with conn:
                clusters.refresh(conn, tenant)
                found.append(sorted(sorted(name_of[e] for (e,) in conn.execute(
                    "SELECT entity_id FROM entity_clusters WHERE cluster = ?", (c,)))
                    for (c,) in conn.execute("SELECT DISTINCT cluster FROM entity_clusters")))
    finally:
        pg.close()
    assert len(found[0]) > 2 and found[0] == found[1]


def test_daemons_meeting_one_new_name_at_once_make_one_entity(pg_url):
    """Two writers of one PostgreSQL database resolve a name neither has seen: the second waits for the first's
    transaction and finds its entity (without the wait it failed on the names' unique key)."""
    import threading

    from arbiter.store import open_database
    from tests.conftest import wait_for
    from tests.unit.test_facts import waits_on_lock

    first, second = open_database(pg_url), open_database(pg_url)
    try:
        with first:
            tenant = tenants.create_tenant(first, "alice", now=NOW)[0]
        pid = second.execute("SELECT pg_backend_pid()").fetchone()[0]
        got: list = []

        def resolve_second():
            try:
                with second:
                    got.append(core.resolve(second, tenant, "Quasar Labs", now=NOW))
            except Exception as e:  # the test's thread hands its failure to the test
                got.append(e)

        with first:
            mine = core.resolve(first, tenant, "Quasar Labs", now=NOW)
            other = threading.Thread(target=resolve_second)
            other.start()
            wait_for(lambda: waits_on_lock(pg_url, pid) or got, what="the second writer to wait")
        other.join(10)
        assert mine.created and got == [core.Resolution(mine.entity_id, False, (), "exact")]
        assert first.execute("SELECT count(*) FROM entities WHERE name = 'Quasar Labs'").fetchone()[0] == 1
    finally:
        first.close()
        second.close()
