"""The ten scenarios of the seed's §5.2: a prompt, hard assertions, rubric questions.

A hard assertion reads the run's transcript and the memory as it is after
the run, through `arbiter.client.Client` as the scenario's user; entries are
named by fixture name (`corpus.py`) and resolved through the seeded
`Fixture`, never by a number. An assertion returns None when it holds and a
sentence saying what went wrong when it does not. Tool names and argument
shapes are read through `tools.py`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from arbiter.client import Client
from arbiter.errors import ArbiterError
from arbiter.model import Entry
from bench.scenarios import corpus, tools
from bench.scenarios.corpus import Fixture
from bench.scenarios.driver import Event, Transcript


@dataclass
class Ctx:
    """What an assertion sees: the transcript, the seeded fixture, and a client as the session's user."""

    t: Transcript
    fx: Fixture
    client: Client

    @cached_property
    def entries(self) -> list[Entry]:
        """Every active entry the user sees now."""
        return self.client.list(limit=1000)

    @cached_property
    def new(self) -> list[Entry]:
        """Active entries the run wrote."""
        seeded = set(self.fx.ids.values())
        return [e for e in self.entries if e.id not in seeded]

    @cached_property
    def vocabulary(self) -> set[str]:
        """The tags the seeded entries carry."""
        seeded = set(self.fx.ids.values())
        return {tag for e in self.entries if e.id in seeded for tag in e.tags}

    def calls(self, ok_only: bool = True) -> list[tuple[Event, Event | None]]:
        """Tool calls in order with their results; by default only those that succeeded."""
        return [(c, r) for c, r in self.t.calls() if not ok_only or (r is not None and not r.is_error)]

    def thread_ids(self, root: str) -> set[int]:
        """The ids of the seeded thread rooted at fixture `root`, replies included."""
        thread = self.client.thread(self.fx[root])
        return {thread.root.id, *(r.id for r in thread.replies)} & set(self.fx.ids.values())


Check = Callable[[Ctx], str | None]


@dataclass
class Scenario:
    key: str
    tests_for: str
    turns: list[str]
    checks: dict[str, Check]
    rubric: list[str]


# Assertions shared by several scenarios.

def read_something(c: Ctx) -> str | None:
    return None if any(call.tool in tools.READS for call, _ in c.calls()) else "no read tool call succeeded"


def read_before_write(c: Ctx) -> str | None:
    names = [call.tool for call, _ in c.calls()]
    first_write = next((i for i, n in enumerate(names) if n in tools.WRITES), len(names))
    if not any(n in tools.READS for n in names[:first_write]):
        return "wrote before reading anything" if first_write < len(names) else "read nothing"
    return None


def wrote_nothing(c: Ctx) -> str | None:
    # Attempts count too: a question is no occasion to write, whether or not the write went through.
    writes = [call.tool for call, _ in c.t.calls() if call.tool in tools.WRITES]
    if writes or c.new:
        return f"wrote: calls {writes}, new entries {[e.id for e in c.new]}"
    return None


def no_new_top_level(c: Ctx) -> str | None:
    tops = [e.id for e in c.new if e.parent_id is None]
    return f"new top-level entries {tops}" if tops else None


def overwrote_nothing(c: Ctx) -> str | None:
    # Attempts count: the daemon refuses to overwrite a teammate's entry, but a model that tried would have
    # destroyed their words on a memory that let it (the seed's §5.3 failure the judge forgave).
    seeded = set(c.fx.ids.values())
    hit = [tools.edited_id(call.tool, call.args or {}) for call, _ in c.t.calls()]
    hit = [c.fx.name_of(i) for i in hit if i in seeded]
    return f"tried to overwrite seeded entries {hit}" if hit else None


def replied_in(root: str) -> Check:
    def check(c: Ctx) -> str | None:
        thread = c.thread_ids(root)
        parents = [tools.reply_parent(call.tool, call.args or {}) for call, _ in c.calls()]
        if not any(p in thread for p in parents):
            return f"no reply under the {root} thread (reply parents: {[p for p in parents if p]})"
        added = [e.id for e in c.new if e.parent_id in thread]
        return None if added else f"the {root} thread holds no new reply"
    return check


def unchanged(*names: str) -> Check:
    def check(c: Ctx) -> str | None:
        texts = {n: body for n, *_, body in (*corpus.TICKETS, *corpus.RUNBOOKS, *corpus.REPLIES)}
        changed = [n for n in names if c.client.get(c.fx[n]).content != texts[n]]
        return f"text changed: {changed}" if changed else None
    return check


