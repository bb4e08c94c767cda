"""The association graph through the daemon: derived edges, link candidates, graph recall, reads, isolation."""

from __future__ import annotations

import json

import pytest

from arbiter.associations import core
from arbiter.errors import InvalidParams, NotFound
from arbiter.server import IDLE_S
from tests.conftest import DaemonProcess, wait_for
from tests.integration.test_cli import arbiter, js, ok

DAY = "2026-11-0{}T{:02d}:00:00Z"


def kinds(client, entry_id, kind=None):
    return {(a.other_id, a.kind, a.sub_type) for a in client.associations(entry_id, kind=kind).associations}


def test_temporal_backbone_and_proximity(client):
    conv = client.conversation_create("standup").id
    a = client.remember(type="context", title="a", content="alpha", conversation_id=conv, valid_from=DAY.format(1, 9)).id
    b = client.remember(type="context", title="b", content="beta", conversation_id=conv, valid_from=DAY.format(1, 11)).id
    c = client.remember(type="context", title="c", content="gamma", conversation_id=conv, valid_from=DAY.format(1, 12)).id
    far = client.remember(type="context", title="d", content="delta", valid_from=DAY.format(5, 9)).id
    found = client.associations(b, kind="temporal").associations
    backbone = {x.other_id for x in found if x.sub_type == "backbone"}
    assert backbone == {a, c}
    proximity = {x.other_id: x for x in found if x.sub_type == "proximity"}
    assert far not in proximity  # four days away
    assert proximity[a].weight == pytest.approx(1 / 3, abs=1e-3) and proximity[a].evidence == "2.00 hours apart"
    assert proximity[c].weight == pytest.approx(0.5)


def test_entity_associations_carry_the_shared_name(client):
    first = client.remember(type="project", title="db", content="We run PostgreSQL for billing.").id
    second = client.remember(type="project", title="ops", content="Upgrade PostgreSQL next week.").id
    client.remember(type="project", title="ui", content="The dashboard uses plain HTML.")
    found = client.associations(second, kind="entity").associations
    assert [(x.other_id, x.sub_type, x.evidence) for x in found] == [(first, "PostgreSQL", "both mention PostgreSQL")]


LONG = ("The billing service retries failed card payments three times with exponential backoff "
        "and then marks the invoice overdue for the finance team")


COUSIN = "Failed card payments get retried by the billing service; finance reviews overdue invoices weekly"


def settled(client, entry_id, *edges):
    """Wait until the idle writer has derived `entry_id`'s similarity edges to each of `edges`.

    Polled slower than the daemon's quiet spell (IDLE_S): every request restarts it.
    """
    want = {(other, "similarity", "auto") for other in edges}
    wait_for(lambda: want <= kinds(client, entry_id, "similarity"),
             what=f"the idle writer to derive #{entry_id}'s similarity edges", interval=2 * IDLE_S)


def test_similar_entries_are_linked_automatically_or_offered_as_candidates(client):
    first = client.remember(type="reference", title="Billing retries", content=LONG).id
    twin = client.remember(type="reference", title="Billing retries", content=LONG + " to review").id
    settled(client, twin, first)
    assert (twin, "similarity", "auto") in kinds(client, first)  # undirected
    cousin = client.remember(type="reference", title="Card payments", content=COUSIN, candidates=True)
    similar = [c for c in cousin.candidates if c.kind == "similar"]
    assert similar and {c.target_id for c in similar} <= {first, twin}
    assert all(c.relation == "relates_to" and core.CANDIDATE <= c.score < core.AUTO for c in similar)
    assert not any(a.kind == "similarity" for a in client.associations(cousin.id).associations)


def test_causal_candidates_point_from_cause_to_effect_and_link_confirms(client):
    cause = client.remember(type="context", title="Team skills", content="The team lacks Redis experience in production").id
    effect = client.remember(type="project", title="Storage choice",
                             content="We chose SQLite for the cache because the team lacks Redis experience",
                             candidates=True)
    causal = [c for c in effect.candidates if c.kind == "causal"]
    assert [(c.source_id, c.target_id, c.relation) for c in causal] == [(cause, effect.id, "causes")]
    assert "causal word" in causal[0].reason
    rel = client.link(cause, "causes", effect.id)
    assert rel.relation == "causes"
    assert client.get(cause).valid_to is None  # a causal link retires nothing


