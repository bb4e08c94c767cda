"""The one connection factory and the versioned migrations.

Every connection (daemon writer, daemon readers, tests, bench) comes from
`connect`, so pragmas cannot drift between production and tests.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Literal

import apsw

from arbiter._time import now_us
from arbiter.errors import InvalidParams, SchemaTooNew
from arbiter.facts.schema import FACT_SCOPES_SQL, FACTS_SQL
from arbiter.store import fts, text

Synchronous = Literal["FULL", "NORMAL"]

BUSY_TIMEOUT_MS = 5000
# The WAL is cut back to this size whenever it restarts. Without a limit it
# keeps its largest size for good (a bulk load leaves tens of MB), which is
# space a full disk never gets back.
JOURNAL_SIZE_LIMIT = 8 * 1024 * 1024

ENTRY_TYPES_SQL = "('user','feedback','project','reference','learning','context')"
RELATION_TYPES_SQL = "('relates_to','refines','contradicts','supersedes','supports')"
# m012 adds `causes` (a confirmed causal association).
RELATION_TYPES_M012_SQL = "('relates_to','refines','contradicts','supersedes','supports','causes')"
# Entity types and relations as they stood when m006 created its CHECKs (the
# registry is arbiter.entities.model; a new value needs a migration).
ENTITY_TYPES_SQL = "('person','organisation','project','concept','location','tool','event','other')"
ENTITY_RELATIONS_SQL = (
    "('related_to','works_on','part_of','depends_on','created_by','uses','knows','similar_to','caused_by','followed_by')"
)

def _fts_scope(row: str) -> str:
    """SQL for a row's scope tokens: `t<tenant> c<conversation>`, or `t<tenant> u<tenant>` if unscoped."""
    return (
        f"'t' || {row}.tenant_id || ' ' || CASE WHEN {row}.conversation_id IS NULL "
        f"THEN 'u' || {row}.tenant_id ELSE 'c' || {row}.conversation_id END"
    )


# The tag pairs of one entry, from its `entry_tags` rows (each pair once, a < b).
_ENTRY_TAG_PAIRS = (
    "SELECT x.tag, y.tag FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag "
    "WHERE x.entry_id = {id}"
)

# Tag-graph upkeep, set-based per entry (not a trigger per tag row), skipped for
# tagless entries. At bulk ingest the tag graph costs ~20 us an entry either way
# (measured): the cost is its ~12 B-tree writes, not trigger overhead.
_TAG_ENTRY = f"""
    INSERT OR IGNORE INTO entry_tags(entry_id, tenant_id, tag)
        SELECT new.id, new.tenant_id, value FROM json_each(new.tags) WHERE {{when}};
    INSERT INTO tag_counts(tenant_id, tag, n)
        SELECT new.tenant_id, tag, 1 FROM entry_tags WHERE entry_id = new.id
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_pairs(tenant_id, a, b, n)
        SELECT new.tenant_id, p.*, 1 FROM ({_ENTRY_TAG_PAIRS.format(id="new.id")}) p WHERE true
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_graph_version(tenant_id, version)
        SELECT new.tenant_id, 1 WHERE EXISTS (SELECT 1 FROM entry_tags WHERE entry_id = new.id)
        ON CONFLICT DO UPDATE SET version = version + 1;
"""


def _tag_entry(when: str) -> str:
    """Trigger SQL adding `new`'s tags, if `when`, to entry_tags and the counts (the later steps read entry_tags)."""
    return _TAG_ENTRY.replace("{when}", when)


_UNTAG_ENTRY = f"""
    UPDATE tag_graph_version SET version = version + 1
        WHERE tenant_id = old.tenant_id AND EXISTS (SELECT 1 FROM entry_tags WHERE entry_id = old.id);
    UPDATE tag_counts SET n = n - 1
        WHERE tenant_id = old.tenant_id AND tag IN (SELECT tag FROM entry_tags WHERE entry_id = old.id);
    DELETE FROM tag_counts
        WHERE tenant_id = old.tenant_id AND n <= 0 AND tag IN (SELECT tag FROM entry_tags WHERE entry_id = old.id);
    UPDATE tag_pairs SET n = n - 1
        WHERE tenant_id = old.tenant_id AND (a, b) IN ({_ENTRY_TAG_PAIRS.format(id="old.id")});
    DELETE FROM tag_pairs
        WHERE tenant_id = old.tenant_id AND n <= 0 AND (a, b) IN ({_ENTRY_TAG_PAIRS.format(id="old.id")});
    DELETE FROM entry_tags WHERE entry_id = old.id;
"""


# The tag graph per visibility scope (m016): the same upkeep as m003's, keyed
# by `scope_id` instead of `tenant_id`. An entry that changes scope (share,
# unshare) is untagged from the old scope and tagged into the new one, so
# counts move with it and both scopes' versions change.
# (Byte for byte m003's text with the key renamed.)
_TAG_SCOPED = _TAG_ENTRY.replace("tenant_id", "scope_id")
_UNTAG_SCOPED = _UNTAG_ENTRY.replace("tenant_id", "scope_id")

M016_TAG_SCOPES = f"""
    DROP TRIGGER entries_tags_insert;
    DROP TRIGGER entries_tags_update;
    DROP TRIGGER entries_tags_delete;
    DROP TABLE entry_tags;
    DROP TABLE tag_counts;
    DROP TABLE tag_pairs;
    DROP TABLE tag_graph_version;
    CREATE TABLE entry_tags(
        entry_id INTEGER NOT NULL,
        scope_id INTEGER NOT NULL,
        tag TEXT NOT NULL,
        PRIMARY KEY (entry_id, tag)
    ) WITHOUT ROWID;
    CREATE INDEX entry_tags_tag ON entry_tags(scope_id, tag, entry_id);
    CREATE TABLE tag_counts(
        scope_id INTEGER NOT NULL,
        tag TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (scope_id, tag)
    ) WITHOUT ROWID;
    CREATE TABLE tag_pairs(
        scope_id INTEGER NOT NULL,
        a TEXT NOT NULL,
        b TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (scope_id, a, b),
        CHECK (a < b)
    ) WITHOUT ROWID;
    CREATE TABLE tag_graph_version(
        scope_id INTEGER PRIMARY KEY,
        version INTEGER NOT NULL
    );
    CREATE TRIGGER entries_tags_insert AFTER INSERT ON entries
    WHEN new.valid_to IS NULL AND new.tags != '[]' BEGIN{_TAG_SCOPED.replace("{when}", "true")}
    END;
    CREATE TRIGGER entries_tags_update AFTER UPDATE OF tags, valid_to, scope_id ON entries
    WHEN old.tags IS NOT new.tags OR old.valid_to IS NOT new.valid_to OR old.scope_id IS NOT new.scope_id
    BEGIN{_UNTAG_SCOPED}{_TAG_SCOPED.replace("{when}", "new.valid_to IS NULL")}
    END;
    CREATE TRIGGER entries_tags_delete AFTER DELETE ON entries BEGIN{_UNTAG_SCOPED}
    END;
    INSERT OR IGNORE INTO entry_tags(entry_id, scope_id, tag)
        SELECT e.id, e.scope_id, j.value FROM entries e, json_each(e.tags) j WHERE e.valid_to IS NULL;
    INSERT INTO tag_counts(scope_id, tag, n) SELECT scope_id, tag, count(*) FROM entry_tags GROUP BY 1, 2;
    INSERT INTO tag_pairs(scope_id, a, b, n)
        SELECT x.scope_id, x.tag, y.tag, count(*)
        FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag GROUP BY 1, 2, 3;
    INSERT INTO tag_graph_version(scope_id, version) SELECT DISTINCT scope_id, 1 FROM entry_tags;
    CREATE TABLE cluster_names_m016(
        tenant_id INTEGER NOT NULL REFERENCES tenants(id),
        tags_sha256 BLOB NOT NULL,
        scopes TEXT NOT NULL,
        name TEXT NOT NULL,
        description TEXT NOT NULL,
        named_at INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, tags_sha256, scopes)
    ) WITHOUT ROWID;
    -- A name cached before scopes was made from the whole tenant's titles: it
    -- stays only where the tenant is one scope (its first user's, see m015).
    INSERT INTO cluster_names_m016
        SELECT c.tenant_id, c.tags_sha256, (SELECT s.id FROM scopes s WHERE s.tenant_id = c.tenant_id),
               c.name, c.description, c.named_at
        FROM cluster_names c WHERE (SELECT count(*) FROM scopes s WHERE s.tenant_id = c.tenant_id) = 1;
    DROP TABLE cluster_names;
    ALTER TABLE cluster_names_m016 RENAME TO cluster_names;
"""

