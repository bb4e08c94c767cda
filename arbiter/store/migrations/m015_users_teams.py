"""m015_users_teams: `users`, `teams`, `team_members`, `scopes`; `entries.author_id`, `entries.scope_id`,
`conversations.author_id`; each tenant's index becomes its first user's scope index (see Users and teams).

Users, teams and visibility (store/users.py): who wrote each entry and who may see it. A tenant's first user
takes the tenant's id, name and token, and their private scope the tenant's id too, so the index
`entries_fts_<tenant>` keeps its rows and only its view and triggers change (from tenant to scope). Every
existing entry is that user's, private.
"""

SQL = """
        CREATE TABLE users(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            name TEXT NOT NULL,
            token_hash BLOB NOT NULL UNIQUE,
            created_at INTEGER NOT NULL,
            UNIQUE (tenant_id, name)
        );
        CREATE TABLE teams(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            name TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            UNIQUE (tenant_id, name)
        );
        -- A member who leaves keeps the row (left_at): they still see what they wrote there.
        CREATE TABLE team_members(
            user_id INTEGER NOT NULL REFERENCES users(id),
            team_id INTEGER NOT NULL REFERENCES teams(id),
            joined_at INTEGER NOT NULL,
            left_at INTEGER,
            PRIMARY KEY (user_id, team_id)
        ) WITHOUT ROWID;
        CREATE INDEX team_members_team ON team_members(team_id) WHERE left_at IS NULL;
        -- A visibility scope: one user's private entries, or one team's shared ones.
        CREATE TABLE scopes(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            user_id INTEGER UNIQUE REFERENCES users(id),
            team_id INTEGER UNIQUE REFERENCES teams(id),
            CHECK ((user_id IS NULL) <> (team_id IS NULL))
        );
        ALTER TABLE entries ADD COLUMN author_id INTEGER REFERENCES users(id);
        ALTER TABLE entries ADD COLUMN scope_id INTEGER REFERENCES scopes(id);
        -- A conversation is its creator's, and seen by whoever sees an entry in it.
        ALTER TABLE conversations ADD COLUMN author_id INTEGER REFERENCES users(id);
        UPDATE conversations SET author_id = tenant_id;
        INSERT INTO users(id, tenant_id, name, token_hash, created_at)
            SELECT id, id, name, token_hash, created_at FROM tenants;
        INSERT INTO scopes(id, tenant_id, user_id) SELECT id, id, id FROM tenants;
        """


def apply(conn) -> None:
    """Users, teams and scopes; each tenant's first user takes its entries, and its index becomes their scope's."""
    conn.execute(SQL)
    tenant_ids = [r[0] for r in conn.execute("SELECT id FROM tenants ORDER BY id")]
    for n in tenant_ids:
        t = f"entries_fts_{int(n)}"
        conn.execute(
            f"DROP TRIGGER {t}_insert; DROP TRIGGER {t}_delete; DROP TRIGGER {t}_update; "
            f"DROP TABLE {t}_vocab; DROP VIEW {t}_rows;"
        )
    conn.execute("UPDATE entries SET author_id = tenant_id, scope_id = tenant_id")
    for n in tenant_ids:
        attach(conn, n)


def attach(conn, n: int) -> None:
    """The view, vocabulary and triggers of private scope N's index as m015 made them (m020 makes the insert
    trigger stand aside for a deferred scope, m023 names `content_z`)."""
    t, n = f"entries_fts_{int(n)}", int(n)
    cols = "title, content, tags, source, scope"

    def columns(row: str) -> str:
        where = f"CASE WHEN {row}.conversation_id IS NULL THEN 'u' || {row}.tenant_id ELSE 'c' || {row}.conversation_id END"
        return f"{row}.title, {row}.content, {row}.tags, {row}.source, {where}"

    conn.execute(
        f"""
        CREATE VIEW {t}_rows AS SELECT id, {columns("entries")} AS scope FROM entries WHERE scope_id = {n};
        CREATE VIRTUAL TABLE {t}_vocab USING fts5vocab({t}, row);
        CREATE TRIGGER {t}_insert AFTER INSERT ON entries WHEN new.scope_id = {n} BEGIN
            INSERT INTO {t}(rowid, {cols}) VALUES (new.id, {columns("new")});
        END;
        CREATE TRIGGER {t}_delete AFTER DELETE ON entries WHEN old.scope_id = {n} BEGIN
            INSERT INTO {t}({t}, rowid, {cols}) VALUES ('delete', old.id, {columns("old")});
        END;
        CREATE TRIGGER {t}_update AFTER UPDATE OF title, content, tags, source, conversation_id, scope_id ON entries
        WHEN old.scope_id = {n} OR new.scope_id = {n} BEGIN
            INSERT INTO {t}({t}, rowid, {cols}) SELECT 'delete', old.id, {columns("old")}
                WHERE old.scope_id = {n};
            INSERT INTO {t}(rowid, {cols}) SELECT new.id, {columns("new")} WHERE new.scope_id = {n};
        END;
        """
    )