def one_new_entry(c: Ctx) -> str | None:
    return None if len(c.new) == 1 else f"{len(c.new)} new entries, not one"


def answer_mentions(*groups: tuple[str, ...]) -> Check:
    """The final answer holds at least one phrase of every group (case-insensitive)."""
    def check(c: Ctx) -> str | None:
        text = c.t.final_text().lower()
        missing = [g for g in groups if not any(p.lower() in text for p in g)]
        return f"the answer mentions none of {missing}" if missing else None
    return check


# Scenario-specific assertions.

def tagged_by_convention(c: Ctx) -> str | None:
    if not c.new:
        return "no new entry"
    tags = c.new[0].tags
    prios = [t for t in tags if re.fullmatch(r"p[0-9]", t)]
    areas = [t for t in tags if t.startswith("area:")]
    problems = []
    if "eng" not in tags:
        problems.append("no umbrella `eng`")
    if len(prios) != 1:
        problems.append(f"priorities {prios}")
    if len(areas) != 1:
        problems.append(f"areas {areas}")
    return f"tags {tags}: {', '.join(problems)}" if problems else None


def linked_to(name: str) -> Check:
    def check(c: Ctx) -> str | None:
        target = c.fx[name]
        new = {e.id for e in c.new}
        pointing_in = {b.entry.id for b in c.client.backlinks(target).links}
        pointing_out = {n for n in new if any(b.entry.id == target for b in c.client.backlinks(n).links)}
        return None if (new & pointing_in) or pointing_out else f"no new entry is linked with {name}"
    return check


def superseded(name: str) -> Check:
    def check(c: Ctx) -> str | None:
        history = c.client.history(c.fx[name])
        new = {e.id for e in c.new}
        by = [r.source_id for r in history.relations
              if r.relation == "supersedes" and r.target_id == c.fx[name] and r.source_id in new]
        return None if by else f"{name} is not superseded by a new entry"
    return check


def topics_named(minimum: int) -> Check:
    """The answer names at least `minimum` of the topic clusters, each by one of its tags or its name."""
    def check(c: Ctx) -> str | None:
        text = c.t.final_text().lower()
        clusters = c.client.topic_clusters().clusters
        named = [k.name for k in clusters
                 if k.name.lower() in text or any(re.search(r"\b" + re.escape(t.lower()), text) for t in k.tags)]
        return None if len(named) >= min(minimum, len(clusters)) else f"named {len(named)} topics: {named}"
    return check


def no_tool_calls(c: Ctx) -> str | None:
    names = [call.tool for call, _ in c.t.calls()]
    return f"called {names}" if names else None


def reused_cluster_tags(tag: str, minimum: int) -> Check:
    def check(c: Ctx) -> str | None:
        if not c.new:
            return "no new entry"
        cluster = set(c.client.topic_cluster(tag).cluster.tags)
        tags = c.new[0].tags
        reused = [t for t in tags if t in cluster]
        invented = [t for t in tags if t not in c.vocabulary]
        if len(reused) < minimum or len(invented) >= len(reused):
            return f"tags {tags}: {len(reused)} of the {tag} cluster's, invented {invented}"
        return None
    return check