# The tag graph with one `entry_tags` B-tree instead of two (m022): rows keyed
# (scope_id, tag, entry_id), the order every reader seeks by. The table keyed
# by entry it replaces was read only to find an entry's own tags, which its
# `tags` column already holds: an entry has rows exactly while it is active
# (valid_to IS NULL), one per distinct tag, in its scope. Half the tag graph's
# bytes (0.06x of the text, docs/benchmarks.md "Size").
_TAG_PAIRS_OF = "SELECT DISTINCT x.value, y.value FROM json_each({row}.tags) x JOIN json_each({row}.tags) y ON x.value < y.value"
_TAG_ONE = f"""
    INSERT OR IGNORE INTO entry_tags(scope_id, tag, entry_id)
        SELECT new.scope_id, value, new.id FROM json_each(new.tags) WHERE {{when}};
    INSERT INTO tag_counts(scope_id, tag, n)
        SELECT new.scope_id, value, 1 FROM (SELECT DISTINCT value FROM json_each(new.tags)) WHERE {{when}}
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_pairs(scope_id, a, b, n)
        SELECT new.scope_id, p.*, 1 FROM ({_TAG_PAIRS_OF.format(row="new")}) p WHERE {{when}}
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_graph_version(scope_id, version)
        SELECT new.scope_id, 1 WHERE {{when}} AND new.tags != '[]'
        ON CONFLICT DO UPDATE SET version = version + 1;
"""
_UNTAG_ONE = f"""
    UPDATE tag_graph_version SET version = version + 1
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND old.tags != '[]';
    UPDATE tag_counts SET n = n - 1
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND tag IN (SELECT value FROM json_each(old.tags));
    DELETE FROM tag_counts
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND n <= 0
          AND tag IN (SELECT value FROM json_each(old.tags));
    UPDATE tag_pairs SET n = n - 1
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND (a, b) IN ({_TAG_PAIRS_OF.format(row="old")});
    DELETE FROM tag_pairs
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND n <= 0
          AND (a, b) IN ({_TAG_PAIRS_OF.format(row="old")});
    DELETE FROM entry_tags
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND tag IN (SELECT value FROM json_each(old.tags))
          AND entry_id = old.id;
"""

M022_ENTRY_TAGS_ONE_TABLE = f"""
    DROP TRIGGER entries_tags_insert;
    DROP TRIGGER entries_tags_update;
    DROP TRIGGER entries_tags_delete;
    CREATE TABLE entry_tags_m022(
        scope_id INTEGER NOT NULL,
        tag TEXT NOT NULL,
        entry_id INTEGER NOT NULL,
        PRIMARY KEY (scope_id, tag, entry_id)
    ) WITHOUT ROWID;
    INSERT INTO entry_tags_m022(scope_id, tag, entry_id)
        SELECT scope_id, tag, entry_id FROM entry_tags ORDER BY scope_id, tag, entry_id;
    DROP TABLE entry_tags;
    ALTER TABLE entry_tags_m022 RENAME TO entry_tags;
    CREATE TRIGGER entries_tags_insert AFTER INSERT ON entries
    WHEN new.valid_to IS NULL AND new.tags != '[]'
        AND NOT EXISTS (SELECT 1 FROM deferred_scopes WHERE scope_id = new.scope_id)
    BEGIN{_TAG_ONE.replace("{when}", "true")}
    END;
    CREATE TRIGGER entries_tags_update AFTER UPDATE OF tags, valid_to, scope_id ON entries
    WHEN old.tags IS NOT new.tags OR old.valid_to IS NOT new.valid_to OR old.scope_id IS NOT new.scope_id
    BEGIN{_UNTAG_ONE}{_TAG_ONE.replace("{when}", "new.valid_to IS NULL")}
    END;
    CREATE TRIGGER entries_tags_delete AFTER DELETE ON entries BEGIN{_UNTAG_ONE}
    END;
"""

#: Cardinal number words that count as a figure in `recall_entries.numerals`
#: (bit 2). Measured on the LongMemEval dev split: +2 R@1 with the quantity
#: cue; with "one" added, -2 (docs/retrieval.md).
NUMBER_WORDS = (
    "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million dozen"
).split()

_DIGIT = re.compile(r"[0-9]")
_NUMBER_WORDS = frozenset(NUMBER_WORDS)
# Punctuation that can touch a word ("two-thirds", "(five)", "ten,") becomes a space.
_BREAKS = str.maketrans({c: " " for c in ",.-!?;:()\"/'"})


def numerals(text: str | None) -> int:
    """`recall_entries.numerals` of a text: 1 if it holds a digit, else 2 if a number word, else 0.

    A Python function registered on every connection (`connect`): one pass
    of string operations instead of a dozen nested replace() and thirty
    instr() scans in SQL.
    """
    if not text:
        return 0
    if _DIGIT.search(text):
        return 1
    return 0 if _NUMBER_WORDS.isdisjoint(text.lower().translate(_BREAKS).split()) else 2




def _recall_row(row: str) -> str:
    """SQL for a `recall_entries` row of an entries row: its ranking fields and text signals.

    Signals: UTF-8 size, first-person words (" I ", " I'", " my ", " me ", a
    leading "I"), second-person words ("you", "You", which also count "your")
    and `numerals`: 1 if the text holds a digit, else 2 if it holds a
    cardinal number word from two up ("two weeks", "five days"), else 0 (the
    words are looked for only without a digit: long texts mostly hold one).
    "one" is left out: it is more often a pronoun ("the one I bought") than a
    count.
    """
    content = f"{row}.content"

    def count(needle: str, size: int) -> str:
        return f"(octet_length({content}) - octet_length(replace({content}, '{needle}', ''))) / {size}"

    first = " + ".join(count(n, k) for n, k in ((" I ", 3), (" I''", 3), (" my ", 4), (" me ", 4)))
    first += f" + (substr({content}, 1, 2) IN ('I ', 'I'''))"  # a text that opens with "I"
    second = " + ".join(count(n, 3) for n in ("you", "You"))
    return (
        f"{row}.id, {row}.tenant_id, {row}.type, {row}.conversation_id, {row}.valid_from, {row}.valid_to, "
        f"octet_length({content}), {first}, {second}, arbiter_numerals({content})"
    )


def _m010_tenant_fts(conn: apsw.Connection) -> None:
    """One FTS index per tenant (store/fts.py): ranking statistics become the tenant's own."""
    conn.execute(
        f"""
        DROP TRIGGER entries_fts_insert;
        DROP TRIGGER entries_fts_delete;
        DROP TRIGGER entries_fts_update;
        DROP TABLE entries_fts_vocab;
        DROP TABLE entries_fts;
        DROP VIEW entries_fts_rows;
        CREATE TRIGGER recall_entries_insert AFTER INSERT ON entries BEGIN
            INSERT INTO recall_entries VALUES ({_recall_row("new")});
        END;
        CREATE TRIGGER recall_entries_delete AFTER DELETE ON entries BEGIN
            DELETE FROM recall_entries WHERE entry_id = old.id;
        END;
        """
    )
    for (tenant_id,) in conn.execute("SELECT id FROM tenants ORDER BY id").fetchall():
        _m010_index(conn, tenant_id)


