"""Entities in SQL: resolve names, link entries, merge, rename, relate, list and show.

Every function takes a connection inside the caller's transaction and the
caller's tenant (or `Viewer`); another tenant's entities are
indistinguishable from missing ones.

Entities are one namespace per tenant (a name means one entity for
everyone), but an entity exists for a user only if an entry they see
mentions it or an active fact they see names it (`visibility.py`): reads list,
count, show and relate only those, and count only mentions by entries the
caller sees. A merge or rename changes the tenant's shared entity; a caller
may do it to entities they see (their names are theirs to read already).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import apsw
import msgspec

from arbiter._time import format_time
from arbiter.entities import evidence, names as nm
from arbiter.entities.extract import canonical
from arbiter.entities.model import Entity, EntityRef, EntityRelation, Mention, MentioningEntry
from arbiter.entities.visibility import (
    dated_sql, mentions_sql, named_sql, names_sql, relation_times_sql, sees_most, seen_links_sql, visible,
    visible_ids, visible_sql, whole,
)
from arbiter.errors import Conflict, InvalidParams, NotFound
from arbiter.store import engine
from arbiter.store.users import Viewer, whole_tenant

#: Trigram similarity at or above which a new name is the existing entity.
SAME = 0.85
#: Similarity from which a new entity comes back with a "possibly the same as" candidate.
MAYBE = 0.6
_CANDIDATES = 20
#: Postings read per trigram by the similarity step; a trigram with more is skipped as too common.
GRAM_POSTINGS = 200
#: Names with fewer trigrams (two or three letters) are never matched by similarity.
MIN_GRAMS = 6


@dataclass(frozen=True, slots=True)
class Resolution:
    """What `resolve` did: the entity, whether it was created, and near names it might be (ids)."""

    entity_id: int
    created: bool
    possibly_same_as: tuple[int, ...] = ()
    #: The step that matched: exact, alias, norm, similar, or new.
    matched: str = "new"
    #: The entity_names row the name matched (or was added as): what an entry's link records it came through.
    name_id: int | None = field(default=None, compare=False)


def lookup(conn: apsw.Connection, tenant_id: int, name: str, v: Viewer | None = None) -> tuple[int, str] | None:
    """(entity id, step) for a name by exact name, alias or normalised form; None if none matches.

    A dictionary alias ("k8s", "postgres") is looked up as the term it spells.
    With a viewer `v`, only the names `v` knows (`names_sql`) match: a read
    never finds an entity by a spelling only another user's private note wrote.
    """
    found = _find(conn, tenant_id, name, v)
    return None if found is None else found[:2]


def _find(conn: apsw.Connection, tenant_id: int, name: str, v: Viewer | None = None, *,
          read: Shared | None = None) -> tuple[int, str, int] | None:
    """`lookup`, and the id of the entity_names row that matched. `read`: rows by key and by normalised form
    already read (`Linker`'s reads for many names), used when `v` is None and it holds the key or form."""
    name = canonical(name)
    known = "" if v is None or whole(v) else f" AND {names_sql(v, 'n')[0]}"
    if read is not None and v is None and nm.key(name) in read.keyed:
        row = read.keyed[nm.key(name)]
    else:
        row = conn.execute(
            f"SELECT n.entity_id, n.is_alias, n.id FROM entity_names n WHERE n.tenant_id = ? AND n.key = ?{known}",
            (tenant_id, nm.key(name)),
        ).fetchone()
    if row is not None:
        return row[0], "alias" if row[1] else "exact", row[2]
    if read is not None and v is None and nm.norm(name) in read.normed:
        row = read.normed[nm.norm(name)]
        return (row[0], "norm", row[2]) if row is not None else None
    row = conn.execute(
        f"SELECT n.entity_id, n.id FROM entity_names n WHERE n.tenant_id = ? AND n.norm = ?{known} "
        "ORDER BY n.is_alias, n.id LIMIT 1",
        (tenant_id, nm.norm(name)),
    ).fetchone()
    return (row[0], "norm", row[1]) if row is not None else None


def require(conn: apsw.Connection, v: Viewer, name: str, path: str) -> int:
    """The id of the entity a name (or alias) names and `v` sees, else NotFound at `path` (the same either way)."""
    found = lookup(conn, v.tenant_id, name, v)
    if found is None or not visible(conn, v, found[0]):
        raise NotFound(f"no entity named {name!r}", path=path)
    return found[0]


def similar(conn: apsw.Connection, tenant_id: int, grams: frozenset[str], *, floor: float = MAYBE,
            postings: dict[str, int] | None = None) -> list[tuple[int, float]]:
    """(entity id, similarity ≥ floor) of names sharing trigrams with `grams`, most similar first.

    Bounded work whatever the tenant's size: each trigram's postings are read
    up to `GRAM_POSTINGS`, and a trigram held by more names than that is
    skipped as too common to tell names apart ("ing", "  s"); the 20 names
    sharing the most of the rest are scored by their exact Jaccard.
    """
    if len(grams) < MIN_GRAMS:
        return []
    if postings is not None and grams <= postings.keys():
        rare = [g for g in sorted(grams) if postings[g] <= GRAM_POSTINGS]
    else:
        rare = [g for g, n in gram_postings(conn, tenant_id, grams).items() if n <= GRAM_POSTINGS]
    if not rare:
        return []
    postings = " UNION ALL ".join(["SELECT name_id FROM entity_trigrams WHERE tenant_id = ? AND gram = ?"] * len(rare))
    top = [r[0] for r in conn.execute(
        f"SELECT name_id FROM ({postings}) p GROUP BY name_id ORDER BY count(*) DESC LIMIT {_CANDIDATES}",
        [v for g in rare for v in (tenant_id, g)],
    )]
    if not top:
        return []
    best: dict[int, float] = {}
    # Two statements, not one joining them: equal scores keep the order the names are read in, and a join reads
    # them in another.
    for entity_id, form, count in conn.execute(
        f"SELECT entity_id, norm, grams FROM entity_names WHERE tenant_id = ? AND id IN ({','.join('?' * len(top))})",
        (tenant_id, *top),
    ):
        score = nm.similarity_to(grams, form, count)
        if score >= floor and score > best.get(entity_id, 0.0):
            best[entity_id] = score
    return sorted(best.items(), key=lambda kv: -kv[1])


def gram_postings(conn: apsw.Connection, tenant_id: int, grams) -> dict[str, int]:
    """Postings of each trigram, counted up to one past `GRAM_POSTINGS` (what tells a rare one), in the grams'
    order: one statement for all (it was one probe a trigram: ~15 statements a name)."""
    return dict(conn.execute(
        "SELECT value, (SELECT count(*) FROM (SELECT 1 FROM entity_trigrams WHERE tenant_id = ?1 AND gram = value "
        "LIMIT ?3) c) FROM json_each(?2)",
        (tenant_id, msgspec.json.encode(sorted(grams)).decode(), GRAM_POSTINGS + 1),
    ))


_NAME_COLUMNS = "entity_names(tenant_id, entity_id, name, key, norm, grams, is_alias, created_at)"
# On PostgreSQL a name goes in with its trigrams (and a new entity with its name) in one statement, not two or
# three: the round trips were most of what a new name cost the idle writer after a bulk load. SQLite has no INSERT
# inside a WITH, and no round trips to save.
_PG_TRIGRAMS = ("t AS (INSERT INTO entity_trigrams(tenant_id, gram, name_id) SELECT ?, g.value, n.id "
                "FROM n CROSS JOIN json_each(?) g) ")


def add_name(conn: apsw.Connection, tenant_id: int, entity_id: int, name: str, *, alias: bool, now: int) -> int:
    form = nm.norm(name)
    grams = nm.trigrams(form)
    if engine.writes_in_with(conn):
        return conn.execute(
            f"WITH n AS (INSERT INTO {_NAME_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id), {_PG_TRIGRAMS}"
            "SELECT id FROM n",
            (tenant_id, entity_id, name, nm.key(name), form, len(grams), int(alias), now,
             tenant_id, msgspec.json.encode(sorted(grams)).decode()),
        ).fetchone()[0]
    name_id = conn.execute(
        "INSERT INTO entity_names(tenant_id, entity_id, name, key, norm, grams, is_alias, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (tenant_id, entity_id, name, nm.key(name), form, len(grams), int(alias), now),
    ).fetchone()[0]
    conn.executemany(
        "INSERT INTO entity_trigrams(tenant_id, gram, name_id) VALUES (?, ?, ?)",
        [(tenant_id, g, name_id) for g in grams],
    )
    return name_id


def _event(conn: apsw.Connection, tenant_id: int, entity_id: int, kind: str, detail: dict, now: int) -> None:
    conn.execute(
        "INSERT INTO entity_events(tenant_id, entity_id, kind, detail, at) VALUES (?, ?, ?, ?, ?)",
        (tenant_id, entity_id, kind, msgspec.json.encode(detail).decode(), now),
    )


def create(conn: apsw.Connection, tenant_id: int, name: str, *, type: str = "other", now: int) -> int:
    """A new entity named `name` (the caller has checked the name is free)."""
    return _create(conn, tenant_id, name, type=type, now=now)[0]


def _create(conn: apsw.Connection, tenant_id: int, name: str, *, type: str, now: int) -> tuple[int, int]:
    """`create`, and the id of its name's row."""
    if engine.writes_in_with(conn):
        form = nm.norm(name)
        grams = nm.trigrams(form)
        return conn.execute(
            "WITH e AS (INSERT INTO entities(tenant_id, name, type, created_at, updated_at) VALUES (?, ?, ?, ?, ?) "
            f"RETURNING id), n AS (INSERT INTO {_NAME_COLUMNS} SELECT ?, e.id, ?, ?, ?, ?, 0, ? FROM e "
            f"RETURNING id, entity_id), {_PG_TRIGRAMS}SELECT entity_id, id FROM n",
            (tenant_id, name, type, now, now, tenant_id, name, nm.key(name), form, len(grams), now,
             tenant_id, msgspec.json.encode(sorted(grams)).decode()),
        ).fetchone()
    entity_id = conn.execute(
        "INSERT INTO entities(tenant_id, name, type, created_at, updated_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
        (tenant_id, name, type, now, now),
    ).fetchone()[0]
    return entity_id, add_name(conn, tenant_id, entity_id, name, alias=False, now=now)


def _retype(conn: apsw.Connection, tenant_id: int, entity_id: int, type: str | None, now: int) -> None:
    # A caller's explicit type refines an entity only extraction had typed ("other"); it never overrides one.
    if type is None or type == "other":
        return
    conn.execute(
        "UPDATE entities SET type = ?, updated_at = ? WHERE tenant_id = ? AND id = ? AND type = 'other'",
        (type, now, tenant_id, entity_id),
    )
    if conn.changes():
        _event(conn, tenant_id, entity_id, "retype", {"from": "other", "to": type}, now)


def spelled(name: str) -> str:
    """A name as `resolve` reads it: its canonical spelling, runs of spaces as one."""
    return canonical(" ".join(name.split()))


def resolve(conn: apsw.Connection, tenant_id: int, name: str, *, type: str | None = None, now: int,
            v: Viewer | None = None, read: Shared | None = None) -> Resolution:
    """The entity a name means, created if none: exact → alias → normalised → trigram ≥ 0.85 → new.

    A new entity comes back with `possibly_same_as`: existing entities whose
    names are 0.6–0.85 similar, for the caller to merge if they are one
    (a false merge loses more than a missed one). A name matched by
    similarity alone is added as an alias, so it matches exactly next time.
    With a viewer `v`, the similarity step considers only entities `v` sees:
    a name is never aliased to, nor said to be like, one they cannot see.
    """
    name = spelled(name)
    found = _find(conn, tenant_id, name, read=read)
    if found is None and engine.is_postgresql(conn) and not (read is not None and read.held):
        # Daemons sharing a database may meet a new name at once: the first creates it, the others wait here,
        # then find it (each statement reads what committed before it).
        engine.serialize(conn, engine.ENTITY_NAMES, tenant_id)
        found = _find(conn, tenant_id, name)
    if found is not None:
        _retype(conn, tenant_id, found[0], type, now)
        return Resolution(found[0], False, (), found[1], found[2])
    near = similar(conn, tenant_id, nm.trigrams(nm.norm(name)), postings=read.postings if read is not None else None)
    if v is not None and not whole(v) and near:
        seen = visible_ids(conn, v, [e for e, _ in near])
        near = [(e, score) for e, score in near if e in seen]
    if near and near[0][1] >= SAME:
        entity_id = near[0][0]
        name_id = add_name(conn, tenant_id, entity_id, name, alias=True, now=now)
        _retype(conn, tenant_id, entity_id, type, now)
        return Resolution(entity_id, False, (), "similar", name_id)
    entity_id, name_id = _create(conn, tenant_id, name, type=type or "other", now=now)
    return Resolution(entity_id, True, tuple(e for e, _ in near[:3]), "new", name_id)


def refs(conn: apsw.Connection, tenant_id: int, ids) -> dict[int, EntityRef]:
    """EntityRef by id for the given entity ids of `tenant_id`."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return {}
    rows = conn.execute(f"SELECT id, name, type FROM entities WHERE tenant_id = ? AND id IN ({','.join('?' * len(ids))})",
                        (tenant_id, *ids))
    return {r[0]: EntityRef(id=r[0], name=r[1], type=r[2]) for r in rows}


@dataclass
class Shared:
    """What the linkers of one tenant's idle step share, so that the step's entries cost a few statements, not a few
    each (the round trips were most of the `entities` deriver's time on PostgreSQL).

    What was read is kept true as resolution adds names (`Linker._resolve`): `keyed`, the names by key
    (entity id, is_alias, name id; None: no such name), as `Linker._keyed` gives them; `normed`, the first name
    (by is_alias, id) of each normalised form, as `_find` reads it; `postings`, each trigram's postings as
    `gram_postings` counts them. `held`: the caller took the tenant's turn to create entities
    (`engine.ENTITY_NAMES`) before anything was read, so no other daemon's name can appear meanwhile.
    `links`: the entry_entities rows not yet written, in the order the entries were linked (the first of two
    rows for one link is the one kept, as when each entry wrote its own).
    """

    held: bool = False
    keyed: dict[str, tuple[int, int, int] | None] = field(default_factory=dict)
    normed: dict[str, tuple[int, int, int] | None] = field(default_factory=dict)
    postings: dict[str, int] = field(default_factory=dict)
    links: list[tuple[int, int, int, str, int | None]] = field(default_factory=list)

    def added(self, entity_id: int, name: str, name_id: int, *, alias: bool) -> None:
        """Keep what was read true after `add_name` wrote `name` (as `resolve` spells it)."""
        self.keyed[nm.key(name)] = (entity_id, int(alias), name_id)
        form = nm.norm(name)
        if form in self.normed:
            first = self.normed[form]
            if first is None or (first[1] and not alias):  # a newer row comes first only as a name over an alias
                self.normed[form] = (entity_id, int(alias), name_id)
        for g in nm.trigrams(form):
            if g in self.postings:
                self.postings[g] += 1

    def flush(self, conn: apsw.Connection) -> None:
        """Write the links held back."""
        conn.executemany(
            "INSERT INTO entry_entities(entry_id, entity_id, tenant_id, how, name_id) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            self.links,
        )
        self.links.clear()


@dataclass
class Linker:
    """Resolves and links the names of many entries, remembering what it resolved (one bulk write)."""

    conn: apsw.Connection
    tenant_id: int
    now: int
    #: Who writes (None: the daemon's own upkeep): resolution's similarity step sees only their entities, and an
    #: entity they could not see before counts as `created` for them.
    viewer: Viewer | None = None
    #: Given: links wait in it until its `flush` (the idle step's linkers of one tenant share one); else each `link`
    #: writes its own.
    shared: Shared | None = None
    _seen: dict[tuple[str, str | None], Resolution] = field(default_factory=dict)
    #: Candidate words the tenant's text did not show to be names, not asked about again in this batch.
    _not_names: set[tuple[str, str]] = field(default_factory=set)
    #: Evidence `prepare` read ahead, by (word, entry id, initial).
    _evidence: dict[tuple[str, int, bool], list[int] | None] = field(default_factory=dict)

    def prepare(self, items: list[tuple[int, list[tuple[str, str | None, str]]]]) -> None:
        """Read ahead, in a few statements, what `link` will read for these (entry id, names), linked in this order:
        the names by key, and the evidence for each capitalised word not yet a name (its first use in `items`, as
        `link` asks once a batch). Reads only: what `link` then decides is what it decides without it."""
        every = [n for _, named in items for n in named]
        keyed = self._keyed(every)
        asks: dict[tuple[str, str], tuple[str, int, bool]] = {}
        for entry_id, named in items:
            for name, type, how in named:
                k = nm.key(name)
                if (how in ("candidate", "initial") and (k, type) not in self._seen and keyed.get(k) is None
                        and (k, how) not in self._not_names and (k, how) not in asks):
                    asks[k, how] = (name, entry_id, how == "initial")
        found = evidence.recurring_many(self.conn, self._reader, list(asks.values()))
        self._evidence.update(found)
        if self.shared is not None:
            # The names `resolve` may look up by form (no name has their key): the names given, and the words the
            # evidence shows are names.
            names = {nm.key(word) for (word, _, _), earlier in found.items() if earlier is not None}
            self._read_forms(self.shared, {
                nm.norm(canonical(spelled(name))) for name, _, how in every
                if (how not in ("known", "candidate", "initial") and keyed.get(nm.key(spelled(name))) is None)
                or (nm.key(name) in names and keyed.get(nm.key(name)) is None)} - self.shared.normed.keys())

    def _read_forms(self, shared: Shared, forms: set[str]) -> None:
        """Read the first name of each normalised form into `shared`, and the postings of the trigrams of the forms
        no name has (those `resolve` may take to its similarity step)."""
        ordered = sorted(forms)
        shared.normed.update(dict.fromkeys(ordered))
        for start in range(0, len(ordered), 500):
            chunk = ordered[start:start + 500]
            for form, entity_id, is_alias, name_id in self.conn.execute(
                f"SELECT norm, entity_id, is_alias, id FROM entity_names WHERE tenant_id = ? "
                f"AND norm IN ({','.join('?' * len(chunk))})",
                (self.tenant_id, *chunk),
            ):
                first = shared.normed[form]
                if first is None or (is_alias, name_id) < (first[1], first[2]):
                    shared.normed[form] = (entity_id, is_alias, name_id)
        grams = {g for form in forms if shared.normed[form] is None and len(nm.trigrams(form)) >= MIN_GRAMS
                 for g in nm.trigrams(form)} - shared.postings.keys()
        ordered = sorted(grams)
        for start in range(0, len(ordered), 2000):
            shared.postings.update(gram_postings(self.conn, self.tenant_id, ordered[start:start + 2000]))

    @property
    def _reader(self) -> Viewer:
        return self.viewer or whole_tenant(self.tenant_id)

    def link(self, entry_id: int, named: list[tuple[str, str | None, str]]) -> list[tuple[Resolution, str | None]]:
        """Link `entry_id` to each (name, type, how); returns each resolution once per entity, in order."""
        shared = self.shared or Shared()
        if not self._sees_all:
            shared.flush(self.conn)  # who sees an entity is read from its links: the ones held back count
        out: dict[int, tuple[Resolution, str | None]] = {}
        rows = shared.links
        keyed = self._keyed(named, shared)
        for name, type, how in named:
            k = (nm.key(name), type)
            res = self._seen.get(k)
            if res is None and how in ("known", "candidate", "initial"):
                row = keyed.get(k[0])
                # A lone capitalised word links an entity the writer already sees, or (mid-sentence) one the
                # tenant's text shows is a name: then the entries that wrote it before are linked to it too.
                if row is not None and (self._sees_all or visible(self.conn, self.viewer, row[0])):
                    res = Resolution(row[0], False, (), "exact", row[2])
                elif row is None and how != "known" and (k[0], how) not in self._not_names:
                    ask = (name, entry_id, how == "initial")
                    earlier = (self._evidence.pop(ask) if ask in self._evidence
                               else evidence.recurring(self.conn, self._reader, name, entry_id, initial=ask[2]))
                    if earlier is None:
                        self._not_names.add((k[0], how))
                        continue
                    res = self._resolve(name, type, shared)
                    self._seen[k] = Resolution(res.entity_id, False, (), res.matched, res.name_id)
                    rows += [(other, res.entity_id, self.tenant_id, "extracted", res.name_id) for other in earlier]
                else:
                    continue
            elif res is None:
                res = self._resolve(name, type, shared)
                if not res.created and not self._sees_all and not visible(self.conn, self.viewer, res.entity_id):
                    res = Resolution(res.entity_id, True, (), res.matched, res.name_id)  # new to this writer
                self._seen[k] = Resolution(res.entity_id, False, (), res.matched, res.name_id)
            if res.entity_id not in out:
                out[res.entity_id] = (res, name)
                rows.append((entry_id, res.entity_id, self.tenant_id,
                             "extracted" if how in ("known", "candidate", "initial") else how,
                             res.name_id))
        if self.shared is None:
            shared.flush(self.conn)
        return list(out.values())

    @property
    def _sees_all(self) -> bool:
        # A writer who sees the whole tenant sees every entity a name of it names: no read to ask.
        return self.viewer is None or whole(self.viewer)

    def _keyed(self, named: list[tuple[str, str | None, str]],
               shared: Shared | None = None) -> dict[str, tuple[int, int, int] | None]:
        """(entity id, is_alias, name id) by key (None: no such name), of every name `link` may look up or resolve:
        one read for all (it was a round trip a name, most of a `remember`'s linking on PostgreSQL). With `shared`,
        the keys it holds are not read again: resolution keeps them (`_resolve`)."""
        shared = shared or self.shared or Shared()
        keyed = shared.keyed
        keys = set()
        for name, type, how in named:
            if (nm.key(name), type) in self._seen:
                continue
            keys.add(nm.key(name) if how in ("known", "candidate", "initial")
                     else nm.key(spelled(name)))
        keys -= keyed.keys()
        if not keys:
            return keyed
        keyed.update(dict.fromkeys(keys))
        # `IN (?, ...)`, not json_each: PostgreSQL plans that as a hash join over the tenant's names, ten times slower.
        ordered = sorted(keys)
        for start in range(0, len(ordered), 500):  # within both engines' limits on parameters
            chunk = ordered[start:start + 500]
            for key, entity_id, is_alias, name_id in self.conn.execute(
                f"SELECT key, entity_id, is_alias, id FROM entity_names WHERE tenant_id = ? "
                f"AND key IN ({','.join('?' * len(chunk))})",
                (self.tenant_id, *chunk),
            ):
                keyed[key] = (entity_id, is_alias, name_id)
        return keyed

    def _resolve(self, name: str, type: str | None, shared: Shared) -> Resolution:
        res = resolve(self.conn, self.tenant_id, name, type=type, now=self.now, v=self.viewer, read=shared)
        spelt = spelled(name)
        if res.matched in ("similar", "new"):  # a name row this read did not see: later names must not miss it
            shared.added(res.entity_id, spelt, res.name_id, alias=res.matched == "similar")
        elif res.matched in ("exact", "alias") and shared.keyed.get(nm.key(spelt)) is None:
            # Found by a read of its own (another daemon's name, committed since): later entries find it too.
            shared.keyed[nm.key(spelt)] = (res.entity_id, int(res.matched == "alias"), res.name_id)
        return res


def mentions_of(conn: apsw.Connection, tenant_id: int, resolved: list[tuple[Resolution, str | None]]) -> list[Mention]:
    """The `remember` result's `entities`, from what a Linker of `tenant_id` returned."""
    by_id = refs(conn, tenant_id, [r.entity_id for r, _ in resolved] + [i for r, _ in resolved for i in r.possibly_same_as])
    return [
        Mention(
            id=r.entity_id, name=by_id[r.entity_id].name, type=by_id[r.entity_id].type, created=r.created,
            possibly_same_as=[by_id[i] for i in r.possibly_same_as],
        )
        for r, _ in resolved
    ]


def mentions(conn: apsw.Connection, tenant_id: int, entry_id: int) -> list[EntityRef]:
    """The entities an entry mentions, by name."""
    rows = conn.execute(
        "SELECT e.id, e.name, e.type FROM entry_entities l JOIN entities e ON e.tenant_id = l.tenant_id "
        "AND e.id = l.entity_id "
        "WHERE l.entry_id = ? AND l.tenant_id = ? ORDER BY e.name",
        (entry_id, tenant_id),
    )
    return [EntityRef(id=r[0], name=r[1], type=r[2]) for r in rows]


def entries_mentioning(conn: apsw.Connection, tenant_id: int, entity_id: int, limit: int = 50) -> list[int]:
    """Ids of the active entries that mention an entity, newest first."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT l.entry_id FROM entry_entities l JOIN entries e ON e.tenant_id = l.tenant_id AND e.id = l.entry_id "
            "WHERE l.entity_id = ? AND l.tenant_id = ? AND e.valid_to IS NULL ORDER BY l.entry_id DESC LIMIT ?",
            (entity_id, tenant_id, limit),
        )
    ]


# ---- reading -------------------------------------------------------------------

def _columns(conn: apsw.Connection, v: Viewer, dated: str | None = None) -> str:
    """The row's own columns, its aliases `v` knows (a JSON list), then created_at, updated_at and mentions as `v`
    knows them (`dated`, which a viewer who does not see the whole tenant needs: `_rows` gathers it)."""
    if dated is None:
        if not whole(v):  # not an assert: `python -O` would strip it, and a partial viewer would get the tenant's dates
            raise RuntimeError("a viewer of part of the tenant is dated by what they see (_rows)")
        dated = f"x.created_at, x.updated_at, {mentions_sql(v)}"
    # The tenant as a constant, not `= x.tenant_id`: Citus pins a subquery of the SELECT list to one shard only so
    # (the correlated form went to every shard).
    known = (f"FROM entity_names n WHERE n.tenant_id = {int(v.tenant_id)} AND n.entity_id = x.id AND n.is_alias != 0 "
             f"AND {names_sql(v)[0]}")
    if engine.is_postgresql(conn):
        aliases = f"(SELECT coalesce(json_agg(n.name ORDER BY n.id)::text, '[]') {known})"
    else:
        aliases = f"(SELECT json_group_array(name) FROM (SELECT n.name {known} ORDER BY n.id))"
    return f"x.id, x.name, x.type, x.description, x.merged_into, {aliases}, {dated}"
_aliases = msgspec.json.Decoder(list[str])


def _entity(row) -> Entity:
    eid, name, etype, desc, merged, aliases, created, updated, n = row
    return Entity(
        id=eid, name=name, type=etype, aliases=_aliases.decode(aliases), description=desc,
        created_at=format_time(created), updated_at=format_time(updated), mentions=int(n), merged_into=merged,
    )


def get(conn: apsw.Connection, v: Viewer, entity_id: int) -> Entity:
    row = next(iter(_rows(conn, v, [entity_id])), None)
    if row is None:
        raise NotFound(f"entity {entity_id} not found")
    return _entity(row)


def _rows(conn: apsw.Connection, v: Viewer, ids: list[int]):
    """`_columns` rows of those of `ids` that exist for `v`, in no order.

    For a viewer who does not see the whole tenant, their links are read in entry order and counted and dated in one
    pass (`seen_links_sql`): read entity by entity, each link read a leaf page of `entries` the readers' small cache
    had dropped since the last link into it (the 64 most mentioned of 47K entities have ~33K links). An entity no
    entry `v` sees names is checked by `visible_sql` (an active fact may name it) and has no mentions.
    """
    if not ids:  # `IN ()` is SQLite's alone
        return iter(())
    marks = ",".join("?" * len(ids))
    if whole(v):
        return conn.execute(f"SELECT {_columns(conn, v)} FROM entities x WHERE x.id IN ({marks}) AND {visible_sql(v)}",
                            ids)
    created, updated = dated_sql(v, "x", "c.first", "c.last")
    return conn.execute(
        f"WITH {seen_links_sql(v, len(ids))} "
        f"SELECT {_columns(conn, v, f'{created}, {updated}, coalesce(c.n, 0)')} "
        f"FROM entities x LEFT JOIN c ON c.id = x.id WHERE x.tenant_id = ? AND x.id IN ({marks}) "
        f"AND (c.id IS NOT NULL OR {visible_sql(v)})",
        (*ids, v.tenant_id, *ids),
    )


def list_entities(conn: apsw.Connection, v: Viewer, *, query: str = "", type: str | None = None,
                  limit: int = 50) -> list[Entity]:
    """Active entities `v` sees, most mentioned (by entries `v` sees) first; `query` matches the start of any name or
    alias, any case."""
    tenant_id = v.tenant_id
    where, args = ["x.tenant_id = ?", "x.merged_into IS NULL"], [tenant_id]
    if type is not None:
        where.append("x.type = ?")
        args.append(type)
    if query.strip():
        prefix = nm.key(query)
        where.append(  # a name `v` knows: not a spelling only another user's private note wrote
            f"x.id IN (SELECT n.entity_id FROM entity_names n WHERE n.tenant_id = ? AND n.key >= ? AND n.key < ? "
            f"AND {names_sql(v)[0]})"
        )
        args += [tenant_id, prefix, prefix + "\U0010ffff"]
    if whole(v):
        rows = conn.execute(
            f"SELECT {_columns(conn, v)} FROM entities x WHERE {' AND '.join(where)} "
            f"ORDER BY {mentions_sql(v)} DESC, x.id LIMIT ?", (*args, limit),
        )
        return [_entity(r) for r in rows]

    def rank(ids: list[int]):
        return ((row[8], row) for row in _rows(conn, v, ids))

    def counts():  # a user who sees little: from what they see
        return conn.execute(f"SELECT sum(u.m), x.id FROM ({named_sql(v)}) u JOIN entities x ON x.id = u.id "
                            f"WHERE {' AND '.join(where)} GROUP BY x.id", args)
    return [_entity(r) for r in most_mentioned(conn, " AND ".join(where), args, limit, rank, counts,
                                               little=not sees_most(conn, v), tenant_id=tenant_id)]


def most_mentioned(conn: apsw.Connection, where: str, args: list, limit: int,
                   rank: Callable[[list[int]], Iterable[tuple[float, tuple]]],
                   counts: Callable[[], Iterable[tuple[float, int]]], *, little: bool, tenant_id: int) -> list[tuple]:
    """The `limit` entities `x` of `where` (of `tenant_id`) most mentioned as `rank` counts, as `rank`'s rows (ties
    by id).

    `rank(ids)` gives (mentions, row) for those of `ids` that exist for the
    reader, their mentions counted by entries the reader sees, a row's first
    column its id. Counting what a viewer sees reads every link's entry (its
    scope and author), so counting it for every entity cost ~0.3 s of CPU at
    47K entities and 230K links. An entity's mentions by anyone bound those
    by any viewer (a count of the link index alone), so entities are taken
    in that order, a chunk at a time, and the walk stops once the last of
    the best `limit` ranks before any entity left could. The entities list
    and the web view's entity graph both rank so.

    A reader who sees little of the tenant would walk every entity so (their
    counts stay far under the bounds: 0.38 s of CPU at 47K entities for one
    who sees none). For them (`little`, as `sees_most` judges), `counts()`
    gives (mentions, id) of every entity they see, gathered from what they
    see (`visibility.named_sql`), and only the best `limit` of those go through `rank`.
    """
    if little:
        top = [i for _, i in sorted((-n, i) for n, i in counts())[:limit]]
        rows = {row[0]: row for _, row in rank(top)}
        return [rows[i] for i in top]

    def bounds(n: int | None) -> list[tuple[int, int]]:
        return conn.execute(
            f"SELECT x.id, (SELECT count(*) FROM entry_entities l WHERE l.tenant_id = {int(tenant_id)} "
            "AND l.entity_id = x.id) "  # a constant tenant: how Citus pins a SELECT list's subquery (_columns)
            "AS n FROM entities x "
            f"WHERE {where} ORDER BY n DESC, x.id" + ("" if n is None else " LIMIT ?"),
            (*args, *([] if n is None else [n])),
        ).fetchall()

    best: list[tuple] = []  # (-mentions, id, row), best first
    at, chunk = 0, max(limit, 64)
    order = bounds(chunk + 1)  # the first chunk and the bound after it settle most pages (a top-N sort is cheaper)
    whole_order = len(order) <= chunk
    while at < len(order):
        # Every entity left ranks at or after (its bound, its id), so none passes the last of a full page that
        # ranks before the next's (ties by id: at a tied count the walk would read every entity of that count).
        if len(best) >= limit and best[limit - 1][:2] < (-order[at][1], order[at][0]):
            break
        if not whole_order and at + chunk >= len(order):
            order, whole_order = bounds(None), True
        ids = [i for i, _ in order[at:at + chunk]]
        at, chunk = at + len(ids), min(chunk * 2, 4096)
        best.extend((-n, row[0], row) for n, row in rank(ids))
        best = sorted(best)[:limit]
    return [r for _, _, r in best]


def count(conn: apsw.Connection, v: Viewer) -> int:
    """Active (not merged-away) entities `v` sees.

    Two plans, one answer. Asking each entity whether what `v` sees names it
    stops at its first link for a viewer who sees most of the tenant (20 ms
    of CPU at 47K entities) but reads every link's entry for one who sees
    little (0.27 s); gathering the entities the entries and facts `v` sees
    name reads every entry of the tenant and every link `v` sees (12 ms for
    one who sees none, 76 ms for one who sees all). The newest entries
    choose: a sample, which picks a plan and never changes the count.
    """
    live = "x.tenant_id = ? AND x.merged_into IS NULL"
    if whole(v) or sees_most(conn, v):
        return conn.execute(f"SELECT count(*) FROM entities x WHERE {live} AND {visible_sql(v)}",
                            (v.tenant_id,)).fetchone()[0]
    return conn.execute(f"SELECT count(*) FROM entities x WHERE x.id IN (SELECT id FROM ({named_sql(v)}) u) AND {live}",
                        (v.tenant_id,)).fetchone()[0]


def mentioning_entries(conn: apsw.Connection, v: Viewer, entity_id: int, limit: int) -> list[MentioningEntry]:
    """The active entries `v` sees that mention an entity, newest first."""
    rows = conn.execute(
        "SELECT e.id, e.type, e.title, e.recorded_at FROM entry_entities l "
        "JOIN entries e ON e.tenant_id = l.tenant_id AND e.id = l.entry_id "
        f"WHERE l.entity_id = ? AND l.tenant_id = ? AND e.valid_to IS NULL AND {v.sees('e')} ORDER BY e.id DESC LIMIT ?",
        (entity_id, v.tenant_id, limit),
    )
    return [MentioningEntry(id=r[0], type=r[1], title=r[2], recorded_at=format_time(r[3])) for r in rows]


_RELATION_COLUMNS = "id, source_id, relation, target_id, weight, created_at, updated_at"


def _relation_columns(v: Viewer) -> str:
    created, updated = relation_times_sql(v)
    return f"r.id, r.source_id, r.relation, r.target_id, r.weight, {created}, {updated}"


def _relations(conn: apsw.Connection, tenant_id: int, rows) -> list[EntityRelation]:
    rows = list(rows)
    by_id = refs(conn, tenant_id, [r[1] for r in rows] + [r[3] for r in rows])
    return [
        EntityRelation(
            id=r[0], source=by_id[r[1]], relation=r[2], target=by_id[r[3]], weight=r[4],
            created_at=format_time(r[5]), updated_at=format_time(r[6]),
        )
        for r in rows
    ]


def relations_of(conn: apsw.Connection, v: Viewer, entity_id: int) -> list[EntityRelation]:
    """An entity's relations to entities `v` sees, both ways, strongest first."""
    rows = conn.execute(
        f"SELECT {_relation_columns(v)} FROM entity_relations r WHERE r.tenant_id = ? "
        "AND (r.source_id = ? OR r.target_id = ?) ORDER BY r.weight DESC, r.id",
        (v.tenant_id, entity_id, entity_id),
    ).fetchall()
    if not whole(v):
        seen = visible_ids(conn, v, [r[1] for r in rows] + [r[3] for r in rows])
        rows = [r for r in rows if r[1] in seen and r[3] in seen]
    return _relations(conn, v.tenant_id, rows)


# ---- changing ------------------------------------------------------------------


def relate(conn: apsw.Connection, v: Viewer, source: str, relation: str, target: str, *, weight: float,
           now: int) -> EntityRelation:
    """Create `source RELATION target` between two entities `v` sees, with `weight`, or add `weight` to it."""
    tenant_id = v.tenant_id
    a = require(conn, v, source, "source")
    b = require(conn, v, target, "target")
    if a == b:
        raise InvalidParams("an entity cannot be related to itself", path="target")
    conn.execute(
        "INSERT INTO entity_relations(tenant_id, source_id, relation, target_id, weight, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) "
        f"ON CONFLICT ({engine.conflict_key(conn, 'source_id, target_id, relation')}) "
        "DO UPDATE SET weight = entity_relations.weight + excluded.weight, updated_at = excluded.updated_at",
        (tenant_id, a, relation, b, weight, now, now),
    )
    return _relations(conn, tenant_id, conn.execute(
        f"SELECT {_relation_columns(v)} FROM entity_relations r WHERE r.tenant_id = ? AND r.source_id = ? "
        "AND r.target_id = ? AND r.relation = ?",
        (tenant_id, a, b, relation),
    ))[0]


def rename(conn: apsw.Connection, v: Viewer, name: str, new_name: str, *, now: int) -> Entity:
    """Rename an entity `v` sees; its old name stays as an alias. A name another entity answers to is `conflict`."""
    tenant_id = v.tenant_id
    entity_id = require(conn, v, name, "name")
    new_name = " ".join(new_name.split())
    old = conn.execute("SELECT name FROM entities WHERE tenant_id = ? AND id = ?", (tenant_id, entity_id)).fetchone()[0]
    row = conn.execute(
        "SELECT entity_id FROM entity_names WHERE tenant_id = ? AND key = ?", (tenant_id, nm.key(new_name))
    ).fetchone()
    if row is not None and row[0] != entity_id:
        # Names are one namespace per tenant, so a name an entity the caller cannot see holds is taken all the
        # same; the caller is not told which entity holds it.
        raise Conflict(f"another entity is already named {new_name!r}", path="new_name",
                       existing_id=row[0] if visible(conn, v, row[0]) else None)
    conn.execute("UPDATE entity_names SET is_alias = 1 WHERE tenant_id = ? AND entity_id = ? AND is_alias = 0",
                 (tenant_id, entity_id))
    if row is None:
        add_name(conn, tenant_id, entity_id, new_name, alias=False, now=now)
    else:  # an alias (or a change of case) becomes the name
        conn.execute(
            "UPDATE entity_names SET is_alias = 0, name = ? WHERE tenant_id = ? AND key = ?",
            (new_name, tenant_id, nm.key(new_name)),
        )
    conn.execute("UPDATE entities SET name = ?, updated_at = ? WHERE tenant_id = ? AND id = ?",
                 (new_name, now, tenant_id, entity_id))
    _event(conn, tenant_id, entity_id, "rename", {"from": old, "to": new_name}, now)
    return get(conn, v, entity_id)


def merge(conn: apsw.Connection, v: Viewer, keep: str, other: str, *, now: int) -> Entity:
    """Fold `other` into `keep`: names become aliases, links and relations move; `other` is retired, not deleted.

    The move is recorded in `entity_events` (the entries and relations that
    moved), and `other` keeps its row with `merged_into`, so nothing of what
    the store said before the merge is lost. Both must be entities `v` sees;
    the links of entries `v` does not see move too (one entity, one name).
    """
    tenant_id = v.tenant_id
    keep_id = require(conn, v, keep, "keep")
    other_id = require(conn, v, other, "other")
    if keep_id == other_id:
        raise InvalidParams("cannot merge an entity into itself", path="other")
    other_name = conn.execute("SELECT name FROM entities WHERE tenant_id = ? AND id = ?",
                              (tenant_id, other_id)).fetchone()[0]
    conn.execute("UPDATE entity_names SET entity_id = ?, is_alias = 1 WHERE tenant_id = ? AND entity_id = ?",
                 (keep_id, tenant_id, other_id))
    moved = [r[0] for r in conn.execute("SELECT entry_id FROM entry_entities WHERE tenant_id = ? AND entity_id = ?",
                                        (tenant_id, other_id))]
    conn.execute(  # each link keeps the name it came through (which moves to `keep` too)
        "INSERT INTO entry_entities(entry_id, entity_id, tenant_id, how, name_id) "
        "SELECT entry_id, ?, tenant_id, how, name_id FROM entry_entities WHERE tenant_id = ? AND entity_id = ? "
        "ON CONFLICT DO NOTHING",
        (keep_id, tenant_id, other_id),
    )
    conn.execute("DELETE FROM entry_entities WHERE tenant_id = ? AND entity_id = ?", (tenant_id, other_id))
    relations = conn.execute(
        f"SELECT {_RELATION_COLUMNS} FROM entity_relations WHERE tenant_id = ? AND (source_id = ? OR target_id = ?)",
        (tenant_id, other_id, other_id)
    ).fetchall()
    for rid, src, rel, dst, weight, _, _ in relations:
        src, dst = (keep_id if src == other_id else src), (keep_id if dst == other_id else dst)
        conn.execute("DELETE FROM entity_relations WHERE tenant_id = ? AND id = ?", (tenant_id, rid))
        if src != dst:  # a relation between the two merged entities has nothing left to join
            conn.execute(
                "INSERT INTO entity_relations(tenant_id, source_id, relation, target_id, weight, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                f"ON CONFLICT ({engine.conflict_key(conn, 'source_id, target_id, relation')}) "
                "DO UPDATE SET weight = entity_relations.weight + excluded.weight, updated_at = excluded.updated_at",
                (tenant_id, src, rel, dst, weight, now, now),
            )
    conn.execute(
        "UPDATE entities SET merged_into = ?, retired_at = ?, updated_at = ? WHERE tenant_id = ? AND id = ?",
        (keep_id, now, now, tenant_id, other_id),
    )
    conn.execute("UPDATE entities SET updated_at = ? WHERE tenant_id = ? AND id = ?", (now, tenant_id, keep_id))
    _event(conn, tenant_id, keep_id, "merge", {
        "other": other_id, "other_name": other_name, "entries": moved,
        "relations": [[r[1], r[2], r[3], r[4]] for r in relations],
    }, now)
    return get(conn, v, keep_id)