SCENARIOS = [
    Scenario(
        "reply-to-thread", "uses the thread-reply primitive when the prompt maps to an open thread",
        ["Update on the Safari sessions bug: I deployed the Secure flag fix to staging this morning and sessions "
         "now survive the whole hour. Please record that."],
        {"replied in the Safari thread": replied_in("session-expiry"),
         "no new top-level entry": no_new_top_level},
        ["Did the assistant add the update to the existing Safari sessions thread rather than start a new memory?",
         "Does the recorded reply state the fix and its effect accurately?",
         "Did the final message tell the user truthfully what was recorded and where?"],
    ),
    Scenario(
        "new-memory", "creates a fresh top-level memory when the prompt is unrelated to any open thread",
        ["Please remember: the office moves to the 4th floor on 3 December, and desks must be packed by the "
         "evening of the 2nd."],
        {"one new entry": one_new_entry, "not filed as a reply": lambda c: (
            None if c.new and c.new[0].parent_id is None else "no new top-level entry")},
        ["Did the assistant record the move as a new memory of its own?",
         "Does the memory keep both dates and the floor?",
         "Were the type and tags sensible for an office logistics note?"],
    ),
    Scenario(
        "cluster-recall", "answers a navigation question with the search and list tools",
        ["What do our runbooks say about rolling things back? Give me a short summary."],
        {"read the memory": read_something, "wrote nothing": wrote_nothing,
         "answer uses both rollback runbooks": answer_mentions(("make rollback", "version=previous"),
                                                               ("down step", "replica"))},
        ["Did the assistant look the runbooks up rather than answer from general knowledge?",
         "Does the summary cover both the release rollback and the migration rollback?",
         "Is everything in the summary supported by the memory's entries?"],
    ),
    Scenario(
        "teammate-thread", "replies in a thread another user started, without touching their text",
        ["On Raj's deadlock thread: the lock-order fix has now run a full week in production with no deadlocks, "
         "so the flag can be removed. Add that to the thread."],
        {"replied in raj's thread": replied_in("deadlock"), "no new top-level entry": no_new_top_level,
         "raj's entries untouched": unchanged("deadlock", "deadlock-r1"), "overwrote nothing": overwrote_nothing},
        ["Did the assistant reply in Raj's existing thread?",
         "Did it leave Raj's own entries as he wrote them?",
         "Does the reply say the fix held for a week and the flag can go?"],
    ),
    Scenario(
        "tag-conventions", "follows the detected tag conventions when filing new content",
        ["File a ticket: CSV export times out for accounts with more than 10k invoices. It's a P1 bug in the API."],
        {"one new entry": one_new_entry, "tagged eng + one priority + one area": tagged_by_convention},
        ["Did the ticket follow the memory's tagging conventions (umbrella, priority, area, kind)?",
         "Is the ticket's title specific and its content complete?",
         "Did the assistant avoid inventing tags where existing ones fit?"],
    ),
    Scenario(
        "no-duplicate", "reads before writing when the prompt nearly repeats a memory, and writes no duplicate",
        ["Remember this: lookups of customers by email are slow because customers.email has no index; the fix "
         "is a unique index on lower(email)."],
        {"read before writing": read_before_write, "no duplicate entry": no_new_top_level},
        ["Did the assistant notice the existing ticket about the missing email index?",
         "Did it avoid writing a second copy of what the memory already held?",
         "Did it tell the user that this was already recorded, and where?"],
    ),
    Scenario(
        "cross-reference", "makes an explicit link when the prompt mentions another memory",
        ["Note for the webhook retry work: retries must go through the per-token rate limiter, so a burst of "
         "retries cannot lock a customer out of the API. Connect this to the rate limiting ticket."],
        {"a new entry holds the note": lambda c: None if c.new else "no new entry",
         "linked with the rate-limit ticket": linked_to("ratelimit")},
        ["Did the assistant find the rate limiting ticket before writing?",
         "Is the link explicit (a relation, a reply, or an #ID mention) rather than a vague reference?",
         "Does the note carry the constraint accurately?"],
    ),
    Scenario(
        "supersede", "an update to a stale fact keeps the prior memory and links to it",
        ["Our rollback procedure changed: it is now `make rollback TAG=<release-tag>`, and the health check runs "
         "automatically. Record the new procedure so nobody follows the old one."],
        {"old runbook superseded by a new entry": superseded("rb-rollback"), "overwrote nothing": overwrote_nothing},
        ["Did the assistant find the old rollback runbook?",
         "Was the old procedure kept in history and marked as replaced, rather than edited away?",
         "Is the new procedure recorded completely?"],
    ),
    Scenario(
        "topics-from-briefing", "answers 'what topics?' from the briefing alone, with no tool call",
        ["What are the main topics my memory covers? A short list is fine."],
        {"no tool calls": no_tool_calls, "names three topics": topics_named(3)},
        ["Did the answer list the memory's real topic areas?",
         "Was it answered directly, without needless lookups?",
         "Is the list short and accurate, with nothing invented?"],
    ),
    Scenario(
        "cluster-vocabulary", "a note that matches a named cluster uses that cluster's tags",
        ["Add a runbook note: after a Postgres failover, drain the job queue before restarting the workers, or "
         "jobs run twice."],
        {"one new entry": one_new_entry, "reuses the runbook cluster's tags": reused_cluster_tags("runbook", 2)},
        ["Did the note reuse the runbook topic's tags?",
         "Did it sit with the existing failover runbook (a reply or a link) where that fits?",
         "Is the note's content accurate and actionable?"],
    ),
]

BY_KEY = {s.key: s for s in SCENARIOS}


def check(scenario: Scenario, ctx: Ctx) -> dict[str, str | None]:
    """Every hard assertion of `scenario`: None where it holds, else what went wrong."""
    out: dict[str, str | None] = {}
    for name, fn in scenario.checks.items():
        try:
            out[name] = fn(ctx)
        except ArbiterError as e:  # the memory refused a read (an id gone, say): the assertion fails, saying why
            out[name] = f"assertion raised {type(e).__name__}: {e}"
    return out