def _m010_index(conn: apsw.Connection, n: int) -> None:
    """A tenant's index as m010 made it (m015 turns it into its first user's scope index)."""
    t = f"entries_fts_{int(n)}"
    cols = "title, content, tags, source, scope"

    def columns(row: str) -> str:
        where = f"CASE WHEN {row}.conversation_id IS NULL THEN 'u' || {row}.tenant_id ELSE 'c' || {row}.conversation_id END"
        return f"{row}.title, {row}.content, {row}.tags, {row}.source, {where}"

    conn.execute(
        f"""
        CREATE VIEW {t}_rows AS SELECT id, {columns("entries")} AS scope FROM entries WHERE tenant_id = {n};
        CREATE VIRTUAL TABLE {t} USING fts5(
            {cols}, content='{t}_rows', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE {t}_vocab USING fts5vocab({t}, row);
        CREATE TRIGGER {t}_insert AFTER INSERT ON entries WHEN new.tenant_id = {n} BEGIN
            INSERT INTO {t}(rowid, {cols}) VALUES (new.id, {columns("new")});
        END;
        CREATE TRIGGER {t}_delete AFTER DELETE ON entries WHEN old.tenant_id = {n} BEGIN
            INSERT INTO {t}({t}, rowid, {cols}) VALUES ('delete', old.id, {columns("old")});
        END;
        CREATE TRIGGER {t}_update AFTER UPDATE OF title, content, tags, source, conversation_id ON entries
        WHEN new.tenant_id = {n} BEGIN
            INSERT INTO {t}({t}, rowid, {cols}) VALUES ('delete', old.id, {columns("old")});
            INSERT INTO {t}(rowid, {cols}) VALUES (new.id, {columns("new")});
        END;
        INSERT INTO {t}({t}, rank) VALUES ('hashsize', 16777216);
        INSERT INTO {t}({t}, rank) VALUES ('automerge', 16);
        INSERT INTO {t}({t}) VALUES ('rebuild');
        """
    )


def _m015_users_teams(conn: apsw.Connection) -> None:
    """Users, teams and visibility scopes (store/users.py); each tenant's index becomes its first user's.

    A tenant's first user takes the tenant's id, name and token, and their
    private scope the tenant's id too, so the index `entries_fts_<tenant>`
    keeps its rows and only its view and triggers change (from tenant to
    scope). Every existing entry is that user's, private.
    """
    conn.execute(
        """
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
    )
    tenant_ids = [r[0] for r in conn.execute("SELECT id FROM tenants ORDER BY id")]
    for n in tenant_ids:
        t = f"entries_fts_{int(n)}"
        conn.execute(
            f"DROP TRIGGER {t}_insert; DROP TRIGGER {t}_delete; DROP TRIGGER {t}_update; "
            f"DROP TABLE {t}_vocab; DROP VIEW {t}_rows;"
        )
    conn.execute("UPDATE entries SET author_id = tenant_id, scope_id = tenant_id")
    for n in tenant_ids:
        fts.attach(conn, n, shared=False, deferrable=False)  # as m015 shipped: m020 makes them deferrable


def _m020_deferred_index(conn: apsw.Connection) -> None:
    """`deferred_scopes`, and the insert triggers of every scope's index and of the tag graph reading it (store/deferred.py)."""
    conn.execute(
        f"""
        CREATE TABLE deferred_scopes(scope_id INTEGER PRIMARY KEY);
        DROP TRIGGER entries_tags_insert;
        CREATE TRIGGER entries_tags_insert AFTER INSERT ON entries
        WHEN new.valid_to IS NULL AND new.tags != '[]'
            AND NOT EXISTS (SELECT 1 FROM deferred_scopes WHERE scope_id = new.scope_id)
        BEGIN{_TAG_SCOPED.replace("{when}", "true")}
        END;
        """
    )
    for scope_id, team_id in conn.execute("SELECT id, team_id FROM scopes ORDER BY id").fetchall():
        conn.execute(f"DROP TRIGGER {fts.table(scope_id)}_insert")
        conn.execute(fts.insert_trigger(scope_id, shared=team_id is not None))


# The stored text compressed (m023, store/text.py): `content` becomes a VIRTUAL
# generated column over `content_z`, in `entries` and `entry_revisions`, so no
# reader changes. SQLite cannot turn a column into a generated one, and cannot
# drop a column a view or trigger names: those are dropped and made again from
# their own SQL, with `content_z` for `content` where a write must name what is
# stored (an UPDATE OF list: SQLite fires it on the columns a statement sets,
# and writers set `content_z`).
_UPDATE_OF = re.compile(r"UPDATE OF ([^)]*?) ON", re.IGNORECASE | re.DOTALL)
_CONTENT = re.compile(r"\bcontent\b")
_READS_TEXT = re.compile(r"\bFROM (entries|entry_revisions)\b", re.IGNORECASE)

#: The generated column's definition (m023). `content_z` is NOT NULL with an empty default, which
#: arbiter_text refuses, so a write that leaves it out fails in the insert triggers that read `content`.
CONTENT_COLUMN = "content TEXT GENERATED ALWAYS AS (arbiter_text(content_z)) VIRTUAL"

def _revision_triggers(recorded: tuple[str, ...]) -> dict[str, str]:
    """The two triggers that keep record time (m007's, remade by m023 and m024), for the `recorded` columns.

    `entries_revision_unstamped` refuses a change to any of them that does not
    stamp `revised_at`; `entries_revision` files the replaced state. The past
    text is filed as it is stored: the blob, not unpacked and packed again.
    """
    changed = " OR ".join(f"new.{c} IS NOT old.{c}" for c in recorded)
    return {
        "entries_revision_unstamped": f"""
    CREATE TRIGGER entries_revision_unstamped
    BEFORE UPDATE OF {", ".join(recorded)} ON entries
    WHEN new.revised_at IS old.revised_at AND ({changed}) BEGIN
        SELECT RAISE(ABORT, 'a change to an entry must stamp revised_at (its record time)');
    END
    """,
        "entries_revision": f"""
    CREATE TRIGGER entries_revision AFTER UPDATE OF revised_at ON entries
    WHEN new.revised_at IS NOT old.revised_at BEGIN
        INSERT INTO entry_revisions(entry_id, tenant_id, conversation_id, recorded_from, recorded_to,
                                    {", ".join(recorded)})
        VALUES (old.id, old.tenant_id, old.conversation_id, coalesce(old.revised_at, old.recorded_at),
                new.revised_at, {", ".join(f"old.{c}" for c in recorded)});
    END
    """,
    }


_REVISION_TRIGGERS = _revision_triggers(("type", "title", "content_z", "tags", "source", "valid_from", "valid_to"))


def _m023_compressed_text(conn: apsw.Connection) -> None:
    """`content` as `arbiter_text(content_z)` in entries and entry_revisions; the views and triggers naming it remade."""
    naming = [
        (kind, name, sql)
        for kind, name, table, sql in conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE type IN ('view', 'trigger') ORDER BY rowid"
        ).fetchall()
        if _CONTENT.search(sql) and (table in ("entries", "entry_revisions") or _READS_TEXT.search(sql))
    ]
    for kind, name, _ in naming:
        conn.execute(f"DROP {kind.upper()} {name}")
    for table in ("entries", "entry_revisions"):
        conn.execute(
            f"""
            ALTER TABLE {table} ADD COLUMN content_z BLOB NOT NULL DEFAULT x'';
            UPDATE {table} SET content_z = arbiter_pack(content);
            ALTER TABLE {table} DROP COLUMN content;
            ALTER TABLE {table} ADD COLUMN {CONTENT_COLUMN};
            """
        )
    for _, name, sql in naming:  # in their old order (triggers on one event fire in an order set by it)
        sql = _REVISION_TRIGGERS.get(name) or _UPDATE_OF.sub(
            lambda m: f"UPDATE OF {_CONTENT.sub('content_z', m.group(1))} ON", sql
        )
        conn.execute(sql)


