"""People inside a tenant: users and their tokens, teams and who belongs, and what a user may see.

Every entry has an author (`entries.author_id`) and a visibility scope
(`entries.scope_id`): the author's private scope, or a team's. A scope is
also a unit of storage: each has its own full-text index (store/fts.py), so
the ranking statistics a user's search reads are those of the scopes they
see, never another's.

A user sees:
- whole scopes: their own private scope and the scope of each team they
  belong to now (membership changes take effect at the next request);
- besides those, what they wrote themselves into a team they have since
  left (`author_id`).

`Viewer` carries that, read once per request; every read of entries filters
with `Viewer.sees`. Reads at `as_of` or `known_at` apply today's visibility:
who may see a memory is a question about now, not about the memory's past.

A tenant's first user has the tenant's name and token, so a tenant token
works as it did before users existed.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

import apsw

from arbiter._time import format_time
from arbiter.errors import Conflict, Forbidden, NotFound
from arbiter.model import TeamInfo, UserInfo
from arbiter.store import fts


def hash_token(token: str) -> bytes:
    # Tokens are 256 random bits, so a plain hash is enough: there is nothing
    # to brute-force that a slow KDF would protect.
    return hashlib.sha256(token.encode()).digest()


def new_token() -> str:
    return "arb_" + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Viewer:
    """Who is reading, and so which entries exist for them.

    `scopes`: the scopes seen whole (own private scope first, then current
    teams'). `left`: scopes of teams the user has left, where they see only
    what they wrote. `solo`: the tenant has one user, who wrote everything in it.
    """

    tenant_id: int
    user_id: int
    user_name: str
    teams: tuple[int, ...] = ()
    scopes: tuple[int, ...] = ()
    left: tuple[int, ...] = ()
    solo: bool = False
    #: The whole tenant, for the daemon's own upkeep (maintenance, rebuilds): never a caller.
    everyone: bool = False

    @property
    def private_scope(self) -> int:
        return self.scopes[0]

    def sees(self, alias: str = "e") -> str:
        """SQL: the entries row `alias` exists for this viewer. Every value is an integer of ours, so no bindings."""
        if self.solo or self.everyone:
            return f"{alias}.tenant_id = {int(self.tenant_id)}"
        whole = ",".join(str(int(s)) for s in self.scopes)
        return (
            f"({alias}.tenant_id = {int(self.tenant_id)} AND "
            f"({alias}.scope_id IN ({whole}) OR {alias}.author_id = {int(self.user_id)}))"
        )

    def indexes(self) -> list[tuple[int, int | None]]:
        """(scope, author filter or None) of every full-text index this viewer searches."""
        if self.everyone:
            raise ValueError("the whole tenant has no one scope list")
        return [(s, None) for s in self.scopes] + [(s, self.user_id) for s in self.left]


def tenant_scopes(conn: apsw.Connection, tenant_id: int) -> list[int]:
    """Every scope of a tenant, in id order: every index the whole tenant's upkeep searches or counts."""
    return [r[0] for r in conn.execute("SELECT id FROM scopes WHERE tenant_id = ? ORDER BY id", (tenant_id,))]


def whole_tenant(tenant_id: int) -> Viewer:
    """A viewer that sees the whole tenant: for upkeep the daemon does on its own, never for a caller."""
    return Viewer(tenant_id, 0, "", everyone=True)


def viewer(conn: apsw.Connection, tenant_id: int, user_id: int, user_name: str) -> Viewer:
    """What `user_id` sees now: one small query (membership changes count at once)."""
    rows = conn.execute(
        "SELECT s.id, NULL, NULL FROM scopes s WHERE s.user_id = ?1 "
        "UNION ALL SELECT s.id, m.team_id, m.left_at FROM team_members m JOIN scopes s ON s.team_id = m.team_id "
        "WHERE m.user_id = ?1 "
        "UNION ALL SELECT -1, (SELECT count(*) FROM users WHERE tenant_id = ?2), NULL",
        (user_id, tenant_id),
    ).fetchall()
    scopes, teams, left, users = [], [], [], 1
    for scope, team, left_at in rows:
        if scope == -1:
            users = team
        elif team is None:
            scopes.insert(0, scope)
        elif left_at is None:
            scopes.append(scope)
            teams.append(team)
        else:
            left.append(scope)
    return Viewer(tenant_id, user_id, user_name, tuple(teams), tuple(scopes), tuple(left), solo=users == 1)


def first_viewer(conn: apsw.Connection, tenant_id: int, user_id: int | None = None) -> Viewer:
    """The viewer of `user_id`, by default the tenant's first user: who a tenant token is (tests and benches act as them)."""
    uid = first_user(conn, tenant_id) if user_id is None else user_id
    name = conn.execute("SELECT name FROM users WHERE id = ?", (uid,)).fetchone()[0]
    return viewer(conn, tenant_id, uid, name)


def _scope(conn: apsw.Connection, tenant_id: int, *, user_id: int | None = None, team_id: int | None = None) -> int:
    scope_id = conn.execute(
        "INSERT INTO scopes(tenant_id, user_id, team_id) VALUES (?, ?, ?) RETURNING id", (tenant_id, user_id, team_id)
    ).fetchall()[0][0]
    fts.create(conn, scope_id, shared=team_id is not None)
    return scope_id


def insert_named(conn: apsw.Connection, table: str, what: str, columns: dict, *, unique: tuple[str, ...]) -> int:
    """Insert a row named by its `unique` columns (a tenant, user or team) and return its id; Conflict naming the
    existing one if the name is taken.

    Inserted first and checked after (ON CONFLICT), not the other way round: where several daemons share a
    database, two may add the same name at once, and the one that loses must get the Conflict, not a
    constraint error.
    """
    names = ", ".join(columns)
    row = conn.execute(
        f"INSERT INTO {table}({names}) VALUES ({','.join('?' * len(columns))}) "
        f"ON CONFLICT ({', '.join(unique)}) DO NOTHING RETURNING id",
        list(columns.values()),
    ).fetchall()
    if row:
        return row[0][0]
    existing = conn.execute(f"SELECT id FROM {table} WHERE {' AND '.join(f'{c} = ?' for c in unique)}",
                            [columns[c] for c in unique]).fetchone()[0]
    raise Conflict(f"{what} {columns['name']!r} already exists", path="name", existing_id=existing)


def create_user(
    conn: apsw.Connection, tenant_id: int, name: str, *, now: int, token_hash: bytes | None = None
) -> tuple[int, str | None]:
    """Add a user with a private scope; returns (id, token), the token None when `token_hash` is given."""
    token = None
    if token_hash is None:
        token = new_token()
        token_hash = hash_token(token)
    user_id = insert_named(conn, "users", "user", {"tenant_id": tenant_id, "name": name, "token_hash": token_hash,
                                                   "created_at": now}, unique=("tenant_id", "name"))
    _scope(conn, tenant_id, user_id=user_id)
    return user_id, token


def user_by_token(conn: apsw.Connection, token_hash: bytes) -> tuple[int, str, int, str] | None:
    """(tenant id, tenant name, user id, user name) of the user holding a token, or None."""
    return conn.execute(
        "SELECT t.id, t.name, u.id, u.name FROM users u JOIN tenants t ON t.id = u.tenant_id WHERE u.token_hash = ?",
        (token_hash,),
    ).fetchone()


def first_user(conn: apsw.Connection, tenant_id: int) -> int:
    return conn.execute("SELECT min(id) FROM users WHERE tenant_id = ?", (tenant_id,)).fetchone()[0]


def require_owner(conn: apsw.Connection, v: Viewer, what: str) -> None:
    """Forbidden unless the caller is the tenant's first user (who holds the tenant token)."""
    if first_user(conn, v.tenant_id) != v.user_id:
        raise Forbidden(f"{what} is for the tenant's first user (the tenant token), not {v.user_name!r}")


def user_id(conn: apsw.Connection, tenant_id: int, name: str, *, path: str = "user") -> int:
    row = conn.execute("SELECT id FROM users WHERE tenant_id = ? AND name = ?", (tenant_id, name)).fetchone()
    if row is None:
        raise NotFound(f"no user {name!r} in this tenant (arbiter user list)", path=path)
    return row[0]


def team_id(conn: apsw.Connection, tenant_id: int, name: str, *, path: str = "team") -> int:
    row = conn.execute("SELECT id FROM teams WHERE tenant_id = ? AND name = ?", (tenant_id, name)).fetchone()
    if row is None:
        raise NotFound(f"no team {name!r} in this tenant (arbiter team list)", path=path)
    return row[0]


def member_scope(conn: apsw.Connection, v: Viewer, team_name: str, *, path: str = "team") -> int:
    """The scope of a team the caller belongs to now (NotFound: no such team; Forbidden: not a member)."""
    team = team_id(conn, v.tenant_id, team_name, path=path)
    if team not in v.teams:
        raise Forbidden(f"you are not in team {team_name!r}: a member adds you (arbiter team join {team_name} USER)",
                        path=path)
    return team_scope(conn, team)


def team_scope(conn: apsw.Connection, team: int) -> int:
    return conn.execute("SELECT id FROM scopes WHERE team_id = ?", (team,)).fetchone()[0]


def rotate(conn: apsw.Connection, tenant_id: int, name: str) -> str:
    """A new token for a user; the old one stops working at once. The first user's is the tenant token too."""

    uid = user_id(conn, tenant_id, name, path="name")
    token = new_token()
    conn.execute("UPDATE users SET token_hash = ? WHERE id = ?", (hash_token(token), uid))
    if uid == first_user(conn, tenant_id):
        conn.execute("UPDATE tenants SET token_hash = ? WHERE id = ?", (hash_token(token), tenant_id))
    return token


def list_users(conn: apsw.Connection, tenant_id: int) -> list[UserInfo]:
    rows = conn.execute(
        "SELECT u.id, u.name, u.created_at, (SELECT group_concat(t.name, ',') FROM team_members m "
        "JOIN teams t ON t.id = m.team_id WHERE m.user_id = u.id AND m.left_at IS NULL) "
        "FROM users u WHERE u.tenant_id = ? ORDER BY u.id",
        (tenant_id,),
    )
    return [
        UserInfo(name=name, created_at=format_time(created), teams=sorted(teams.split(",")) if teams else [])
        for _, name, created, teams in rows
    ]


def create_team(conn: apsw.Connection, tenant_id: int, name: str, *, now: int) -> int:
    team = insert_named(conn, "teams", "team", {"tenant_id": tenant_id, "name": name, "created_at": now},
                        unique=("tenant_id", "name"))
    _scope(conn, tenant_id, team_id=team)
    return team


def join(conn: apsw.Connection, team: int, user: int, *, now: int) -> bool:
    """Add a member (back); False if they already belong."""
    conn.execute(
        "INSERT INTO team_members(team_id, user_id, joined_at) VALUES (?, ?, ?) "
        "ON CONFLICT (user_id, team_id) DO UPDATE SET joined_at = excluded.joined_at, left_at = NULL "
        "WHERE team_members.left_at IS NOT NULL",
        (team, user, now),
    )
    return conn.changes() > 0


def leave(conn: apsw.Connection, team: int, user: int, *, now: int) -> bool:
    """End a membership (the row stays: its author still sees what they shared there); False if not a member."""
    conn.execute(
        "UPDATE team_members SET left_at = ? WHERE team_id = ? AND user_id = ? AND left_at IS NULL", (now, team, user)
    )
    return conn.changes() > 0


def list_teams(conn: apsw.Connection, tenant_id: int) -> list[TeamInfo]:
    rows = conn.execute(
        "SELECT t.name, t.created_at, (SELECT group_concat(u.name, ',') FROM team_members m "
        "JOIN users u ON u.id = m.user_id WHERE m.team_id = t.id AND m.left_at IS NULL) "
        "FROM teams t WHERE t.tenant_id = ? ORDER BY t.name",
        (tenant_id,),
    )
    return [
        TeamInfo(name=name, created_at=format_time(created), members=sorted(m.split(",")) if m else [])
        for name, created, m in rows
    ]


def team_list(conn: apsw.Connection, v: Viewer) -> list[str]:
    """Names of the teams `v`'s user belongs to now."""
    if not v.teams:
        return []
    return sorted(r[0] for r in conn.execute(
        f"SELECT name FROM teams WHERE id IN ({','.join(str(int(t)) for t in v.teams)})"
    ))


def names(conn: apsw.Connection, user_ids: list[int]) -> dict[int, str]:
    """user id -> name."""
    if not user_ids:
        return {}
    ids = sorted(set(user_ids))
    return dict(conn.execute(f"SELECT id, name FROM users WHERE id IN ({','.join('?' * len(ids))})", ids))
