"""The people verbs: users and their tokens, teams and membership, sharing a thread, who am I.

The model and its SQL live in `store/users.py`; the cascade that moves a
whole thread lives in `graph/cascades.py`. Who may do what:

- the tenant's first user (the tenant token) adds users and rotates anyone's
  token; every user may rotate their own;
- any user may create a team (and is its first member); a member adds others
  or removes them, and anyone may leave;
- only an entry's author shares or unshares it, and only with a team they
  belong to.
"""

from __future__ import annotations

from arbiter.errors import Forbidden
from arbiter.graph import cascades
from arbiter.model import (
    Empty,
    IdParams,
    MemberParams,
    Membership,
    NameParams,
    ShareParams,
    Shared,
    TeamList,
    UserCreated,
    UserList,
    Whoami,
)
from arbiter.store import users
from arbiter.verb import Context, Verb


def _changed(ctx: Context) -> None:
    """After the commit, the daemon forgets what it knew of who sees what (its viewer cache)."""
    if forget := ctx.services.people_changed:
        ctx.committed.append(lambda conn: forget())


def user_add(ctx: Context, p: NameParams):
    """Add a user to this tenant; returns their token, once (first user only)."""
    users.require_owner(ctx.conn, ctx.viewer, "adding a user")
    _changed(ctx)  # the tenant is no longer one user's
    _, token = users.create_user(ctx.conn, ctx.tenant_id, p.name, now=ctx.now)
    return UserCreated(name=p.name, token=token)


def user_list(ctx: Context, p: Empty):
    """The tenant's users and the teams each belongs to."""
    return UserList(users=users.list_users(ctx.conn, ctx.tenant_id))


def user_rotate(ctx: Context, p: NameParams):
    """A new token for a user (yourself, or anyone if you are the first user); the old one stops working at once."""
    v = ctx.viewer
    if p.name != v.user_name:
        users.require_owner(ctx.conn, v, f"rotating {p.name!r}'s token")
    token = users.rotate(ctx.conn, ctx.tenant_id, p.name)
    _changed(ctx)  # the old token stops working at once
    return UserCreated(name=p.name, token=token)


def team_add(ctx: Context, p: NameParams):
    """Create a team; you are its first member."""
    team = users.create_team(ctx.conn, ctx.tenant_id, p.name, now=ctx.now)
    users.join(ctx.conn, team, ctx.viewer.user_id, now=ctx.now)
    _changed(ctx)
    return Membership(team=p.name, user=ctx.viewer.user_name, member=True, changed=True)


def _may_manage(ctx: Context, team: int, name: str) -> None:
    v = ctx.viewer
    if team not in v.teams and users.first_user(ctx.conn, ctx.tenant_id) != v.user_id:
        raise Forbidden(f"you are not in team {name!r}: a member (or the tenant's first user) manages it", path="team")


def team_join(ctx: Context, p: MemberParams):
    """Add a user to a team (a member or the first user does this); joining twice changes nothing."""
    team = users.team_id(ctx.conn, ctx.tenant_id, p.team)
    user = users.user_id(ctx.conn, ctx.tenant_id, p.user)
    _may_manage(ctx, team, p.team)
    changed = users.join(ctx.conn, team, user, now=ctx.now)
    _changed(ctx)
    return Membership(team=p.team, user=p.user, member=True, changed=changed)


def team_leave(ctx: Context, p: MemberParams):
    """Take a user out of a team (yourself, or by a member); at once they stop seeing what it shares, except what they wrote."""
    team = users.team_id(ctx.conn, ctx.tenant_id, p.team)
    user = users.user_id(ctx.conn, ctx.tenant_id, p.user)
    if user != ctx.viewer.user_id:
        _may_manage(ctx, team, p.team)
    changed = users.leave(ctx.conn, team, user, now=ctx.now)
    _changed(ctx)
    return Membership(team=p.team, user=p.user, member=False, changed=changed)


def team_list(ctx: Context, p: Empty):
    """The tenant's teams and their members."""
    return TeamList(teams=users.list_teams(ctx.conn, ctx.tenant_id))


def share(ctx: Context, p: ShareParams):
    """Share a thread you started with a team you are in, by its root: every reply you see follows, whoever wrote it."""
    scope = users.member_scope(ctx.conn, ctx.viewer, p.team)
    ids = cascades.share(ctx.conn, ctx.viewer, p.id, scope, now=ctx.now)
    return Shared(root_id=p.id, team=p.team, ids=ids)


def unshare(ctx: Context, p: IdParams):
    """Make a thread you started private again: each entry in it goes back to its own author alone."""
    ids = cascades.share(ctx.conn, ctx.viewer, p.id, None, now=ctx.now)
    return Shared(root_id=p.id, team=None, ids=ids)


def whoami(ctx: Context, p: Empty):
    """The caller: tenant, user and teams."""
    v = ctx.viewer
    return Whoami(tenant=ctx.tenant_name, user=v.user_name, teams=users.team_list(ctx.conn, v))


VERBS: dict[str, Verb] = {
    "user_add": Verb(NameParams, user_add, writes=True),
    "user_list": Verb(Empty, user_list, lane="quick"),
    "user_rotate": Verb(NameParams, user_rotate, writes=True),
    "team_add": Verb(NameParams, team_add, writes=True),
    "team_join": Verb(MemberParams, team_join, writes=True),
    "team_leave": Verb(MemberParams, team_leave, writes=True),
    "team_list": Verb(Empty, team_list, lane="quick"),
    "share": Verb(ShareParams, share, writes=True),
    "unshare": Verb(IdParams, unshare, writes=True),
    "whoami": Verb(Empty, whoami, lane="quick"),
}