# Revisions keep the speaker (m024): `update` can correct who said an entry,
# so a past state needs its own. Until now it could not change, so every
# revision's speaker is its entry's. The revision triggers are m023's with
# `speaker` among the recorded columns.
def _m024_revision_speaker(conn: apsw.Connection) -> None:
    conn.execute(
        """
        ALTER TABLE entry_revisions ADD COLUMN speaker TEXT;
        UPDATE entry_revisions SET speaker = (SELECT e.speaker FROM entries e WHERE e.id = entry_revisions.entry_id);
        DROP TRIGGER entries_revision_unstamped;
        DROP TRIGGER entries_revision;
        """
    )
    recorded = ("type", "title", "content_z", "tags", "source", "speaker", "valid_from", "valid_to")
    for sql in _revision_triggers(recorded).values():
        conn.execute(sql)


# Migrations after which an existing file is rebuilt with VACUUM (a new one has nothing to compact).
# m023 rewrites every entries row: the rows shrink in place, leaving their
# pages part empty (none free, so idle upkeep's incremental vacuum cannot
# give them back): on bench.load's 250K file the migration alone took it from
# 2.23x to 2.83x of its text, the VACUUM after it to 1.74x (the two 17.2 s;
# docs/benchmarks.md, "Size"). While it runs it needs free disk for a
# temporary copy of the compacted file (in SQLite's temporary directory:
# SQLITE_TMPDIR, else /var/tmp or /tmp) and as much again for the WAL it
# copies back through, next to the file. The migration leaves a mark in `settings` in its
# own transaction, so a VACUUM the disk cannot hold (or a crash before it) is
# tried again at the next start instead of being forgotten or stopping one.
_VACUUM_AFTER = {"m023_compressed_text"}
_VACUUM_PENDING = "vacuum_pending"


# Ordered, named, append-only. Each runs in its own transaction and is recorded
# in schema_version; never edit a step that has shipped, add a new one. A step
# is SQL, or a function of the connection when it depends on the rows (m010
# makes a table per tenant).

def _m027_derive_queue(conn: apsw.Connection) -> None:
    """One queue of what is derived from entries in Python, filled by the entries triggers.

    Before it, `remember` derived in the verb, `remember_many` queued its
    entries in `entity_backlog`, the idle writer caught associations up past a
    watermark (settings `associations_through`), and an import did neither: its
    entries had no duplicate keys (they get their fingerprints here). Now an insert
    writes the fingerprint and queues the `sketch`, `entities` and
    `associations` derivers; a change of title, text or speaker swaps the keys
    and queues the first two again; a delete takes its keys and queue rows.
    Frozen: the SQL functions are the ones `connect` registers
    (arbiter/duplicates.py).
    """
    through = conn.execute("SELECT value FROM settings WHERE key = 'associations_through'").fetchone()
    conn.execute("""
        CREATE TABLE derive_queue(
            deriver TEXT NOT NULL,
            entry_id INTEGER NOT NULL,
            tenant_id INTEGER NOT NULL,
            PRIMARY KEY (deriver, entry_id)
        ) WITHOUT ROWID;
        INSERT INTO derive_queue(deriver, entry_id, tenant_id)
            SELECT 'entities', entry_id, tenant_id FROM entity_backlog
            UNION ALL SELECT 'sketch', entry_id, tenant_id FROM entity_backlog;
        DROP TABLE entity_backlog;
        INSERT OR IGNORE INTO entry_sketches(tenant_id, key, entry_id)
            SELECT tenant_id, arbiter_fingerprint(content), id FROM entries;
        DELETE FROM settings WHERE key = 'associations_through';
        CREATE TRIGGER entries_derive_insert AFTER INSERT ON entries BEGIN
            INSERT OR IGNORE INTO entry_sketches(tenant_id, key, entry_id)
                VALUES (new.tenant_id, arbiter_fingerprint(new.content), new.id);
            INSERT INTO derive_queue(deriver, entry_id, tenant_id)
                VALUES ('entities', new.id, new.tenant_id), ('sketch', new.id, new.tenant_id),
                       ('associations', new.id, new.tenant_id);
        END;
        CREATE TRIGGER entries_derive_update AFTER UPDATE OF title, content_z, speaker ON entries BEGIN
            DELETE FROM entry_sketches WHERE tenant_id = old.tenant_id AND entry_id = old.id
                AND key IN (SELECT value FROM json_each(arbiter_sketch_keys(old.content)));
            INSERT OR IGNORE INTO entry_sketches(tenant_id, key, entry_id)
                VALUES (new.tenant_id, arbiter_fingerprint(new.content), new.id);
            INSERT OR IGNORE INTO derive_queue(deriver, entry_id, tenant_id)
                VALUES ('entities', new.id, new.tenant_id), ('sketch', new.id, new.tenant_id);
        END;
        CREATE TRIGGER entries_derive_delete AFTER DELETE ON entries BEGIN
            DELETE FROM entry_sketches WHERE tenant_id = old.tenant_id AND entry_id = old.id
                AND key IN (SELECT value FROM json_each(arbiter_sketch_keys(old.content)));
            DELETE FROM derive_queue WHERE deriver IN ('entities', 'sketch', 'associations') AND entry_id = old.id;
        END;
    """)
    conn.execute(
        "INSERT INTO derive_queue(deriver, entry_id, tenant_id) SELECT 'associations', id, tenant_id FROM entries "
        "WHERE id > ?", (int(through[0]) if through else 0,))