def test_without_candidates_the_write_is_the_same_and_its_edges_follow(daemon, client):
    """Candidates are found only when asked; the entry, its entities and its near duplicates are the same either
    way, and the similarity edges the asked write derived inline the idle writer derives moments after the plain one."""
    with daemon.client(daemon.admin_token) as admin:
        token = admin.tenant_create("plain").token
    writes = [("Billing retries", LONG), ("Billing retries", LONG + " to review"), ("Card payments", COUSIN),
              ("Storage choice", "We chose SQLite for the billing service because card payments failed twice")]
    with daemon.client(token) as plain:
        asked = [client.remember(type="reference", title=t, content=c, candidates=True) for t, c in writes]
        quiet = [plain.remember(type="reference", title=t, content=c) for t, c in writes]
        assert [sorted({c.kind for c in r.candidates}) for r in asked] == [[], [], ["similar"], ["causal"]]
        assert all(r.candidates == [] for r in quiet)
        theirs = {a.id: q.id for a, q in zip(asked, quiet)}

        def shown(r, ids):
            return (r.type, r.title, r.content, r.tags, r.duplicate_of, [ids[i] for i in r.similar],
                    [(m.name, m.created) for m in r.entities])

        assert [shown(a, theirs) for a in asked] == [shown(q, {i: i for i in theirs.values()}) for q in quiet]
        edges = {(theirs[a.id], theirs[x.other_id], x.weight) for a in asked
                 for x in client.associations(a.id, kind="similarity").associations}
        assert edges  # the twin restates the first: an edge either way
        wait_for(lambda: {(q.id, x.other_id, x.weight) for q in quiet
                          for x in plain.associations(q.id, kind="similarity").associations} == edges,
                 what="the idle writer to derive the plain writes' similarity edges", interval=2 * IDLE_S)


def test_bulk_writes_get_their_edges_on_the_idle_writer(client):
    ids = client.remember_many([
        {"type": "reference", "title": "Billing retries", "content": LONG},
        {"type": "reference", "title": "Billing retries", "content": LONG + " again"},
    ])
    # Polled slower than the daemon's quiet spell (IDLE_S): every request restarts it.
    wait_for(lambda: any(a.kind == "similarity" for a in client.associations(ids[1]).associations),
             what="the idle writer to derive the batch's similarity edges", interval=2 * IDLE_S)


def test_graph_recall_reaches_the_cause_of_a_why_question(client):
    cause = client.remember(type="context", title="Team skills", content="Nobody here has operated a Redis cluster").id
    effect = client.remember(type="project", title="Storage choice", content="We picked SQLite for the session cache").id
    client.link(cause, "causes", effect)
    plain = client.recall("why did we pick SQLite for the session cache", explain=True)
    assert cause not in [h.id for h in plain.hits]  # no shared word: lexical recall cannot find it
    walked = client.recall("why did we pick SQLite for the session cache", explain=True, graph=True)
    hit = {h.id: h for h in walked.hits}[cause]
    assert hit.parts["graph_seed"] == effect and hit.parts["graph_causal"] == 1.0
    assert [h.id for h in walked.hits][0] == effect  # the lexical best stays first


def test_expand_around_and_density_show_associations(client):
    first = client.remember(type="project", title="db", content="We run PostgreSQL for billing.").id
    second = client.remember(type="project", title="ops", content="Upgrade PostgreSQL next week.").id
    graph = client.expand(second)
    assert {(e.source_id, e.target_id, e.kind) for e in graph.associations} >= {(second, first, "entity")}
    assert first in {n.id for n in graph.nodes}
    around = client.around(second)
    assert (first, "entity") in {(a.other_id, a.kind) for a in around.associations}
    assert client.density(second).associations.get("entity") == 1


def test_associations_never_cross_tenants_and_purge_removes_them(daemon, client):
    with daemon.client(daemon.admin_token) as admin:
        token = admin.tenant_create("other").token
    mine = client.remember(type="reference", title="Billing retries", content=LONG).id
    with daemon.client(token) as other:
        theirs = other.remember(type="reference", title="Billing retries", content=LONG).id
        assert other.associations(theirs).associations == [] or all(
            a.other_id != mine for a in other.associations(theirs).associations)
        with pytest.raises(NotFound):
            other.associations(mine)
    twin = client.remember(type="reference", title="Billing retries", content=LONG + " twice").id
    settled(client, twin, mine)
    assert theirs not in {a.other_id for a in client.associations(twin).associations}
    client.purge(mine)
    assert not any(a.other_id == mine for a in client.associations(twin).associations)


def test_bad_input(client):
    with pytest.raises(NotFound):
        client.associations(999_999)
    e = client.remember(type="project", title="x", content="y").id
    with pytest.raises(InvalidParams):
        client.call("associations", {"id": e, "kind": "telepathic"}, None)
    with pytest.raises(InvalidParams) as refused:  # candidates answer one caller about one entry: not in bulk
        client.remember_many([{"type": "project", "title": "x", "content": "z", "candidates": True}])
    assert "entries[0].candidates" in refused.value.message
    assert client.status().entries_active == 1


