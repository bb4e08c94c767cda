"""Threads, the graph projection, tag co-occurrence and topic clusters through a real daemon."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from arbiter.errors import InvalidParams, NotFound
from tests import corpus
from tests.conftest import arbiter_cli, DaemonProcess



@pytest.fixture(scope="module")
def memory():
    """A daemon holding the fixture corpus, for tests that only read."""
    home = Path(tempfile.mkdtemp(prefix="arb-"))
    d = DaemonProcess(home).start()
    with d.client() as c:
        built = corpus.build(c)
    with d.client() as c:
        yield d, c, built
    d.stop()
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def fresh(client):
    """A private daemon with the corpus, for tests that write."""
    return client, corpus.build(client)


# ---- topic clusters -------------------------------------------------------------


def _theme_of(cluster) -> str | None:
    """The theme holding most of the cluster's tags, when it holds at least 80% of them."""
    best = max(corpus.THEME_TAGS, key=lambda th: len(set(cluster.tags) & corpus.THEME_TAGS[th]))
    share = len(set(cluster.tags) & corpus.THEME_TAGS[best]) / len(cluster.tags)
    return best if share >= 0.8 else None


def test_clusters_match_the_corpus_themes(memory):
    _, c, _ = memory
    clusters = c.topic_clusters().clusters
    themes = [_theme_of(cl) for cl in clusters]
    assert len({t for t in themes if t}) >= 3, [cl.tags for cl in clusters]
    assert all(len(cl.tags) >= 3 for cl in clusters)
    sizes = [(len(cl.tags), cl.weight) for cl in clusters]
    assert sizes == sorted(sizes, reverse=True)
    noise = {t for _, _, _, tags, _ in corpus.NOISE for t in tags}
    assert not noise & {t for cl in clusters for t in cl.tags}
    # No key on this daemon: fallback names, no error.
    for cl in clusters:
        assert cl.named_by == "fallback" and cl.name == "/".join(cl.tags[:3])


def test_same_data_gives_the_same_clusters(memory, client):
    _, c, _ = memory
    corpus.build(client)
    first = [(cl.key, cl.tags, cl.entries) for cl in c.topic_clusters().clusters]
    second = [(cl.key, cl.tags, cl.entries) for cl in client.topic_clusters().clusters]
    assert first == second


def test_topic_cluster_lists_recent_entries_of_the_tags_cluster(memory):
    _, c, built = memory
    result = c.topic_cluster("rollback", limit=3)
    assert "runbook" in result.cluster.tags and "rollback" in result.cluster.tags
    assert [e.id for e in result.entries] == sorted((e.id for e in result.entries), reverse=True)
    assert len(result.entries) == 3 and all("runbook" in e.tags for e in result.entries)
    with pytest.raises(NotFound) as info:
        c.topic_cluster("recipe")
    assert info.value.path == "tag"


# ---- threads -------------------------------------------------------------------------


def test_thread_reads_the_same_from_any_member(memory):
    _, c, built = memory
    from_root = c.thread(built["login"])
    from_leaf = c.thread(built["login-r2"])
    assert from_root == from_leaf
    assert from_root.root.id == built["login"]
    assert [r.id for r in from_root.replies] == [built["login-r1"], built["login-r2"], built["login-r3"]]
    assert from_root.depth == {built["login-r1"]: 1, built["login-r2"]: 2, built["login-r3"]: 1}


def test_open_threads_newest_activity_first(memory):
    _, c, built = memory
    threads = c.open_threads().threads
    assert [t.root.id for t in threads] == [built[n] for n in ("adr-queue", "rb-deploy", "deadlock", "login")]
    login = threads[-1]
    assert login.replies == 3 and login.last_reply.id == built["login-r3"]


def test_reply_inherits_from_the_parent_and_reopens_a_thread(fresh):
    c, built = fresh
    r = c.reply(built["login"], "Backfill finished; closing.")
    parent = c.get(built["login"])
    assert (r.parent_id, r.type, r.tags, r.title) == (parent.id, parent.type, parent.tags, "Re: " + parent.title)
    assert c.reply(r.id, "Thanks!").title == r.title  # no "Re: Re: "
    assert c.open_threads().threads[0].root.id == built["login"]
    own = c.reply(built["darkmode"], "Designs are ready.", title="Dark mode designs", type="reference", tags=["design"])
    assert (own.title, own.type, own.tags) == ("Dark mode designs", "reference", ["design"])
    # A reply says who said it; it does not inherit the parent's speaker.
    said = c.reply(built["login"], "It was the cache.", speaker="Caroline")
    assert (said.speaker, c.get(said.id).speaker, r.speaker) == ("Caroline", "Caroline", None)