MIGRATIONS: list[tuple[str, str | Callable[[apsw.Connection], None]]] = [
    (
        "m001_initial",
        f"""
        CREATE TABLE tenants(
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            token_hash BLOB NOT NULL UNIQUE,
            created_at INTEGER NOT NULL
        );
        CREATE TABLE conversations(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            title TEXT NOT NULL,
            created_at INTEGER NOT NULL
        );
        CREATE INDEX conversations_tenant ON conversations(tenant_id, id);
        -- AUTOINCREMENT: a purged id is never handed to a new entry, so an old
        -- `#ID` reference can go dangling but never points at something else.
        CREATE TABLE entries(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            type TEXT NOT NULL CHECK (type IN {ENTRY_TYPES_SQL}),
            title TEXT NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '[]',
            source TEXT,
            conversation_id INTEGER REFERENCES conversations(id),
            parent_id INTEGER REFERENCES entries(id) ON DELETE SET NULL,
            content_hash BLOB NOT NULL,
            recorded_at INTEGER NOT NULL,
            valid_from INTEGER NOT NULL,
            valid_to INTEGER
        );
        CREATE INDEX entries_tenant ON entries(tenant_id, id);
        CREATE INDEX entries_conversation ON entries(conversation_id) WHERE conversation_id IS NOT NULL;
        CREATE INDEX entries_parent ON entries(parent_id) WHERE parent_id IS NOT NULL;
        CREATE TABLE relations(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            source_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            target_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            relation TEXT NOT NULL CHECK (relation IN {RELATION_TYPES_SQL}),
            created_at INTEGER NOT NULL,
            CHECK (source_id != target_id),
            UNIQUE (source_id, target_id, relation)
        );
        CREATE INDEX relations_target ON relations(target_id, relation);
        CREATE TABLE settings(key TEXT PRIMARY KEY, value BLOB NOT NULL);
        """,
    ),
    (
        "m002_fts_entries",
        """
        CREATE VIRTUAL TABLE entries_fts USING fts5(
            title, content, tags, source,
            content='entries', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER entries_fts_insert AFTER INSERT ON entries BEGIN
            INSERT INTO entries_fts(rowid, title, content, tags, source)
            VALUES (new.id, new.title, new.content, new.tags, new.source);
        END;
        CREATE TRIGGER entries_fts_delete AFTER DELETE ON entries BEGIN
            INSERT INTO entries_fts(entries_fts, rowid, title, content, tags, source)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source);
        END;
        CREATE TRIGGER entries_fts_update AFTER UPDATE OF title, content, tags, source ON entries BEGIN
            INSERT INTO entries_fts(entries_fts, rowid, title, content, tags, source)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source);
            INSERT INTO entries_fts(rowid, title, content, tags, source)
            VALUES (new.id, new.title, new.content, new.tags, new.source);
        END;
        """,
    ),
    (
        # The tag graph (graph/tags.py): one row per tag of each active entry, and
        # per-tenant tag and tag-pair counts kept by triggers, so co-occurrence and
        # the briefing read a few hundred rows instead of self-joining every tag.
        # `tag_graph_version` bumps on every change: the cluster memo's key.
        # Plus covering indexes for the briefing's totals and threads, and the
        # topic-cluster name cache (graph/clusters.py).
        "m003_tag_graph",
        f"""
        CREATE TABLE entry_tags(
            entry_id INTEGER NOT NULL,
            tenant_id INTEGER NOT NULL,
            tag TEXT NOT NULL,
            PRIMARY KEY (entry_id, tag)
        ) WITHOUT ROWID;
        CREATE INDEX entry_tags_tag ON entry_tags(tenant_id, tag, entry_id);
        CREATE TABLE tag_counts(
            tenant_id INTEGER NOT NULL,
            tag TEXT NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, tag)
        ) WITHOUT ROWID;
        CREATE TABLE tag_pairs(
            tenant_id INTEGER NOT NULL,
            a TEXT NOT NULL,
            b TEXT NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, a, b),
            CHECK (a < b)
        ) WITHOUT ROWID;
        CREATE TABLE tag_graph_version(
            tenant_id INTEGER PRIMARY KEY,
            version INTEGER NOT NULL
        );
        CREATE TRIGGER entries_tags_insert AFTER INSERT ON entries
        WHEN new.valid_to IS NULL AND new.tags != '[]' BEGIN{_tag_entry("true")}
        END;
        CREATE TRIGGER entries_tags_update AFTER UPDATE OF tags, valid_to ON entries
        WHEN old.tags IS NOT new.tags OR old.valid_to IS NOT new.valid_to BEGIN{_UNTAG_ENTRY}{_tag_entry("new.valid_to IS NULL")}
        END;
        CREATE TRIGGER entries_tags_delete AFTER DELETE ON entries BEGIN{_UNTAG_ENTRY}
        END;
        INSERT OR IGNORE INTO entry_tags(entry_id, tenant_id, tag)
            SELECT e.id, e.tenant_id, j.value FROM entries e, json_each(e.tags) j WHERE e.valid_to IS NULL;
        INSERT INTO tag_counts(tenant_id, tag, n) SELECT tenant_id, tag, count(*) FROM entry_tags GROUP BY 1, 2;
        INSERT INTO tag_pairs(tenant_id, a, b, n)
            SELECT x.tenant_id, x.tag, y.tag, count(*)
            FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag GROUP BY 1, 2, 3;
        INSERT INTO tag_graph_version(tenant_id, version) SELECT DISTINCT tenant_id, 1 FROM entry_tags;
        CREATE INDEX entries_tenant_type ON entries(tenant_id, type, valid_to, recorded_at);
        CREATE INDEX entries_thread ON entries(tenant_id, parent_id, valid_to, recorded_at) WHERE parent_id IS NOT NULL;
        CREATE TABLE cluster_names(
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            tags_sha256 BLOB NOT NULL,
            name TEXT NOT NULL,
            description TEXT NOT NULL,
            named_at INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, tags_sha256)
        ) WITHOUT ROWID;
        """,
    ),
    (
        # Recall (arbiter/recall): the FTS index gains a `scope` column holding
        # `t<tenant>` and `c<conversation>` (or `u<tenant>` for unscoped rows), so
        # a conversation pass ANDs its scope into the MATCH and FTS5 seeks to
        # that conversation's rows instead of ranking every tenant-wide match.
        # External content comes from a view, since `scope` is computed. A
        # 16 MiB hash (FTS5's default is 1 MiB) flushes bulk writes in fewer,
        # larger segments: half the ingest time, and fewer segments to search.
        # `entries_fts_vocab` gives document frequencies (idf, term selection).
        # `recall_entries` is a narrow copy of what ranking reads per candidate,
        # so a pass never touches the wide entries rows: visibility, type,
        # conversation, size, and how often the text speaks in the first person
        # ("I", "my") or addresses someone ("you"), counted by SQL at write
        # time (counting at query time costs milliseconds).
        "m004_recall_index",
        f"""
        DROP TRIGGER entries_fts_insert;
        DROP TRIGGER entries_fts_delete;
        DROP TRIGGER entries_fts_update;
        DROP TABLE entries_fts;
        CREATE VIEW entries_fts_rows AS
            SELECT id, title, content, tags, source, {_fts_scope("entries")} AS scope FROM entries;
        CREATE VIRTUAL TABLE entries_fts USING fts5(
            title, content, tags, source, scope,
            content='entries_fts_rows', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE entries_fts_vocab USING fts5vocab(entries_fts, row);
        INSERT INTO entries_fts(entries_fts, rank) VALUES ('hashsize', 16777216);
        CREATE TABLE recall_entries(
            entry_id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            type TEXT NOT NULL,
            conversation_id INTEGER,
            valid_from INTEGER NOT NULL,
            valid_to INTEGER,
            bytes INTEGER NOT NULL,
            self_refs INTEGER NOT NULL,
            other_refs INTEGER NOT NULL,
            numerals INTEGER NOT NULL
        );
        CREATE TRIGGER entries_fts_insert AFTER INSERT ON entries BEGIN
            INSERT INTO entries_fts(rowid, title, content, tags, source, scope)
            VALUES (new.id, new.title, new.content, new.tags, new.source, {_fts_scope("new")});
            INSERT INTO recall_entries VALUES ({_recall_row("new")});
        END;
        CREATE TRIGGER entries_fts_delete AFTER DELETE ON entries BEGIN
            INSERT INTO entries_fts(entries_fts, rowid, title, content, tags, source, scope)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source, {_fts_scope("old")});
            DELETE FROM recall_entries WHERE entry_id = old.id;
        END;
        CREATE TRIGGER entries_fts_update
        AFTER UPDATE OF title, content, tags, source, conversation_id, tenant_id ON entries BEGIN
            INSERT INTO entries_fts(entries_fts, rowid, title, content, tags, source, scope)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source, {_fts_scope("old")});
            INSERT INTO entries_fts(rowid, title, content, tags, source, scope)
            VALUES (new.id, new.title, new.content, new.tags, new.source, {_fts_scope("new")});
        END;
        CREATE TRIGGER recall_entries_update
        AFTER UPDATE OF type, content, conversation_id, tenant_id, valid_from, valid_to ON entries BEGIN
            INSERT OR REPLACE INTO recall_entries VALUES ({_recall_row("new")});
        END;
        INSERT INTO entries_fts(entries_fts) VALUES ('rebuild');
        INSERT INTO recall_entries SELECT {_recall_row("entries")} FROM entries;
        """,
    ),
    (
        # FTS5 merges a level's segments once it holds `automerge` of them
        # (default 4). At 16, bulk ingest merges far less while writing: +20%
        # entries/s at 60K entries (bench/load.py). The daemon's idle compaction
        # (recall.maintain.compact) merges what is left once writes pause.
        "m005_fts_automerge",
        """
        INSERT INTO entries_fts(entries_fts, rank) VALUES ('automerge', 16);
        """,
    ),
    (
        # Entities (arbiter/entities): named things entries mention. Every name
        # an entity answers to (its name, then aliases) is a row of
        # `entity_names` with its case-folded `key` (unique in the tenant) and
        # normalised `norm`; `entity_trigrams` indexes each name's trigrams for
        # the similarity step of resolution. A merge or rename never deletes:
        # the merged entity keeps its row with `merged_into` and `retired_at`,
        # and `entity_events` records what moved. `entry_entities` links
        # entries to what they mention (`how`: given, extracted, speaker,
        # advisor); `entity_relations` are the typed, weighted relations.
        "m006_entities",
        f"""
        CREATE TABLE entities(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            name TEXT NOT NULL,
            type TEXT NOT NULL CHECK (type IN {ENTITY_TYPES_SQL}),
            description TEXT,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            merged_into INTEGER REFERENCES entities(id),
            retired_at INTEGER
        );
        CREATE INDEX entities_tenant ON entities(tenant_id, type) WHERE merged_into IS NULL;
        CREATE TABLE entity_names(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            entity_id INTEGER NOT NULL REFERENCES entities(id),
            name TEXT NOT NULL,
            key TEXT NOT NULL,
            norm TEXT NOT NULL,
            grams INTEGER NOT NULL,
            is_alias INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            UNIQUE (tenant_id, key)
        );
        CREATE INDEX entity_names_norm ON entity_names(tenant_id, norm);
        CREATE INDEX entity_names_entity ON entity_names(entity_id);
        CREATE TABLE entity_trigrams(
            tenant_id INTEGER NOT NULL,
            gram TEXT NOT NULL,
            name_id INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, gram, name_id)
        ) WITHOUT ROWID;
        CREATE TABLE entry_entities(
            entry_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            entity_id INTEGER NOT NULL REFERENCES entities(id),
            tenant_id INTEGER NOT NULL,
            how TEXT NOT NULL CHECK (how IN ('given', 'extracted', 'speaker', 'advisor')),
            PRIMARY KEY (entry_id, entity_id)
        ) WITHOUT ROWID;
        CREATE INDEX entry_entities_entity ON entry_entities(entity_id, entry_id);
        CREATE TABLE entity_relations(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            source_id INTEGER NOT NULL REFERENCES entities(id),
            relation TEXT NOT NULL CHECK (relation IN {ENTITY_RELATIONS_SQL}),
            target_id INTEGER NOT NULL REFERENCES entities(id),
            weight REAL NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            CHECK (source_id != target_id),
            UNIQUE (source_id, target_id, relation)
        );
        CREATE INDEX entity_relations_target ON entity_relations(target_id);
        CREATE TABLE entity_events(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            entity_id INTEGER NOT NULL REFERENCES entities(id),
            kind TEXT NOT NULL CHECK (kind IN ('merge', 'rename', 'retype')),
            detail TEXT NOT NULL,
            at INTEGER NOT NULL
        );
        CREATE INDEX entity_events_entity ON entity_events(entity_id, at);
        """,
    ),
    (
        # Record time (docs/architecture.md, "Time"). The entries row stays the
        # current state, so the common read path and its indexes cost nothing
        # extra; `revised_at` is when that state was recorded (NULL: as first
        # recorded, at `recorded_at`). A write that changes an entry stamps
        # `revised_at`, and the stamp files the state it replaces in
        # `entry_revisions` with its record window [recorded_from, recorded_to).
        # A change that forgets the stamp is refused, so no code path can
        # rewrite history silently. Purge deletes the revisions with the entry.
        # `entry_revisions_fts` indexes past text alone (same columns and
        # tokenizer as entries_fts), for recall with `known_at`.
        "m007_entry_revisions",
        f"""
        ALTER TABLE entries ADD COLUMN revised_at INTEGER;
        CREATE TABLE entry_revisions(
            id INTEGER PRIMARY KEY,
            entry_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            tenant_id INTEGER NOT NULL,
            conversation_id INTEGER,
            recorded_from INTEGER NOT NULL,
            recorded_to INTEGER NOT NULL,
            type TEXT NOT NULL,
            title TEXT NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL,
            source TEXT,
            valid_from INTEGER NOT NULL,
            valid_to INTEGER,
            CHECK (recorded_from < recorded_to)
        );
        CREATE UNIQUE INDEX entry_revisions_entry ON entry_revisions(entry_id, recorded_to);
        CREATE INDEX entry_revisions_tenant ON entry_revisions(tenant_id, recorded_from);
        CREATE TRIGGER entries_revision_unstamped
        BEFORE UPDATE OF type, title, content, tags, source, valid_from, valid_to ON entries
        WHEN new.revised_at IS old.revised_at AND (
            new.type IS NOT old.type OR new.title IS NOT old.title OR new.content IS NOT old.content
            OR new.tags IS NOT old.tags OR new.source IS NOT old.source
            OR new.valid_from IS NOT old.valid_from OR new.valid_to IS NOT old.valid_to
        ) BEGIN
            SELECT RAISE(ABORT, 'a change to an entry must stamp revised_at (its record time)');
        END;
        CREATE TRIGGER entries_revision AFTER UPDATE OF revised_at ON entries
        WHEN new.revised_at IS NOT old.revised_at BEGIN
            INSERT INTO entry_revisions(entry_id, tenant_id, conversation_id, recorded_from, recorded_to,
                                        type, title, content, tags, source, valid_from, valid_to)
            VALUES (old.id, old.tenant_id, old.conversation_id, coalesce(old.revised_at, old.recorded_at),
                    new.revised_at, old.type, old.title, old.content, old.tags, old.source,
                    old.valid_from, old.valid_to);
        END;
        CREATE VIEW entry_revisions_fts_rows AS
            SELECT id, title, content, tags, source, {_fts_scope("entry_revisions")} AS scope FROM entry_revisions;
        CREATE VIRTUAL TABLE entry_revisions_fts USING fts5(
            title, content, tags, source, scope,
            content='entry_revisions_fts_rows', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER entry_revisions_fts_insert AFTER INSERT ON entry_revisions BEGIN
            INSERT INTO entry_revisions_fts(rowid, title, content, tags, source, scope)
            VALUES (new.id, new.title, new.content, new.tags, new.source, {_fts_scope("new")});
        END;
        CREATE TRIGGER entry_revisions_fts_delete AFTER DELETE ON entry_revisions BEGIN
            INSERT INTO entry_revisions_fts(entry_revisions_fts, rowid, title, content, tags, source, scope)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source, {_fts_scope("old")});
        END;
        """,
    ),
    (
        # Imports (arbiter/transfer): one row per (tenant, file sha256), so
        # re-importing a file is a no-op that says so, and an interrupted
        # import resumes after its last committed batch. `import_ids` maps the
        # file's ids to the new ones while the import runs (dropped when it
        # finishes): conversations 'c', entries 'e', entities 'n'.
        "m008_imports",
        """
        CREATE TABLE imports(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            digest BLOB NOT NULL,
            source TEXT NOT NULL,
            lines INTEGER NOT NULL,
            lines_done INTEGER NOT NULL,
            started_at INTEGER NOT NULL,
            finished_at INTEGER,
            UNIQUE (tenant_id, digest)
        );
        CREATE TABLE import_ids(
            import_id INTEGER NOT NULL REFERENCES imports(id) ON DELETE CASCADE,
            kind TEXT NOT NULL CHECK (kind IN ('c', 'e', 'n')),
            old_id INTEGER NOT NULL,
            new_id INTEGER NOT NULL,
            PRIMARY KEY (import_id, kind, old_id)
        ) WITHOUT ROWID;
        """,
    ),
    # Facts behind the evaluation gate (arbiter/facts): predicates, patch
    # batches, facts with their revisions (record time), sources, aspects and
    # the facts' FTS index for recall. The gate's triggers live here too.
    ("m009_facts", FACTS_SQL),
    # Tenant-private ranking statistics: the one index over every tenant
    # becomes one per tenant (store/fts.py, created with the tenant).
    ("m010_tenant_fts", _m010_tenant_fts),
    (
        # Salience, the access log, duplicates, maintenance, entity clusters
        # (arbiter/salience.py, duplicates.py, maintenance.py, entities/clusters.py).
        # `entry_salience` holds a row only for an entry that departs from the
        # defaults (given a salience, permanent, reinforced or read).
        # `entry_sketches` holds each entry's content fingerprint and MinHash
        # band keys. `entry_retirements` records why maintenance retired an
        # entry, so it can be restored. `maintenance_runs` keeps each run's report.
        # `entity_backlog` queues bulk-written entries for extraction after the answer.
        "m011_salience_maintenance",
        """
        CREATE TABLE entry_salience(
            entry_id INTEGER PRIMARY KEY REFERENCES entries(id) ON DELETE CASCADE,
            tenant_id INTEGER NOT NULL,
            initial REAL NOT NULL DEFAULT 0.5 CHECK (initial BETWEEN 0 AND 1),
            decay_rate REAL NOT NULL DEFAULT 0.01 CHECK (decay_rate >= 0),
            permanent INTEGER NOT NULL DEFAULT 0,
            accesses INTEGER NOT NULL DEFAULT 0,
            last_access INTEGER,
            reinforcements INTEGER NOT NULL DEFAULT 0,
            salience REAL,
            computed_at INTEGER
        );
        CREATE TABLE access_log(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            entry_id INTEGER NOT NULL,
            verb TEXT NOT NULL,
            at INTEGER NOT NULL
        );
        CREATE INDEX access_log_at ON access_log(at);
        CREATE TABLE entry_sketches(
            tenant_id INTEGER NOT NULL,
            key INTEGER NOT NULL,
            entry_id INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, key, entry_id)
        ) WITHOUT ROWID;
        CREATE TABLE entry_retirements(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            entry_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            reason TEXT NOT NULL,
            salience REAL NOT NULL,
            at INTEGER NOT NULL
        );
        CREATE INDEX entry_retirements_entry ON entry_retirements(entry_id);
        CREATE TABLE maintenance_runs(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            at INTEGER NOT NULL,
            report TEXT NOT NULL
        );
        CREATE INDEX maintenance_runs_tenant ON maintenance_runs(tenant_id, at);
        CREATE TABLE entity_clusters(
            entity_id INTEGER PRIMARY KEY REFERENCES entities(id),
            tenant_id INTEGER NOT NULL,
            cluster INTEGER NOT NULL
        );
        CREATE INDEX entity_clusters_cluster ON entity_clusters(tenant_id, cluster);
        CREATE TABLE entity_backlog(
            entry_id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL
        );
        """,
    ),
    (
        # The association graph (arbiter/associations): stored similarity edges
        # (a < b, one row a pair; deleted with either entry), an index for the
        # temporal proximity neighbours (entries near a `valid_from`), and
        # `causes` in the relation vocabulary so a confirmed causal candidate can
        # be said (SQLite cannot alter a CHECK: the table is rebuilt as is).
        "m012_associations",
        f"""
        CREATE TABLE associations(
            tenant_id INTEGER NOT NULL,
            a INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            b INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            weight REAL NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (a, b),
            CHECK (a < b)
        ) WITHOUT ROWID;
        CREATE INDEX associations_b ON associations(b);
        CREATE INDEX entries_time ON entries(tenant_id, valid_from);
        CREATE TABLE relations_m012(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            source_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            target_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            relation TEXT NOT NULL CHECK (relation IN {RELATION_TYPES_M012_SQL}),
            created_at INTEGER NOT NULL,
            CHECK (source_id != target_id),
            UNIQUE (source_id, target_id, relation)
        );
        INSERT INTO relations_m012 SELECT id, tenant_id, source_id, target_id, relation, created_at FROM relations;
        DROP TABLE relations;
        ALTER TABLE relations_m012 RENAME TO relations;
        CREATE INDEX relations_target ON relations(target_id, relation);
        """,
    ),
    (
        # Who said an entry, as a field rather than a guess from its pronouns:
        # a name ("Caroline") or a role ("user", "assistant"). Recall matches
        # names in a query to it; it is never searched as text. It is not
        # revised (no verb changes it), so past states read the current one.
        "m013_entries_speaker",
        """
        ALTER TABLE entries ADD COLUMN speaker TEXT;
        """,
    ),
    (
        # Recall's reply lookup (`recall._sql.neighbours`: the turns before and
        # after a candidate, by valid time within its conversation) seeks
        # instead of scanning every row of `recall_entries`.
        "m014_recall_replies_index",
        """
        CREATE INDEX recall_entries_conversation ON recall_entries(conversation_id, valid_from, entry_id)
            WHERE conversation_id IS NOT NULL;
        """,
    ),
    # Users, teams and visibility (store/users.py): who wrote each entry and who may see it.
    ("m015_users_teams", _m015_users_teams),
    # The tag graph and cluster-name cache per visibility scope (graph/tags.py):
    # a viewer adds up the scopes they see, so no count tells of an entry they
    # cannot see. `cluster_names` gains `scopes`: the scopes whose titles made
    # the name, so a name is shown only to whoever sees all of them.
    ("m016_tag_scopes", M016_TAG_SCOPES),
    # Facts get an author and a scope like entries (facts/schema.py): reads show what the caller sees.
    ("m017_fact_scopes", FACT_SCOPES_SQL),
    # Imports carry facts (transfer/facts.py): the id map gains fact batches 'b' and facts 'f'.
    (
        "m018_import_fact_ids",
        """
        CREATE TABLE import_ids_m018(
            import_id INTEGER NOT NULL REFERENCES imports(id) ON DELETE CASCADE,
            kind TEXT NOT NULL CHECK (kind IN ('c', 'e', 'n', 'b', 'f')),
            old_id INTEGER NOT NULL,
            new_id INTEGER NOT NULL,
            PRIMARY KEY (import_id, kind, old_id)
        ) WITHOUT ROWID;
        INSERT INTO import_ids_m018 SELECT import_id, kind, old_id, new_id FROM import_ids;
        DROP TABLE import_ids;
        ALTER TABLE import_ids_m018 RENAME TO import_ids;
        """,
    ),
    (
        # Mnemon's causal sub-types as a qualifier of `causes` (store/relations.py): null is a direct
        # cause; `enables` an enabling condition, `prevents` a preventing factor. No other relation
        # takes one. A column, not two more relation types: they are the same edge for every reader
        # that does not ask (graph recall walks them as causal, one causal link per pair).
        "m019_relation_qualifier",
        """
        ALTER TABLE relations ADD COLUMN qualifier TEXT
            CHECK (qualifier IS NULL OR (relation = 'causes' AND qualifier IN ('enables', 'prevents')));
        """,
    ),
    # An import indexes its entries after writing them, one statement per scope, instead of a trigger per row
    # (store/deferred.py): the insert triggers of the scopes' indexes and of the tag graph can stand aside.
    ("m020_deferred_index", _m020_deferred_index),
    (
        # An entry's `content_hash` is computed when read (store/entries.py),
        # not stored: it is only ever shown, never searched, and sha256 of a
        # typical entry costs ~1 us while the column was 33 bytes a row, 0.06x
        # of the text (docs/benchmarks.md, "Size"). Duplicates have their own
        # fingerprints (entry_sketches). An existing file's pages shrink in
        # place; the file itself only after a VACUUM.
        "m021_entries_drop_content_hash",
        """
        ALTER TABLE entries DROP COLUMN content_hash;
        """,
    ),
    # The tag graph keeps one entry_tags B-tree, keyed by (scope, tag, entry): see M022_ENTRY_TAGS_ONE_TABLE.
    ("m022_entry_tags_one_table", M022_ENTRY_TAGS_ONE_TABLE),
    # The stored text compressed, read through generated columns: see _m023_compressed_text and store/text.py.
    ("m023_compressed_text", _m023_compressed_text),
    # Revisions keep the speaker, which `update` can now correct: see _m024_revision_speaker.
    ("m024_revision_speaker", _m024_revision_speaker),
    (
        # Which of the entity's names an entry's link came through (arbiter/entities/visibility.py, names_sql): in a
        # tenant of several users an alias shows only to who sees an entry that named the entity so. Links made
        # before it carry none, so their aliases show only to a whole-tenant viewer until named again.
        "m025_entry_entities_name",
        """
        ALTER TABLE entry_entities ADD COLUMN name_id INTEGER;
        """,
    ),
    (
        # A link made before m025 records no name, so in a shared tenant its alias showed to nobody but a
        # whole-tenant viewer, the user who wrote it included. Give it the alias its entry's text writes: whoever
        # sees that entry reads the spelling in it anyway, so this shows an alias to no one who could not read it.
        # (ASCII case folding only: a spelling it misses stays hidden, never shown to the wrong user.)
        "m026_entry_entities_name_backfill",
        """
        UPDATE entry_entities SET name_id = (
            SELECT n.id FROM entity_names n, entries e
            WHERE n.entity_id = entry_entities.entity_id AND n.is_alias = 1 AND e.id = entry_entities.entry_id
              AND instr(lower(e.title || char(10) || e.content), lower(n.name)) > 0
            ORDER BY n.id LIMIT 1)
        WHERE name_id IS NULL
          AND entity_id IN (SELECT entity_id FROM entity_names WHERE is_alias = 1);
        """,
    ),
    # Everything derived from an entry is kept by the triggers on `entries`, whoever writes it
    # (arbiter/derive.py): see _m027_derive_queue.
    ("m027_derive_queue", _m027_derive_queue),
]


