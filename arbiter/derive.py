"""Everything derived from an entry, and the one way it is kept.

The rule: only the store writes `entries`, and everything derived from an
entry is kept by the triggers on `entries` (created in the migrations), in
the write's own transaction, whoever wrote it (`remember`, a batch, a reply,
`update`, an import, anything later):

- what SQL computes from the row alone the trigger writes itself: each
  scope's full-text rows and `recall_entries`, the revisions, the tag graph;
  an update's and a delete's duplicate keys (`arbiter_sketch_keys`,
  duplicates.py; PostgreSQL's triggers cannot call Python, so there a change
  drops all the entry's keys and the `sketch` deriver writes them again,
  its fingerprint among them);
- what needs more Python than a row's worth the trigger queues in
  `derive_queue`, one row per deriver below: the MinHash band keys of near
  copies, the entities a text names, the stored similarity edges.

On PostgreSQL a trigger cannot tokenize, so the full text is queued like a
deriver's work and indexed by the writing session before its COMMIT
(store/pg/indexing.py): still in the write's own transaction, whoever wrote.

One key is the store's, not a trigger's: a new entry's duplicate fingerprint,
which the store's two INSERTs (`entries.remember`, `entries.insert_rows`)
write with the row from the text they hold, since a batch's duplicate check
must find the entries written just before it (a trigger would decompress the
text to hash it: a bulk write's speed, a quarter of it).

A single `remember`, `reply` or `update` derives its own entry at once
(`written`: its answer names the entities and near copies it found); batches,
imports and the rest wait for the idle writer (`step`), seconds later, and
maintenance drains the urgent ones (`drain`). A feature that derives
something from entries adds a `Deriver` here and a migration whose triggers
queue it; it never writes beside the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import apsw
import msgspec

from arbiter import duplicates
from arbiter.associations import core as associations
from arbiter.entities import core as entity_core
from arbiter.entities.link import extracted_in, link_entry, unlink_speaker
from arbiter.model import LinkCandidate, Mention, RememberParams
from arbiter.store import engine, users
from arbiter.store.users import Viewer


@dataclass(frozen=True)
class Deriver:
    """One concern derived from entries: how many entries an idle step takes, and the work for them."""

    #: Entries one idle step derives: ~0.1-0.3 s of work, so a write queued behind it waits little.
    step: int
    #: Before the idle writer merges the full-text index: what recall and `remember`'s checks read.
    urgent: bool
    #: Derive these (entry id, tenant id) rows in the caller's transaction; an entry purged since is skipped.
    run: Callable[[apsw.Connection, list[tuple[int, int]], int], None]


def _texts(conn: apsw.Connection, rows: list[tuple[int, int]]) -> dict[int, tuple[int, str, str]]:
    """(author, title, content) of the entries still there, of one tenant's (entry id, tenant id) `rows`."""
    return {r[0]: r[1:] for r in conn.execute(
        "SELECT id, author_id, title, content FROM entries WHERE tenant_id = ? "
        f"AND id IN ({','.join('?' * len(rows))})",
        (rows[0][1], *(entry_id for entry_id, _ in rows)))}


def _sketch(conn: apsw.Connection, rows: list[tuple[int, int]], now: int) -> None:
    texts = _texts(conn, rows)
    duplicates.add_many(conn, rows[0][1], [(entry_id, texts[entry_id][2]) for entry_id, _ in rows if entry_id in texts])


def _entities(conn: apsw.Connection, rows: list[tuple[int, int]], now: int) -> None:
    texts = _texts(conn, rows)
    named = {entry_id: extracted_in(*texts[entry_id][1:]) for entry_id, _ in rows if entry_id in texts}
    if not named:
        return
    tenant_id = rows[0][1]
    # Daemons sharing a database create a tenant's entities in turns (`resolve`); a step takes its turn before it
    # reads the names, not at its first new name as `remember` does: what it read then stays true to its end, so
    # a new name costs no second look (after a bulk load nearly every step creates one, and holds the turn from
    # there to its end all the same).
    engine.serialize(conn, engine.ENTITY_NAMES, tenant_id)
    shared = entity_core.Shared(held=True)
    # One linker per writer: resolution sees what the entry's author sees, as `remember` does.
    linkers: dict[int, entity_core.Linker] = {}
    for author in dict.fromkeys(texts[entry_id][0] for entry_id in named):
        linkers[author] = entity_core.Linker(conn, tenant_id, now, users.viewer(conn, tenant_id, author, ""),
                                             shared=shared)
        linkers[author].prepare([(entry_id, n) for entry_id, n in named.items() if texts[entry_id][0] == author])
    for entry_id, n in named.items():  # in the entries' order, whoever wrote them: as each entry was linked alone
        linkers[texts[entry_id][0]].link(entry_id, n)
    shared.flush(conn)


def _associations(conn: apsw.Connection, rows: list[tuple[int, int]], now: int) -> None:
    associations.derive_stored(conn, rows[0][1], [entry_id for entry_id, _ in rows], now=now)


#: In the order the idle writer takes them. The names are the ones the triggers queue (migration m027).
DERIVERS: dict[str, Deriver] = {
    # Extracting and resolving a long text's names costs 0.3-1 ms, several times the rest of a bulk write.
    "entities": Deriver(step=200, urgent=True, run=_entities),
    # A text's band keys: ~50 us; until written, `remember` compares a batch's newest entries directly.
    "sketch": Deriver(step=500, urgent=True, run=_sketch),
    # ~1 ms an entry (bench/associations.py): a write waits for one step at most.
    "associations": Deriver(step=100, urgent=False, run=_associations),
}


