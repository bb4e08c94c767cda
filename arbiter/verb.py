"""What a verb is and what it runs with: shared by the core verbs (`arbiter.verbs`) and each feature's own verb module.

A feature declares its verbs in its own `VERBS` dict of `Verb`s; `arbiter.verbs`
merges them into the one table the daemon serves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal

import apsw
import msgspec

from arbiter._time import parse_time
from arbiter.store import users

if TYPE_CHECKING:
    from arbiter.advisor import Advisor

#: Days the access log keeps a read (maintenance prunes older rows).
ACCESS_RETENTION_DAYS = 30.0


@dataclass
class Services:
    """What the daemon lends a verb beyond its connection; a verb run without a daemon (a test) gets the defaults."""

    #: The LLM, when the daemon has a key (`serve --llm-model`, ANTHROPIC_API_KEY); else features say they skipped it.
    advisor: Advisor | None = None
    access_retention_days: float = ACCESS_RETENTION_DAYS
    #: Empties the daemon's caches of tokens and of what each user sees, after a people verb changed them.
    people_changed: Callable[[], None] | None = None
    #: What changed since a subscriber last looked (MCP subscriptions poll it): an `arbiter.changes.core.Memo`,
    #: not imported here, since that module's verbs import this one.
    changes: Any = None


@dataclass
class Context:
    """What a verb runs with: a connection (inside a transaction), the caller (tenant and user), the instant."""

    conn: apsw.Connection
    tenant_id: int
    tenant_name: str
    now: int
    services: Services = field(default_factory=Services)
    #: What optional layers want to tell the caller (a failed LLM call, tags added).
    notes: list[str] = field(default_factory=list)
    #: Writes a read verb asks for (caches): the daemon runs each on the writer
    #: connection, in one transaction, after the read and before answering.
    after: list[Callable[[apsw.Connection], None]] = field(default_factory=list)
    #: Work a write verb asks for once its transaction has committed (a WAL
    #: checkpoint cannot run inside one): the daemon runs each on the writer
    #: before answering.
    committed: list[Callable[[apsw.Connection], None]] = field(default_factory=list)
    #: Entries a read returned, as (entry id, verb): the daemon hands them to
    #: the writer's access log in batches, after answering (reads never wait).
    accessed: list[tuple[int, str]] = field(default_factory=list)
    #: The calling user (None: the tenant's first user, as a tenant token is), and their name if known.
    user_id: int | None = None
    user_name: str | None = None
    #: What the caller may see, if the daemon already knows (its cache); else read at first use.
    seen_as: users.Viewer | None = None

    @property
    def viewer(self) -> users.Viewer:
        """What the caller may see (read at first use, so a membership change counts at the next request)."""
        if self.seen_as is None:
            # On PostgreSQL nothing about the caller is cached across requests (another daemon may change it): the
            # name the token lookup read saves a round trip of every request there.
            self.seen_as = (users.first_viewer(self.conn, self.tenant_id, self.user_id) if self.user_name is None
                            else users.viewer(self.conn, self.tenant_id, self.user_id, self.user_name))
        return self.seen_as


@dataclass(frozen=True)
class Verb:
    params: type[msgspec.Struct]
    run: Callable[[Context, Any], msgspec.Struct]
    writes: bool = False
    #: A write of a few rows (one entry, one link): its statement journals stay in memory, not in a
    #: temporary file per statement (server._transaction). Bulk writes leave it False.
    small: bool = False
    admin: bool = False
    public: bool = False  # needs no token (health checks)
    #: Where a read runs in the daemon. "reader": the reader pool (searches,
    #: briefings, anything that may take milliseconds). "quick": a small pool of
    #: its own for bounded reads (a page by index), so they never queue behind a
    #: recall. "loop": on the event loop itself, for reads of a row or two by key
    #: (`get`): no thread handoff at all, so nothing to wait for.
    lane: Literal["reader", "quick", "loop"] = "reader"
    #: Slow read-only work (LLM calls) done on a reader before a write verb
    #: runs, so the writer is never held while waiting on the network.
    prepare: Callable[[Context, Any], Any] | None = None
    needs_prepare: Callable[[Any], bool] = lambda params: True
    #: Slow read-only work after a write verb has committed (the advisor judging
    #: what the write found), on a reader: `finish(ctx, params, result)` returns
    #: the write that follows from it, run on the writer as a second
    #: transaction, whose return value is the answer. The first write stands
    #: whatever the second does (if it fails, the answer is the first result
    #: with a `note` saying so); the writer never waits on the network.
    finish: Callable[[Context, Any, Any], Callable[[Context], Any]] | None = None
    needs_finish: Callable[[Any], bool] = lambda params: True
    #: `run` is a generator on the writer connection, outside any transaction;
    #: the daemon runs one step per writer task so writes interleave (backups).
    stepped: bool = False


def _as_of(value) -> int | None:
    return None if value is None else parse_time(value, path="as_of")


def _known_at(value) -> int | None:
    return None if value is None else parse_time(value, path="known_at")


def advisor_for(ctx: Context):
    """The daemon's advisor (set when it has an LLM key), else None."""
    return ctx.services.advisor