#: Page size of a new database file (bytes).
PAGE_SIZE = 8192


def connect(
    path: str | os.PathLike,
    *,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    synchronous: Synchronous = "FULL",
    readonly: bool = False,
) -> apsw.Connection:
    """Open a connection with Arbiter's settings.

    `synchronous=FULL` (the default) makes every acknowledged write survive a
    power cut; NORMAL is faster per commit but the last transactions before an
    OS crash may roll back (never corrupt). A daemon `kill -9` is safe either way.
    """
    flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    if readonly:
        flags = apsw.SQLITE_OPEN_READONLY
    conn = apsw.Connection(str(path), flags=flags)
    conn.set_busy_timeout(busy_timeout_ms)
    if not readonly and conn.pragma("page_count") == 0:
        # A new file: both settings are fixed once the first table exists.
        # 8 KiB pages leave less unused space in each page; incremental
        # auto-vacuum lets idle upkeep give back the pages that index merging
        # frees (recall.maintain.compact). docs/benchmarks.md has the sizes.
        conn.pragma("page_size", PAGE_SIZE)
        conn.pragma("auto_vacuum", "INCREMENTAL")
    # apsw.bestpractice's connection settings, spelled out: importing that
    # module pulls in apsw.ext, 4.4 MB of daemon RSS for four pragmas.
    if not readonly:
        conn.pragma("journal_mode", "wal")
        conn.pragma("journal_size_limit", JOURNAL_SIZE_LIMIT)
    conn.pragma("foreign_keys", "ON")
    conn.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)  # double quotes are identifiers, never strings
    conn.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)
    conn.pragma("recursive_triggers", "ON")
    conn.pragma("synchronous", synchronous)
    # Used by the recall_entries triggers (m004), so every connection that may write needs it.
    conn.create_scalar_function("arbiter_numerals", numerals, 1, deterministic=True)
    # What the generated `content` columns read (m023): every connection that reads an entry's text needs it.
    text.register(conn)
    from arbiter.salience import sql_salience  # salience imports the model, which needs no store

    conn.create_scalar_function("arbiter_salience", sql_salience, 8, deterministic=True)
    from arbiter import duplicates  # what the entries triggers call (m027); it needs only the store's Viewer

    duplicates.register(conn)
    return conn