def queued(conn: apsw.Connection, tenant_id: int, entry_ids: list[int], names: tuple[str, ...]) -> None:
    """Say these entries' (of `tenant_id`) `names` are derived (their caller did it): out of the queue."""
    # A statement for up to 500 entries, not one a row: a `remember` takes two rows out, and a round trip was
    # most of their cost (an import's thousands stay under both engines' limits on parameters).
    for start in range(0, len(entry_ids), 500):
        chunk = entry_ids[start:start + 500]
        conn.execute(f"DELETE FROM derive_queue WHERE tenant_id = ? AND deriver IN ({','.join('?' * len(names))}) "
                     f"AND entry_id IN ({','.join('?' * len(chunk))})", (tenant_id, *names, *chunk))


def step(conn: apsw.Connection, *, now: int, urgent: bool, tenant_id: int | None = None) -> bool:
    """Derive one step's worth for the first deriver (of the urgent ones, or the others) with work; True if more remains.

    One tenant's rows a step: `tenant_id`'s, else those of the tenant whose entry waits longest. In the
    caller's (writer) transaction. Where several daemons share a PostgreSQL database, each step takes rows no
    other transaction holds (SKIP LOCKED), so two daemons' idle writers split the queue, not repeat it.
    """
    # SQLite has one writer at a time, and no row locks to take.
    taking = " FOR UPDATE SKIP LOCKED" if engine.is_postgresql(conn) else ""
    for name, d in DERIVERS.items():
        if d.urgent != urgent:
            continue
        tenant = tenant_id
        if tenant is None:
            # The one read across tenants (Citus asks every node; nothing is locked): whose turn it is. The rows
            # are then taken from that tenant's alone, so the locking read and the writes stay on its node.
            found = conn.execute("SELECT tenant_id FROM derive_queue WHERE deriver = ? ORDER BY entry_id LIMIT 1",
                                 (name,)).fetchone()
            if found is None:
                continue
            tenant = found[0]
        engine.writing_for(conn, tenant)  # what the step writes is this tenant's: its full text is settled first
        rows = conn.execute(
            "SELECT entry_id, tenant_id FROM derive_queue WHERE tenant_id = ? AND deriver = ? ORDER BY entry_id "
            f"LIMIT ?{taking}",
            (tenant, name, d.step + 1),
        ).fetchall()
        if not rows:
            continue
        taken = rows[:d.step]
        d.run(conn, taken, now)
        queued(conn, tenant, [entry_id for entry_id, _ in taken], (name,))
        return True
    return False


def drain(conn: apsw.Connection, *, now: int, urgent: bool = True, tenant_id: int | None = None) -> int:
    """Empty the queue of the urgent derivers (or of all: urgent=False), of one tenant or all; how many rows it
    held."""
    names = [name for name, d in DERIVERS.items() if d.urgent or not urgent]
    n = pending(conn, tenant_id, names=names)
    while (step(conn, now=now, urgent=True, tenant_id=tenant_id)
           or (not urgent and step(conn, now=now, urgent=False, tenant_id=tenant_id))):
        pass
    return n


def pending(conn: apsw.Connection, tenant_id: int | None = None, *, names=tuple(DERIVERS)) -> int:
    """Queued rows (of one tenant, of the derivers named)."""
    marks = ",".join("?" * len(names))
    if tenant_id is None:
        return conn.execute(f"SELECT count(*) FROM derive_queue WHERE deriver IN ({marks})", list(names)).fetchone()[0]
    return conn.execute(f"SELECT count(*) FROM derive_queue WHERE deriver IN ({marks}) AND tenant_id = ?",
                        (*names, tenant_id)).fetchone()[0]


class Derived(msgspec.Struct, frozen=True):
    """What deriving one written entry at once found, for its answer."""

    entities: list[Mention] = []
    similar: list[int] = []
    candidates: list[LinkCandidate] = []


def written(conn: apsw.Connection, v: Viewer, entry_id: int, p: RememberParams, *, now: int,
            pending: list[tuple[int, str, str]], candidates: bool = False, respoken: bool = False,
            compare: bool = True) -> Derived:
    """Derive one entry `v` just wrote as `p` at once, for the answer; the idle writer does the rest.

    Its entities (the names given, its speaker's, those its text names), its
    band keys and the near copies `v` sees (`pending`: the newest a batch left
    unsketched, compared directly), and with `candidates` its similarity edges
    and link candidates among what `v` sees. `respoken`: an update changed the
    speaker, whose old link goes first. `compare`: look for near copies (a
    reply's and an update's answers name none, so they only write the keys).
    """
    if respoken:
        unlink_speaker(conn, v.tenant_id, entry_id)
    mentioned = link_entry(conn, v.tenant_id, entry_id, p, now=now, v=v)
    if compare:
        similar = duplicates.add_new(conn, v, entry_id, p.content, pending=pending)
    else:
        similar = []
        duplicates.add(conn, v.tenant_id, entry_id, p.content)
    queued(conn, v.tenant_id, [entry_id], ("entities", "sketch"))
    found = link_candidates(conn, v, entry_id, now=now) if candidates else []
    return Derived(entities=mentioned, similar=similar, candidates=found)


def link_candidates(conn: apsw.Connection, v: Viewer, entry_id: int, *, now: int) -> list[LinkCandidate]:
    """An entry's link candidates among what `v` sees; finding them derives its similarity edges on the way.

    After its entities: the entity edges and causal candidates read its links.
    """
    found = associations.derive(conn, v.tenant_id, entry_id, now=now, v=v)
    queued(conn, v.tenant_id, [entry_id], ("associations",))
    # Derived from the whole tenant: shown if the writer sees it.
    seen = {r[0] for r in conn.execute(
        f"SELECT e.id FROM entries e WHERE {v.sees('e')} AND e.id IN ({','.join('?' * len(found))})",
        [c.id for c in found])} if found else set()
    return [c for c in found if c.id in seen]
