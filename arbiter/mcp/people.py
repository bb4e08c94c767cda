"""MCP tools for the people of a shared memory: who am I, share and unshare a thread."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from arbiter.mcp.tool import Args, EntryId, Session, View, count, tool
from arbiter.model import Name

TeamName = Annotated[Name, Meta(description="A team you are in (`whoami` lists them).")]


class WhoamiArgs(Args):
    pass


class WhoView(View):
    tenant: str
    user: str
    teams: list[str]

    def text(self) -> str:
        teams = ", ".join(self.teams) or "none (everything you write is private)"
        return f"You are {self.user} in tenant {self.tenant}; teams: {teams}."


@tool(WhoamiArgs, WhoView)
def whoami(s: Session, a: WhoamiArgs) -> WhoView:
    """Who this session writes as, and the teams whose shared memories it sees.

    What you write is private to you unless you share its thread with a team.
    Teammates' shared threads appear in the briefing's open threads: continue
    them with `reply`, never by starting a new entry on the same subject.
    """
    w = s.daemon.whoami()
    return WhoView(tenant=w.tenant, user=w.user, teams=w.teams)


class ShareArgs(Args):
    id: Annotated[EntryId, Meta(description="The thread's root: an entry you wrote that is not itself a reply.")]
    team: TeamName


class SharedView(View):
    root_id: int
    team: str | None
    ids: list[int]

    def text(self) -> str:
        where = f"shared with team {self.team}" if self.team else "private again (each entry to its own author)"
        return f"Thread #{self.root_id} ({count(len(self.ids), 'entry', 'entries')}) is now {where}."


@tool(ShareArgs, SharedView, writes=True)
def share(s: Session, a: ShareArgs) -> SharedView:
    """Share a thread you started with a team: its root and every reply you see, whoever wrote them.

    Share by the thread's root (the entry at the top of `thread`), not a
    reply. Only the author of the root can share it, and only with a team
    they belong to. Teammates then see it, and reply to it.
    """
    r = s.daemon.share(a.id, a.team)
    s.changed(*r.ids)
    return SharedView(root_id=r.root_id, team=r.team, ids=r.ids)


class UnshareArgs(Args):
    id: Annotated[EntryId, Meta(description="The root of a thread you shared.")]


@tool(UnshareArgs, SharedView, writes=True)
def unshare(s: Session, a: UnshareArgs) -> SharedView:
    """Make a thread you shared private again: each entry in it goes back to its own author alone."""
    r = s.daemon.unshare(a.id)
    s.changed(*r.ids)
    return SharedView(root_id=r.root_id, team=r.team, ids=r.ids)