def schema_version(conn: apsw.Connection) -> int:
    """The number of migrations applied (0 for a new file)."""
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE name='schema_version'").fetchone()
    if not has:
        return 0
    return conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]


def migrate(conn: apsw.Connection, *, say: Callable[[str], None] = lambda _: None) -> int:
    """Apply pending migrations, each in its own transaction, then any compaction they asked for; return the version.

    `say` hears about the long step (compaction), to pass on to whoever waits.
    """
    current = schema_version(conn)
    if current > len(MIGRATIONS):
        raise SchemaTooNew(
            f"database schema version {current} is newer than this Arbiter knows "
            f"({len(MIGRATIONS)}); upgrade Arbiter to open it"
        )
    with conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version("
            "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
        )
    for version, (name, sql) in enumerate(MIGRATIONS[current:], start=current + 1):
        with conn:
            if callable(sql):
                sql(conn)
            else:
                conn.execute(sql)
            conn.execute(
                "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, now_us()),
            )
            if current and name in _VACUUM_AFTER:
                conn.execute("INSERT OR REPLACE INTO settings(key, value) VALUES (?, 1)", (_VACUUM_PENDING,))
    _compact_if_pending(conn, say)
    return len(MIGRATIONS)


def _compact_if_pending(conn: apsw.Connection, say: Callable[[str], None]) -> None:
    if not conn.execute("SELECT 1 FROM settings WHERE key = ?", (_VACUUM_PENDING,)).fetchone():
        return
    say("arbiter: compacting the database after its upgrade (once; it needs free disk up to twice the size of "
        "the file, half of it in the temporary directory)")
    # A file made before incremental auto-vacuum (connect) gets it in the same rebuild: a VACUUM is the only way
    # to switch it on, and idle upkeep's incremental_vacuum gives back nothing without it. (The page size cannot
    # change in WAL mode.)
    try:
        conn.pragma("auto_vacuum", "INCREMENTAL")
        conn.execute("VACUUM")  # outside any transaction, as VACUUM must be
    except apsw.FullError:
        # The file works as it is, only larger: a full disk must not keep the daemon from starting.
        say("arbiter: too little free disk to compact the database; it works as it is, and the next start tries again")
        return
    with conn:
        conn.execute("DELETE FROM settings WHERE key = ?", (_VACUUM_PENDING,))


def open_database(
    path: str | os.PathLike, *, say: Callable[[str], None] = lambda _: None, **settings
) -> apsw.Connection:
    """Connect and migrate: the writer's way in (`say`: as `migrate`)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        _refuse_foreign(path)
        conn = connect(path, **settings)
    except (apsw.NotADBError, apsw.CantOpenError) as e:  # `serve --db` given a folder or another kind of file
        raise InvalidParams(f"cannot open {path} as a database: {str(e).partition(': ')[2] or e}") \
            from None
    migrate(conn, say=say)
    return conn


def _refuse_foreign(path: str | os.PathLike) -> None:
    """Refuse another program's SQLite file before touching it: connecting turns on WAL, migrating adds our tables."""
    if not Path(path).is_file() or Path(path).stat().st_size == 0:
        return
    probe = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        tables = [r[0] for r in probe.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    finally:
        probe.close()
    if tables and "schema_version" not in tables:
        raise InvalidParams(
            f"{path} is another program's SQLite database (tables: {', '.join(tables[:3])}"
            f"{', ...' if len(tables) > 3 else ''}): Arbiter adds its schema only to a new file or one of its own"
        )