def test_reply_to_a_missing_or_retired_entry_fails(fresh):
    c, built = fresh
    with pytest.raises(NotFound) as info:
        c.reply(999_999, "hello")
    assert info.value.path == "parent_id"
    c.forget(built["avatar"])
    with pytest.raises(NotFound):
        c.reply(built["avatar"], "hello")
    with pytest.raises(InvalidParams) as info:
        c.reply(built["login"], "   ")
    assert info.value.path == "content"


def test_a_retired_root_closes_its_thread(fresh):
    c, built = fresh
    c.forget(built["deadlock"])
    assert built["deadlock"] not in [t.root.id for t in c.open_threads().threads]
    assert c.thread(built["deadlock-r1"]).root.valid_to is not None


# ---- backlinks, around -------------------------------------------------------------------


def test_backlinks_union_replies_mentions_and_relations(memory):
    _, c, built = memory
    links = c.backlinks(built["deadlock"]).links
    assert [(link.kind, link.entry.id) for link in links] == [
        ("reply", built["deadlock-r1"]),
        ("mention", built["s-incident"]),
    ]
    links = c.backlinks(built["adr-queue-old"]).links  # retired, still has backlinks
    assert [(link.kind, link.relation, link.entry.id) for link in links] == [
        ("relation", "supersedes", built["adr-queue"])
    ]
    with pytest.raises(NotFound):
        c.backlinks(999_999)


def test_mentions_need_the_hash_form(fresh):
    c, built = fresh
    target = built["index"]
    c.remember(type="learning", title="Timing", content=f"The lookup took {target} ms; &#{target}; x#{target}")
    mention = c.remember(type="learning", title="Note", content=f"Related: (#{target}).")
    kinds = [(link.kind, link.entry.id) for link in c.backlinks(target).links]
    assert kinds == [("mention", mention.id), ("mention", built["login-r2"])]


def test_around_gathers_the_neighbourhood(memory):
    _, c, built = memory
    a = c.around(built["login-r1"], k=3)
    assert a.parent.id == built["login"]
    assert [e.id for e in a.children] == [built["login-r2"]]
    assert [e.id for e in a.siblings] == [built["login-r3"]]
    shown = {built["login"], built["login-r2"], built["login-r3"]}
    assert len(a.shared_tags) == 3 and not shown & {n.entry.id for n in a.shared_tags}
    assert all("ticket" in n.shared_tags for n in a.shared_tags)

    incident = c.around(built["s-incident"])
    assert [e.id for e in incident.references] == [built["migration"], built["rb-rollback-db"], built["deadlock"]]
    queue = c.around(built["adr-queue"])
    assert {(r.relation, r.direction, r.entry.id) for r in queue.relations} == {
        ("supersedes", "out", built["adr-queue-old"]),
        ("supports", "in", built["rb-queue-stuck"]),
    }
    assert [e.id for e in queue.children] == [built["adr-queue-r1"]]


# ---- tag co-occurrence -----------------------------------------------------------------------


def test_cooccurrence_counts_only_active_entries(fresh):
    c, built = fresh
    before = {(p.a, p.b): p.count for p in c.tag_cooccurrence("rollback").pairs}
    assert before[("rollback", "runbook")] == 2
    c.forget(built["rb-rollback"])
    after = c.tag_cooccurrence("rollback")
    assert after.tags[0].count == 1
    assert {(p.a, p.b): p.count for p in after.pairs}[("rollback", "runbook")] == 1
    c.update(built["rb-rollback-db"], tags=["runbook", "ops"])
    assert c.tag_cooccurrence("rollback").pairs == []


# ---- the CLI -----------------------------------------------------------------------------


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    return arbiter_cli(home, *args)


def test_cli_briefing_threads_and_cluster(memory):
    daemon, _, built = memory
    out = _cli(daemon.home, "briefing")
    assert out.returncode == 0 and out.stdout.startswith("# Memory briefing")
    threads = json.loads(_cli(daemon.home, "threads", "--json").stdout)
    assert threads[0]["root"]["id"] == built["adr-queue"]
    cluster = _cli(daemon.home, "cluster", "runbook", "--limit", "2")
    assert cluster.returncode == 0 and "oncall/ops/runbook" in cluster.stdout
    missing = _cli(daemon.home, "around", "999999")
    assert missing.returncode == 1 and "not found" in missing.stderr
