"""Export and import on the client side: write an export file, check one whole, send it in batches.

An import checks every line before it writes anything (so a malformed line
names its number and changes nothing), then sends the records in batches of
at most `BATCH` lines, each one transaction in the daemon. The daemon keeps
the import's progress under the file's sha256: an interrupted import run
again goes on from its last committed batch, and a finished one is a no-op
that says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import msgspec

from arbiter import __version__, validation
from arbiter._time import format_time, now_us, parse_time
from arbiter.client import Client
from arbiter.entities import names as entity_names
from arbiter.errors import ArbiterError, Conflict, InvalidParams
from arbiter.facts.model import check_printable
from arbiter.model import _check_source
from arbiter.store import relations
from arbiter.transfer import facts as fact_records
from arbiter.transfer.model import (
    FORMAT,
    FORMAT_END,
    KINDS,
    PEOPLE_KINDS,
    End,
    end_line,
    ConversationRecord,
    EntryRecord,
    Header,
    MemberRecord,
    Record,
    EntityEventRecord,
    EntityMergeRecord,
    EntityRecord,
    EntityRelationRecord,
    FactBatchRecord,
    FactLinkRecord,
    FactRecord,
    MentionRecord,
    PredicateRecord,
    RelationRecord,
    RetirementRecord,
    RevisionRecord,
    SalienceRecord,
    TeamRecord,
    TenantRecord,
    Torn,
    UserRecord,
)

#: Lines per import batch, and the bytes a batch may reach (under the 4 MiB frame).
BATCH = 2000
MAX_BATCH_BYTES = 3 * 1024 * 1024
PAGE = 5000

_encode = msgspec.json.Encoder().encode
_line = msgspec.json.Decoder(Record | End)
_header = msgspec.json.Decoder(Header)


class FormatTooNew(InvalidParams):
    """The file was written by a newer Arbiter, in a format this one cannot read."""


_COUNTED = {"user": "users", "team": "teams", "conversation": "conversations", "entry": "entries", "revision": "revisions", "relation": "relations",
            "entity": "entities", "mention": "mentions", "fact": "facts"}


@dataclass
class ExportSummary:
    tenants: int = 0
    users: int = 0
    teams: int = 0
    conversations: int = 0
    entries: int = 0
    revisions: int = 0
    relations: int = 0
    entities: int = 0
    mentions: int = 0
    facts: int = 0
    lines: int = 0


def export(client: Client, out: BinaryIO, *, tenants: list[str] | None = None,
           progress: Callable[[int], None] = lambda n: None) -> ExportSummary:
    """Write what the caller sees (or, with an admin client, each of `tenants` whole, with its people) to `out` as JSON Lines."""
    header = Header(format=FORMAT, arbiter=__version__, exported_at=format_time(now_us()),
                    tenant=None if tenants is not None else _tenant_name(client))
    out.write(_encode(header) + b"\n")
    summary = ExportSummary(lines=1)
    for name in tenants if tenants is not None else [None]:
        if name is not None:
            out.write(_encode(TenantRecord(name=name)) + b"\n")
            summary.lines += 1
        summary.tenants += 1
        for kind in (PEOPLE_KINDS + KINDS) if name is not None else KINDS:
            after = 0
            while after is not None:
                page = client.export_page(kind, after=after, limit=PAGE, tenant=name)
                if page.records:
                    out.write(b"\n".join(page.records) + b"\n")
                    n = len(page.records)
                    plural = _COUNTED.get(kind)
                    if plural:
                        setattr(summary, plural, getattr(summary, plural) + n)
                    summary.lines += n
                    progress(n)
                after = page.next
    out.write(end_line(summary.lines - 1))
    summary.lines += 1
    return summary


def export_whole(client: Client, out: BinaryIO, *, tenants: list[str] | None = None, attempts: int = 3,
                 progress: Callable[[int], None] = lambda n: None) -> ExportSummary:
    """`export` to `out` (a file open to write and read back), made again if writes during it left it torn.

    An export reads page by page, not in one snapshot: an entry written after
    the entry pages, then linked to an older one, puts a relation in the file
    whose end is not in it, and the import refuses the file. When the
    caller's memory version moved during the export (`--all`: always), the
    file gets import's whole check. A torn file (`Torn`) is made again, up to
    `attempts` times, then refused (Conflict); any other line the check
    refuses is an error at once (ArbiterError, naming the line): exporting
    again would write it again.
    """
    torn = None
    for _ in range(attempts):
        out.seek(0)
        out.truncate()
        before = _version(client, tenants)
        summary = export(client, out, tenants=tenants, progress=progress)
        out.flush()
        if before is not None and before == _version(client, tenants):
            return summary
        out.seek(0)
        try:
            check(None, lines=iter(out), refused=None)
            return summary
        except Torn as e:
            torn = e
        except InvalidParams as e:
            raise ArbiterError(f"{e.message}: the export would not import, so it is refused (exporting again "
                               "would write the same line)", path=e.path) from None
    raise Conflict(f"the memory changed while it was exported, {attempts} times over, and each file named records "
                   f"written after it had read them (the last: {torn.message}): export again when fewer writes "
                   "are going on", path="file")


def _version(client: Client, tenants: list[str] | None) -> int | None:
    """The caller's memory version (`changes`); None for an admin's export of tenants, which has none."""
    return client.changes().memory if tenants is None else None


def _tenant_name(client: Client) -> str:
    return client.status().tenant


# ---- import ---------------------------------------------------------------------


@dataclass
class Section:
    """The lines of one tenant's records: all of a plain export, or one `tenant` record's part of an `--all` one."""

    tenant: str | None
    first_line: int
    last_line: int
    records: int = 0


@dataclass
class Checked:
    """A whole file, checked: its sha256, line count, header and tenant sections."""

    digest: str
    lines: int
    header: Header
    sections: list[Section] = field(default_factory=list)


def check(path, *, lines: Iterator[bytes] | None = None, refused: str | None = "nothing was imported",
          where: Callable[[int], str] | None = None) -> Checked:
    """Read the whole file and check every line; raise InvalidParams naming the first bad one (`where` it came
    from, by default its line number) and, after it, `refused`: what refusing the file means to the caller.

    Checked: the header's format, each record's shape and limits, its times,
    and that every id it refers to belongs to a record earlier in the file
    (and in the same tenant section); a failure of the last kind is `Torn`.
    From format 4 the file must end with its `end` line, counting the lines
    between the header and it: a file cut short, or with lines lost or
    added, is refused.
    """
    after = f"; {refused}" if refused else ""
    digest = hashlib.sha256()
    source = lines if lines is not None else open(path, "rb")
    header = None
    sections: list[Section] = []
    seen: dict[str, set[int]] = {}
    number = 0
    ended = None
    try:
        for number, line in enumerate(source, start=1):
            digest.update(line)
            if number == 1:
                header = _check_header(line)
                sections.append(Section(tenant=None, first_line=2, last_line=1))  # None: the caller's tenant
                seen = _fresh()
                continue
            if ended is not None:
                raise InvalidParams(f"line {number}: a line after the end line (line {ended}){after}",
                                    path=f"line {number}")
            try:
                rec = _line.decode(line)
                if isinstance(rec, End):
                    ended = number
                    if rec.records != number - 2:
                        raise InvalidParams(f"the end line counts {rec.records} lines between the header and it, "
                                            f"and the file holds {number - 2}: lines were lost or added")
                    continue
                _check_record(rec, seen)
            except (msgspec.ValidationError, msgspec.DecodeError, ValueError) as e:
                at = where(number) if where else f"line {number}"
                raise InvalidParams(f"{at}: {_words(e)}{after}", path=f"line {number}") from None
            except InvalidParams as e:
                at = where(number) if where else f"line {number}"
                raise type(e)(f"{at}: {e.message}{after}", path=f"line {number}") from None
            if isinstance(rec, TenantRecord):
                if header.tenant is not None:
                    raise InvalidParams(f"line {number}: a tenant record in a one-tenant export", path=f"line {number}")
                if sections and sections[-1].last_line < sections[-1].first_line and sections[-1].tenant is None:
                    sections.pop()
                sections.append(Section(tenant=rec.name, first_line=number + 1, last_line=number))
                seen = _fresh()
                continue
            sections[-1].last_line = number
            sections[-1].records += 1
    finally:
        if lines is None:
            source.close()
    if header is None:
        raise InvalidParams("the file is empty: no export header", path="line 1")
    if ended is None and header.format >= FORMAT_END:
        raise InvalidParams(f"the file stops at line {number} without its end line: it was cut short (a copy or "
                            f"download that stopped early?){after}", path=f"line {number + 1}")
    return Checked(digest=digest.hexdigest(), lines=number, header=header,
                   sections=[s for s in sections if s.records or s.tenant is not None])


def _fresh() -> dict[str, set]:
    """The ids (names, for people) each kind has had so far in a tenant's part; `applied`: applied fact batches;
    `relation`: (source, relation, target) triples."""
    return {k: set() for k in ("conversation", "entry", "entity", "user", "team", "fact_batch", "applied", "fact",
                               "relation", "salience", "revision")}


def _words(e: Exception) -> str:
    if isinstance(e, msgspec.ValidationError):  # the words remember would use ("a title is one line, ...")
        words, path = validation.describe(e)
        return f"{path}: {words}" if path else words
    return str(e)


def _check_header(line: bytes) -> Header:
    try:
        raw = msgspec.json.decode(line)
    except msgspec.DecodeError:
        raise InvalidParams.at("line 1", "not JSON; an Arbiter export starts with its header line") from None
    if not isinstance(raw, dict) or raw.get("kind") != "arbiter-export":
        raise InvalidParams.at("line 1", "not an Arbiter export header (kind \"arbiter-export\")")
    if isinstance(raw.get("format"), int) and raw["format"] > FORMAT:
        raise FormatTooNew(
            f"this file is export format {raw['format']}, written by "
            + (f"Arbiter {raw['arbiter']}" if isinstance(raw.get("arbiter"), str) else "a newer Arbiter") + "; this "
            f"Arbiter reads formats up to {FORMAT}: upgrade Arbiter to import it", path="format",
        )
    try:
        return _header.decode(line)
    except msgspec.ValidationError as e:
        raise InvalidParams.at("line 1", _words(e)) from None


def _check_record(rec, seen: dict[str, set]) -> None:
    def known(kind: str, old: int | str | None, name: str) -> None:
        if old is not None and old not in seen[kind]:
            raise Torn(f"{name} {old!r} names no {kind} earlier in the file", path=name)

    def first(kind: str, key, name: str) -> None:
        # A second record under one id would leave its references meaning either.
        if key in seen[kind]:
            raise Torn(f"{name} {key!r}: a second {kind.replace('_', ' ')} with it in the file", path=name)
        seen[kind].add(key)

    def window(start: str, end: str | None, names: str, *, empty: bool) -> None:
        # The store never writes a window that ends before it starts (nor, on the record axis, an empty one).
        if end is not None and (parse_time(end) - parse_time(start) < (0 if empty else 1)):
            raise InvalidParams(f"{names}: the window ends before it starts", path=names.split(",")[0])

    def joins(a: int, b: int, what: str) -> None:
        if a == b:
            raise InvalidParams(f"a {what} cannot join {a} to itself", path="target_id")

    if isinstance(rec, UserRecord):
        parse_time(rec.created_at, path="created_at")
        first("user", rec.name, "name")
    elif isinstance(rec, TeamRecord):
        parse_time(rec.created_at, path="created_at")
        first("team", rec.name, "name")
    elif isinstance(rec, MemberRecord):
        known("team", rec.team, "team")
        known("user", rec.user, "user")
        for name in ("joined_at", "left_at"):
            if (value := getattr(rec, name)) is not None:
                parse_time(value, path=name)
    elif isinstance(rec, EntryRecord):
        _check_source(rec.source)  # as remember does (here, not in the record: an export builds it from stored rows)
        known("conversation", rec.conversation_id, "conversation_id")
        known("entry", rec.parent_id, "parent_id")
        for name in ("recorded_at", "valid_from", "valid_to", "revised_at"):
            if (value := getattr(rec, name)) is not None:
                parse_time(value, path=name)
        window(rec.valid_from, rec.valid_to, "valid_from, valid_to", empty=True)
        first("entry", rec.id, "id")
    elif isinstance(rec, RevisionRecord):
        _check_source(rec.source)
        known("entry", rec.entry_id, "entry_id")
        known("conversation", rec.conversation_id, "conversation_id")
        for name in ("recorded_from", "recorded_to", "valid_from", "valid_to"):
            if (value := getattr(rec, name)) is not None:
                parse_time(value, path=name)
        window(rec.recorded_from, rec.recorded_to, "recorded_from, recorded_to", empty=False)
        window(rec.valid_from, rec.valid_to, "valid_from, valid_to", empty=True)
        # One state per record window: a second ending at the same instant would say two things of one time.
        first("revision", (rec.entry_id, parse_time(rec.recorded_to)), "recorded_to")
    elif isinstance(rec, SalienceRecord):
        known("entry", rec.entry_id, "entry_id")
        first("salience", rec.entry_id, "entry_id")
        if rec.last_access is not None:
            parse_time(rec.last_access, path="last_access")
    elif isinstance(rec, RetirementRecord):
        known("entry", rec.entry_id, "entry_id")
        parse_time(rec.at, path="at")
    elif isinstance(rec, RelationRecord):
        known("entry", rec.source_id, "source_id")
        known("entry", rec.target_id, "target_id")
        joins(rec.source_id, rec.target_id, "relation")
        relations.require_qualifier(rec.relation, rec.qualifier)
        first("relation", (rec.source_id, rec.relation, rec.target_id), "relation")
        parse_time(rec.created_at, path="created_at")
    elif isinstance(rec, ConversationRecord):
        parse_time(rec.created_at, path="created_at")
        first("conversation", rec.id, "id")
    elif isinstance(rec, EntityRecord):
        for value in (rec.created_at, rec.updated_at, rec.retired_at, *(n.created_at for n in rec.names)):
            if value is not None:
                parse_time(value, path="created_at")
        keys = [entity_names.key(n.name) for n in rec.names]
        if len(set(keys)) < len(keys):  # names are unique per tenant, case aside
            raise InvalidParams.at("names", "two of them are one name (case and spacing aside)")
        first("entity", rec.id, "id")
    elif isinstance(rec, EntityMergeRecord):
        known("entity", rec.id, "id")
        known("entity", rec.into, "into")
    elif isinstance(rec, MentionRecord):
        known("entry", rec.entry_id, "entry_id")
        known("entity", rec.entity_id, "entity_id")
    elif isinstance(rec, EntityRelationRecord):
        known("entity", rec.source_id, "source_id")
        known("entity", rec.target_id, "target_id")
        joins(rec.source_id, rec.target_id, "entity relation")
        parse_time(rec.created_at, path="created_at")
        parse_time(rec.updated_at, path="updated_at")
    elif isinstance(rec, EntityEventRecord):
        known("entity", rec.entity_id, "entity_id")
        parse_time(rec.at, path="at")
    elif isinstance(rec, PredicateRecord):
        parse_time(rec.declared_at, path="declared_at")
    elif isinstance(rec, FactBatchRecord):
        for name in ("created_at", "evaluated_at", "decided_at"):
            if (value := getattr(rec, name)) is not None:
                parse_time(value, path=name)
        first("fact_batch", rec.id, "id")
        if rec.status == "applied":
            seen["applied"].add(rec.id)
    elif isinstance(rec, FactRecord):
        check_printable("subject", rec.subject)
        check_printable("object", rec.object)
        known("fact_batch", rec.batch_id, "batch_id")
        known("entity", rec.subject_entity_id, "subject_entity_id")
        known("entity", rec.object_entity_id, "object_entity_id")
        for entry in rec.sources:
            known("entry", entry, "sources")
        for value in (rec.valid_from, rec.recorded_at, rec.changed_at, *(s.recorded_at for s in rec.states),
                      *(s.valid_to for s in rec.states)):
            if value is not None:
                parse_time(value, path="states")
        fact_records.check_states(rec, rec.batch_id in seen["applied"])
        first("fact", rec.id, "id")
    elif isinstance(rec, FactLinkRecord):
        known("fact", rec.id, "id")
        known("fact", rec.supersedes_fact_id, "supersedes_fact_id")
        known("fact", rec.finding_fact_id, "finding_fact_id")


@dataclass
class ImportSummary:
    """What an import did, per tenant section."""

    already: bool = False
    finished_at: str | None = None
    resumed_at: int | None = None
    conversations: int = 0
    entries: int = 0
    revisions: int = 0
    relations: int = 0
    entities: int = 0
    mentions: int = 0
    facts: int = 0
    teams: int = 0
    #: Users the import created: they have no token until the first user issues one (`arbiter user rotate`).
    new_users: list[str] = field(default_factory=list)
    #: Entries shared with a team the importer is not in here: imported private to the importer.
    private: int = 0


def _batches(source: Iterator[bytes], first: int, last: int) -> Iterator[tuple[int, list[bytes]]]:
    """(first line number, lines) for lines `first`..`last`, at most BATCH lines or MAX_BATCH_BYTES each."""
    batch: list[bytes] = []
    size = 0
    start = first
    for number, line in enumerate(source, start=1):
        if number < first:
            continue
        if number > last:
            break
        line = line.strip()
        if batch and (len(batch) >= BATCH or size + len(line) > MAX_BATCH_BYTES):
            yield start, batch
            batch, size, start = [], 0, number
        batch.append(line)
        size += len(line) + 1
    if batch:
        yield start, batch


def send(client: Client, path, checked: Checked, section: Section, *, source: str = "arbiter",
         lines: Callable[[], Iterator[bytes]] | None = None,
         progress: Callable[[int], None] = lambda n: None) -> ImportSummary:
    """Send one checked section in batches; if the daemon already holds part of it, go on from there."""
    summary = ImportSummary()
    first = section.first_line
    for _ in range(2):  # a second pass only after learning where an interrupted import stands
        resume = None
        stream = lines() if lines is not None else open(path, "rb")
        try:
            for first_line, batch in _batches(stream, first, section.last_line):
                reply = client.import_batch(digest=checked.digest, lines=section.last_line, first_line=first_line,
                                            records=[msgspec.Raw(b) for b in batch], source=source,
                                            authors=section.tenant is not None)
                if reply.already:
                    summary.already, summary.finished_at = True, reply.finished_at
                    return summary
                if reply.lines_done != first_line + len(batch) - 1:
                    resume = reply.lines_done + 1
                    break
                summary.conversations += reply.conversations
                summary.entries += reply.entries
                summary.revisions += reply.revisions
                summary.relations += reply.relations
                summary.entities += reply.entities
                summary.mentions += reply.mentions
                summary.facts += reply.facts
                summary.teams += reply.teams
                summary.new_users += reply.new_users
                summary.private += reply.private
                progress(len(batch))
        finally:
            if lines is None:
                stream.close()
        if resume is None:
            return summary
        summary.resumed_at = resume
        first = resume
    raise ArbiterError(f"the daemon's record of this import disagrees with the file (at line {first})")


def run_import(clients: Callable[[str | None], Client], path, *, checked: Checked | None = None,
               source: str = "arbiter", lines: Callable[[], Iterator[bytes]] | None = None,
               progress: Callable[[int], None] = lambda n: None) -> dict[str | None, ImportSummary]:
    """Check the whole file, then send each tenant section through `clients(tenant)`."""
    checked = checked or check(path, lines=lines() if lines else None)
    out: dict[str | None, ImportSummary] = {}
    for section in checked.sections:
        with clients(section.tenant) as c:
            try:
                out[section.tenant] = send(c, path, checked, section, source=source, lines=lines, progress=progress)
            except ArbiterError as e:
                raise type(e)(f"{e.message}; batches before it are written: run the same import again to go on",
                              path=e.path) from None
    return out