def test_cli(daemon, home):
    ok(home, "remember", "--type", "project", "--title", "db", "--content", "We run PostgreSQL for billing.")
    proc = arbiter(home, "remember", "--type", "project", "--title", "ops", "--content",
                   "We moved to PostgreSQL because the old MySQL PostgreSQL billing box failed", "--candidates")
    assert proc.returncode == 0
    assert "candidate: arbiter link 1 causes 2" in proc.stderr
    assert "--candidates" in ok(home, "remember", "--help")
    assert "both mention PostgreSQL" in ok(home, "associations", "2")
    assert js(home, "associations", "2", "--kind", "entity")["associations"][0]["other_id"] == 1
    assert "stored similarity edges" in ok(home, "associations", "--rebuild")
    proc = arbiter(home, "maintain", "--rebuild-associations")
    assert proc.returncode == 0 and "associations: rebuilt" in proc.stderr
    assert "Example" in ok(home, "associations", "--help")


# ---- auto_link: the advisor judges the candidates -------------------------------------------------


@pytest.fixture
def llm(home, fake_messages):
    d = DaemonProcess(home, extra_env={"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_messages.base_url})
    d.start()
    yield d
    d.stop()


CAUSE = ("Team skills", "The team lacks Redis experience in production")
EFFECT = ("Storage choice", "We chose SQLite for the cache because the team lacks Redis experience")


def test_auto_link_makes_the_links_the_advisor_confirms(llm, fake_messages):
    with llm.client() as c:
        cause = c.remember(type="context", title=CAUSE[0], content=CAUSE[1]).id

        def answer(body):
            prompt = body["messages"][0]["content"]
            new = int(prompt.split("NEW:\n[id ")[1].split("]")[0])
            # One confirmed link, one the model invents, one with a relation outside the vocabulary.
            return json.dumps({"links": [{"source": cause, "relation": "causes", "target": new},
                                         {"source": 999, "relation": "causes", "target": new},
                                         {"source": new, "relation": "supersedes", "target": cause}]})

        fake_messages.set_script(answer)
        r = c.remember(type="project", title=EFFECT[0], content=EFFECT[1], auto_link=True)
        assert [(x.source_id, x.relation, x.target_id) for x in r.linked] == [(cause, "causes", r.id)]
        assert r.note == f"auto_link: the advisor linked #{cause} causes #{r.id}"
        (request,) = fake_messages.requests
        prompt = request["messages"][0]["content"]
        assert CAUSE[1] in prompt and "Suggested because: causal:" in prompt and "- causes:" in prompt
        assert "- supersedes" not in prompt  # the advisor never retires anything
        edges = c.expand(r.id).edges
        assert [(e.source_id, e.relation, e.target_id) for e in edges] == [(cause, "causes", r.id)]
        assert c.get(cause).valid_to is None


@pytest.mark.parametrize("step, reason", [("no json here", "malformed output"), ('{"links": [{"source": "x"}]}',
                                                                                   "malformed output"),
                                          (500, "server error (500)")])
def test_a_failed_or_garbage_judgement_links_nothing_and_the_entry_stands(llm, fake_messages, step, reason):
    with llm.client() as c:
        c.remember(type="context", title=CAUSE[0], content=CAUSE[1])
        fake_messages.set_script(lambda body: step)
        r = c.remember(type="project", title=EFFECT[0], content=EFFECT[1], auto_link=True)
        assert r.linked == [] and r.note == f"auto_link failed ({reason}): nothing linked"
        assert [x.kind for x in r.candidates] == ["causal"]  # still there for the caller to judge
        assert c.get(r.id).content == EFFECT[1] and c.expand(r.id).edges == []


def test_auto_link_without_a_key_or_candidates_says_why(client):
    lone = client.remember(type="context", title="Alone", content="Nothing else is here yet", auto_link=True)
    assert lone.note == "auto_link: no candidates to judge"
    client.remember(type="context", title=CAUSE[0], content=CAUSE[1])
    r = client.remember(type="project", title=EFFECT[0], content=EFFECT[1], auto_link=True)
    assert r.candidates and r.linked == []
    assert r.note == "auto_link skipped: no ANTHROPIC_API_KEY on the daemon"


def test_a_candidate_the_writer_cannot_see_is_never_shown_to_the_advisor(llm, fake_messages):
    with llm.client() as owner:
        tokens = {name: owner.user_add(name).token for name in ("alice", "bob")}
    with llm.client(tokens["alice"]) as alice, llm.client(tokens["bob"]) as bob:
        hidden = alice.remember(type="context", title="Secret", content=CAUSE[1] + " at all, says the audit").id
        own = bob.remember(type="context", title=CAUSE[0], content=CAUSE[1]).id
        # Alice's own write of the same text would be offered her entry: it is a candidate for who sees it.
        assert hidden in {x.id for x in alice.remember(type="project", title="x", content=EFFECT[1],
                                                       candidates=True).candidates}
        fake_messages.set_script(lambda body: '{"links": []}')
        r = bob.remember(type="project", title=EFFECT[0], content=EFFECT[1], auto_link=True)
        assert {x.id for x in r.candidates} == {own}
        (request,) = fake_messages.requests
        prompt = request["messages"][0]["content"]
        assert f"[id {own}]" in prompt and f"[id {hidden}]" not in prompt and "audit" not in prompt
        assert r.note == "auto_link: the advisor confirmed no link" and r.linked == []


def test_cli_auto_link_flag(daemon, home):
    ok(home, "remember", "--type", "context", "--title", CAUSE[0], "--content", CAUSE[1])
    proc = arbiter(home, "remember", "--type", "project", "--title", EFFECT[0], "--content", EFFECT[1], "--auto-link")
    assert proc.returncode == 0
    assert "note: auto_link skipped: no ANTHROPIC_API_KEY on the daemon" in proc.stderr
    assert "candidate: arbiter link" in proc.stderr


# ---- the causes qualifier ----------------------------------------------------------------------------------


def test_causes_takes_enables_or_prevents_and_reads_show_it(client, daemon, home):
    cause = client.remember(type="context", title=CAUSE[0], content=CAUSE[1]).id
    effect = client.remember(type="project", title=EFFECT[0], content=EFFECT[1]).id
    other = client.remember(type="project", title="Plan", content="Hire a Redis expert next quarter").id
    r = client.link(cause, "causes", effect, qualifier="enables")
    assert (r.relation, r.qualifier) == ("causes", "enables")
    assert [(e.relation, e.qualifier) for e in client.expand(effect).edges] == [("causes", "enables")]
    assert [(x.relation, x.qualifier) for x in client.around(cause).relations] == [("causes", "enables")]
    with pytest.raises(InvalidParams) as e:
        client.link(other, "supports", effect, qualifier="prevents")
    assert e.value.path == "qualifier" and "qualifies only causes" in e.value.message
    with pytest.raises(InvalidParams) as e:
        client.link(other, "causes", effect, qualifier="because")  # not in the wire's vocabulary
    assert e.value.path == "qualifier"
    assert [x.relation for x in client.expand(other).edges] == []  # a refused link changes nothing
    line = ok(home, "link", str(other), "causes", str(effect), "--qualifier", "prevents")
    assert line.startswith(f"{other} causes (prevents) {effect}")
    assert "--qualifier enables" in ok(home, "link", "--help")
    assert "supports takes no qualifier" in arbiter(home, "link", str(cause), "supports", str(other),
                                                     "--qualifier", "enables").stderr


def test_a_causal_reason_names_the_entry_that_gives_it_and_the_other_one(client):
    """When the earlier entry carries the causal word it is the effect, and the words are shared with the new one
    (the cause), never with itself."""
    effect = client.remember(type="project", title="Storage choice",
                             content="We chose SQLite for the cache because the team lacks Redis experience").id
    cause = client.remember(type="context", title="Team skills", content="The team lacks Redis experience in production",
                            candidates=True)
    causal = [c for c in cause.candidates if c.kind == "causal"]
    assert [(c.source_id, c.target_id) for c in causal] == [(cause.id, effect)]
    assert causal[0].reason.startswith(f"#{effect} gives a reason (#{effect} has a causal word)")
    assert causal[0].reason.endswith(f"of its words with #{cause.id}")


@pytest.mark.parametrize("kind", ["similar", "causal"])
def test_a_forgotten_entry_is_never_suggested(client, kind):
    if kind == "similar":
        gone = client.remember(type="reference", title="Billing retries", content=LONG).id
        text = dict(title="Card payments", content=COUSIN)
    else:
        gone = client.remember(type="context", title="Team skills", content="The team lacks Redis experience in production").id
        text = dict(title="Storage choice", content="We chose SQLite for the cache because the team lacks Redis experience")
    kept = client.remember(type="project", **text, candidates=True)
    assert gone in {c.id for c in kept.candidates if c.kind == kind}  # suggested while it stands
    assert client.forget(gone)
    again = client.remember(type="project", title=text["title"] + " again", content=text["content"] + " today",
                            candidates=True)
    assert gone not in {c.id for c in again.candidates}
