"""Briefing layout and its byte budget, on a real SQLite file and PostgreSQL."""

from __future__ import annotations

import random

import pytest

from arbiter import briefing
from arbiter.graph import tags, threads
from arbiter._time import US
from arbiter.model import OPEN_THREADS_PER_TOOL_CALL, RememberParams
from arbiter.store import entries, tenants, users

pytestmark = pytest.mark.both_engines
T0 = 1_800_000_000 * US
SECTIONS = ["## 1. Identity and totals", "## 2. Conventions", "## 3. Before you write", "## 4. Topic map",
            "## 5. Open threads", "## 6. Recent activity"]


@pytest.fixture
def big(db):
    """400 entries: long titles, 20 themes of 6 tags each, priority and area families, 40 threads."""
    rng = random.Random(7)
    print("seed 7")
    conn = db
    with conn:
        tid, _ = tenants.create_tenant(conn, "big", now=T0)
        ids = []
        for i in range(400):
            theme = i % 20
            tags = rng.sample([f"theme{theme}-{k}" for k in range(6)], 3) + [f"p{rng.randint(0, 3)}",
                                                                             f"area:{rng.choice('abcdefgh')}"]
            parent = ids[rng.randrange(len(ids))] if ids and i % 10 == 0 else None
            title = f"Entry {i}: " + " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(25))
            ids.append(entries.remember(conn, users.first_viewer(conn, tid), RememberParams(
                type="project", title=title[:190], content="body", tags=tags, parent_id=parent), now=T0 + i))
    return conn, tid


def test_a_big_memory_is_cut_to_the_budget_least_useful_first(big):
    conn, tid = big
    b, fresh = briefing.build(conn, users.first_viewer(conn, tid), "big", now=T0 + 1000, advisor=None)
    assert b.bytes == len(b.text.encode()) <= 8192
    assert [b.text.index(s) for s in SECTIONS] == sorted(b.text.index(s) for s in SECTIONS)
    assert b.cut and b.cut[-1] != "the end of the briefing"
    assert b.cut[0].endswith("recent entries") or any(c.endswith("recent entries") for c in b.cut)
    assert "_Cut to stay under 8 KB:" in b.text
    assert fresh == []
    roomy, _ = briefing.build(conn, users.first_viewer(conn, tid), "big", now=T0 + 1000, advisor=None, max_bytes=65536)
    assert roomy.cut == [] and roomy.bytes > 8192
    # Whatever was cut, every open thread shown keeps its full id.
    for t in b.open_threads[:3]:
        assert f"#{t.root.id} " in b.text


def test_tiny_budgets_still_keep_every_section(big):
    conn, tid = big
    b, _ = briefing.build(conn, users.first_viewer(conn, tid), "big", now=T0 + 1000, advisor=None, max_bytes=4096)
    assert b.bytes <= 4096
    assert all(s in b.text for s in SECTIONS)


def test_every_capped_list_says_how_many_it_left_out_and_what_lists_them(big):
    # A model reading the briefing takes a list for the whole of it unless told otherwise.
    conn, tid = big
    v = users.first_viewer(conn, tid)
    b, _ = briefing.build(conn, v, "big", now=T0 + 1000, advisor=None, max_bytes=65536)
    assert b.cut == []
    _, thread_count = threads.open_threads(conn, v, limit=1)
    assert len(b.open_threads) == briefing.MAX_THREADS < thread_count
    assert f"- … {thread_count - briefing.MAX_THREADS} more (`explore` kind `open_threads` lists up to {OPEN_THREADS_PER_TOOL_CALL}" in b.text
    assert f"- … {400 - briefing.MAX_RECENT} more (`list` pages through them" in b.text
    distinct = tags.distinct(conn, v)
    assert f", … {distinct - briefing.MAX_VOCABULARY} more (`explore` kind `topics`" in b.text
    paired = tags.pair_count(conn, v, at_least=2)
    assert f", … {paired - briefing.MAX_PAIRS} more (`explore` kind `topic` with a `tag`" in b.text


def test_a_list_cut_for_the_budget_counts_its_cut_and_its_unread_items_together(big):
    conn, tid = big
    v = users.first_viewer(conn, tid)
    b, _ = briefing.build(conn, v, "big", now=T0 + 1000, advisor=None)
    cut = next(c for c in b.cut if c.endswith("recent entries"))
    kept = briefing.MAX_RECENT - int(cut.split()[0])
    assert f"- … {400 - kept} more (`list`" in b.text


def test_the_tag_families_left_out_are_counted_on_a_line_of_the_families_list(db):
    # The families are sub-items ("  - `f0:*`: ..."): the count of those left out is one too, not a new top item.
    conn = db
    with conn:
        tid, _ = tenants.create_tenant(conn, "fam", now=T0)
        v = users.first_viewer(conn, tid)
        for k in range(10):  # ten families of two tags, none on an entry with another: each stands alone
            for member in "ab":
                entries.remember(conn, v, RememberParams(type="project", title=f"f{k}{member}", content="body",
                                                         tags=[f"f{k}:{member}"]), now=T0 + k)
    b, _ = briefing.build(conn, v, "fam", now=T0 + 1000, advisor=None, max_bytes=65536)
    lines = b.text.splitlines()
    at = lines.index("  - … 7 more (`explore` kind `topics` shows the tags that form topics)")
    assert lines[at - 3:at] == [line for line in lines if line.startswith("  - `f")]


def test_the_guidance_on_tags_names_only_the_lists_shown_above_it(big):
    conn = big[0]  # another tenant of the same store
    with conn:
        tid, _ = tenants.create_tenant(conn, "plain", now=T0)
        v = users.first_viewer(conn, tid)
        untagged, _ = briefing.build(conn, v, "plain", now=T0 + 1000, advisor=None)
        entries.remember(conn, v, RememberParams(type="project", title="Ship v1", content="body", tags=["release"]),
                         now=T0)
        tagged, _ = briefing.build(conn, v, "plain", now=T0 + 1000, advisor=None)
    assert "no tags yet" in untagged.text and "tag vocabulary" not in untagged.text.split("## 3.")[1]
    assert "Tag families" not in tagged.text and "families" not in tagged.text.split("## 3.")[1]
    assert "**Reuse the tag vocabulary** above" in tagged.text
    conn, tid = big
    roomy, _ = briefing.build(conn, users.first_viewer(conn, tid), "big", now=T0 + 1000, advisor=None, max_bytes=65536)
    assert "- Tag families" in roomy.text and "**Reuse the tag vocabulary and families** above" in roomy.text
    tight, _ = briefing.build(conn, users.first_viewer(conn, tid), "big", now=T0 + 1000, advisor=None, max_bytes=4096)
    assert "1 of 1 tag families" in tight.cut and "- Tag families" not in tight.text
    assert "**Reuse the tag vocabulary** above" in tight.text  # the families it would name were cut
