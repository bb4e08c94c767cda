"""`arbiter user`, `arbiter team`, `arbiter share`/`unshare`, `arbiter whoami`: the people inside a tenant."""

from __future__ import annotations

import click

from arbiter import paths
from arbiter.cli._common import _date, _emit, command, counted, main, new_name


@main.group()
def user():
    """Users of this tenant, each with a token of their own.

    \b
    The tenant token is the tenant's first user (named as the tenant), so a
    setup from before users existed keeps working. Act as another user with
    the global option --user NAME (env ARBITER_USER).

    \b
    Example:
      arbiter user add bob                 # prints bob's token once, saves it
      arbiter --user bob recall "deploy"   # reads as bob
      arbiter user rotate bob              # bob's old token stops working
    """


@command(user, "add")
@click.argument("name")
def user_add(settings, as_json, name):
    """Add a user (first user only); print the token once and save it (0600) under HOME/tenants/TENANT/NAME.token.

    If that file already holds a token (another database of this home may
    have a user of that name, and tokens are stored hashed), nothing is
    created: move the file aside first.

    \b
    Example:
      arbiter user add bob
      arbiter --user bob whoami
    """
    name = new_name(name)
    path = paths.user_token_path(settings.home, settings.tenant, name)
    with settings.client() as c:
        paths.require_unheld(path, f"a user named {name!r} of tenant {settings.tenant!r}",
                             exists=lambda: name in {u.name for u in c.user_list().users})
        created = c.user_add(name)
    paths.write_secret(path, created.token)
    _emit(created, as_json, lambda u: click.echo(f"user {u.name}: token {u.token}\n(saved to {path})"))


@command(user, "list")
def user_list(settings, as_json):
    """The tenant's users and their teams.

    \b
    Example:
      arbiter user list
    """
    with settings.client() as c:
        found = c.user_list()
    _emit(found, as_json, lambda r: [
        click.echo(f"{u.name}  ({_date(u.created_at)})" + (f"  teams: {', '.join(u.teams)}" if u.teams else ""))
        for u in r.users
    ])


@command(user, "rotate")
@click.argument("name")
def user_rotate(settings, as_json, name):
    """A new token for NAME (yourself, or anyone as the first user); the old one stops working at once.

    \b
    Example:
      arbiter user rotate bob
    """
    with settings.client() as c:
        created = c.user_rotate(name)
    path = paths.user_token_path(settings.home, settings.tenant, name)
    paths.write_secret(path, created.token)
    _emit(created, as_json, lambda u: click.echo(f"user {u.name}: new token {u.token}\n(saved to {path})"))


@main.group()
def team():
    """Teams inside this tenant: what a member shares, every member sees.

    \b
    Example:
      arbiter team add core             # you are its first member
      arbiter team join core bob        # a member adds bob
      arbiter share 42 --team core      # thread #42 and its replies, to core
    """


def _membership(m) -> None:
    verb = "is in" if m.member else "is not in"
    click.echo(f"{m.user} {verb} team {m.team}" + ("" if m.changed else " (already so: nothing changed)"))


@command(team, "add")
@click.argument("name")
def team_add(settings, as_json, name):
    """Create a team; you become its first member.

    \b
    Example:
      arbiter --user alice team add core
    """
    with settings.client() as c:
        m = c.team_add(name)
    _emit(m, as_json, _membership)


@command(team, "join")
@click.argument("team", metavar="TEAM")
@click.argument("user", metavar="USER")
def team_join(settings, as_json, team, user):
    """Add USER to TEAM (a member, or the first user, does this); joining twice changes nothing.

    \b
    Example:
      arbiter --user alice team join core bob
    """
    with settings.client() as c:
        m = c.team_join(team, user)
    _emit(m, as_json, _membership)


@command(team, "leave")
@click.argument("team", metavar="TEAM")
@click.argument("user", metavar="USER")
def team_leave(settings, as_json, team, user):
    """Take USER out of TEAM: at once they stop seeing what it shares (except what they wrote).

    \b
    Example:
      arbiter --user alice team leave core bob
    """
    with settings.client() as c:
        m = c.team_leave(team, user)
    _emit(m, as_json, _membership)


@command(team, "list")
def team_list(settings, as_json):
    """The tenant's teams and their members.

    \b
    Example:
      arbiter team list
    """
    with settings.client() as c:
        found = c.team_list()
    _emit(found, as_json, lambda r: [
        click.echo(f"{t.name}  ({_date(t.created_at)})  members: {', '.join(t.members) or 'none'}") for t in r.teams
    ] or click.echo("(no teams)", err=True))


def _shared(s) -> None:
    where = f"team {s.team}" if s.team else "private (each entry to its own author)"
    click.echo(f"thread #{s.root_id}: {counted(len(s.ids), 'entry', 'entries')} now {where}")


@command(main, "share")
@click.argument("id", metavar="ID", type=int)
@click.option("--team", "team", required=True, help="A team you are in.")
def share(settings, as_json, id, team):
    """Share the thread rooted at ID (an entry you wrote) with a team: every reply you see follows, whoever wrote it.

    \b
    Example:
      arbiter share 42 --team core
    """
    with settings.client() as c:
        s = c.share(id, team)
    _emit(s, as_json, _shared)


@command(main, "unshare")
@click.argument("id", metavar="ID", type=int)
def unshare(settings, as_json, id):
    """Make the thread rooted at ID private again: each entry goes back to its own author alone.

    \b
    Example:
      arbiter unshare 42
    """
    with settings.client() as c:
        s = c.unshare(id)
    _emit(s, as_json, _shared)


@command(main, "whoami")
def whoami(settings, as_json):
    """Who this token is: tenant, user and teams.

    \b
    Example:
      arbiter --user bob whoami
    """
    with settings.client() as c:
        w = c.whoami()
    _emit(w, as_json, lambda w: click.echo(
        f"user {w.user} of tenant {w.tenant}; teams: {', '.join(w.teams) or 'none'}"
    ))
