"""Other tools' memories, turned into an Arbiter export (header and records) for the one import path.

- `mcp-memory`: the MCP reference memory server's `memory.jsonl`
  (`{"type":"entity","name","entityType","observations"}` and
  `{"type":"relation","from","to","relationType"}` lines). Each entity becomes
  an Arbiter entity (its type if Arbiter has it, "organization" spelled
  "organisation", else `other`) and a `reference` entry titled by its name
  that mentions it, its observations the content (one per line), tagged
  with its entity type; each relation becomes a `relates_to` link between
  the entries and an entity relation (its type if Arbiter has it, else
  `related_to`); since both vocabularies are closed, the original relation
  type is also kept as a line of the source entry ("works_at: Anthropic").
- `markdown`: a folder of Markdown notes, Obsidian or basic-memory style.
  Each `.md` file becomes a `learning` entry: title from the front matter's
  `title` (else the file name), tags from its `tags` and inline `#tags`,
  `valid_from` from `created`/`date` if given; every `[[wikilink]]` to
  another note becomes a `relates_to` link.

The conversion is deterministic (times come from the files, never "now"), so
importing the same source twice is the same file twice: a no-op.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import msgspec

from arbiter import __version__
from arbiter._time import US, format_time, parse_time
from arbiter.errors import InvalidParams
from arbiter.model import CONTENT_MAX_BYTES, TITLE_MAX_BYTES
from arbiter.model import EntityRelationType, EntityType
from arbiter.transfer.model import (
    EntityNameRecord, EntityRecord, EntityRelationRecord, EntryRecord, Header, MentionRecord, RelationRecord,
)

SOURCES = ("arbiter", "mcp-memory", "markdown")
#: The format converted records are written in. An import is known by the sha256 of its lines, header
#: included, so a new number here would import again every source imported before it; and converted lines
#: are made in memory whole, so format 4's end line (against a file cut short) would guard nothing.
SOURCE_FORMAT = 3
_encode = msgspec.json.Encoder().encode
_TAG_CHARS = re.compile(r"[\s\x00-\x1f]+")


def _mtime(path: Path) -> str:
    return format_time(int(path.stat().st_mtime) * US)


def _whole(content: str, what: str, *, advice: str = "") -> str:
    """`content`, if an entry can hold it whole; else InvalidParams naming `what` (cut, its end would be lost without a word)."""
    size = len(content.encode())
    if size > CONTENT_MAX_BYTES:
        raise InvalidParams(f"{what} {size:,} bytes of text, over the {CONTENT_MAX_BYTES:,} an entry holds{advice}; "
                            "nothing was imported", path="file")
    return content


def _cut(text: str, limit: int) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[:limit].decode(errors="ignore").rstrip() or "(empty)"


def _tag(text: str) -> str | None:
    tag = _TAG_CHARS.sub("-", text.strip()).strip("-")[:64]
    return tag or None


def _header(when: str, source: str) -> bytes:
    # `tenant` names where the records came from; any non-null value makes this a one-tenant file.
    return _encode(Header(format=SOURCE_FORMAT, arbiter=__version__, exported_at=when, tenant=source))


def lines(source: str, path: Path) -> list[bytes]:
    """The export lines for `path` read as `source` (not "arbiter": that is already an export)."""
    if source == "mcp-memory":
        return list(_mcp_memory(path))
    if source == "markdown":
        return list(_markdown(path))
    raise InvalidParams(f"unknown source {source!r}; choose one of {', '.join(SOURCES)}", path="from")


def origin(source: str, line: bytes, number: int) -> str:
    """What converted line `number` came from, for an error: a note's file, an MCP entity's name (no file of the
    user's has the converted lines)."""
    rec = msgspec.json.decode(line)
    if source == "markdown" and rec.get("kind") == "entry":
        return rec["source"]
    if source == "mcp-memory" and rec.get("kind") in ("entry", "entity"):
        return f"entity {rec.get('title', rec.get('name'))!r}"
    return f"line {number} of the converted {source} records"


# ---- the MCP reference memory server ------------------------------------------------


class _McpLine(msgspec.Struct):
    type: str
    name: str | None = None
    entityType: str | None = None
    observations: list[str] = []
    # `from` is a Python keyword: renamed on the wire.
    from_: str | None = msgspec.field(default=None, name="from")
    to: str | None = None
    relationType: str | None = None


def _mcp_memory(path: Path) -> Iterator[bytes]:
    when = _mtime(path)
    decoder = msgspec.json.Decoder(_McpLine)
    entities: dict[str, tuple[str | None, list[str]]] = {}
    relations: list[tuple[str, str, str]] = []
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                item = decoder.decode(line)
            except (msgspec.ValidationError, msgspec.DecodeError) as e:
                raise InvalidParams(f"{path.name} line {number}: {e}; nothing was imported", path=f"line {number}") \
                    from None
            if item.type == "entity" and item.name:
                kind, observations = entities.setdefault(item.name, (item.entityType, []))
                observations.extend(item.observations)
            elif item.type == "relation" and item.from_ and item.to:
                relations.append((item.from_, item.relationType or "relates_to", item.to))
            else:
                raise InvalidParams(
                    f"{path.name} line {number}: neither an entity (name) nor a relation (from, to); nothing was "
                    "imported", path=f"line {number}",
                )
    for source, relation, target in relations:  # a relation to an entity never created still names it
        for name in (source, target):
            entities.setdefault(name, (None, []))
        entities[source][1].append(f"{relation}: {target}")
    yield _header(when, "mcp-memory")
    ids = {name: i for i, name in enumerate(entities, start=1)}
    for name, (kind, observations) in entities.items():
        content = _whole("\n".join(observations), f"{path.name}: the observations of {name!r} hold")
        yield _encode(EntryRecord(
            id=ids[name], type="reference", title=_cut(name, TITLE_MAX_BYTES),
            content=content or _cut(name, CONTENT_MAX_BYTES),
            tags=[t for t in [_tag(kind or "")] if t], source="mcp-memory", conversation_id=None, parent_id=None,
            recorded_at=when, valid_from=when, valid_to=None,
        ))
    seen: set[tuple[int, int]] = set()
    for n, (source, _, target) in enumerate(relations, start=1):
        pair = (ids[source], ids[target])
        if pair[0] != pair[1] and pair not in seen:
            seen.add(pair)
            yield _encode(RelationRecord(id=n, source_id=pair[0], relation="relates_to", target_id=pair[1],
                                         created_at=when))
    types = {"organization": "organisation", **{t: t for t in EntityType.__args__}}
    for name, (kind, _) in entities.items():
        yield _encode(EntityRecord(
            id=ids[name], name=name[:128], type=types.get((kind or "").lower(), "other"), description=None,
            created_at=when, updated_at=when, retired_at=None,
            names=[EntityNameRecord(name=name[:128], alias=False, created_at=when)],
        ))
    for name in entities:
        yield _encode(MentionRecord(entry_id=ids[name], entity_id=ids[name], how="given"))
    done: set[tuple[int, str, int]] = set()
    for source, relation, target in relations:
        kind = relation if relation in EntityRelationType.__args__ else "related_to"
        key = (ids[source], kind, ids[target])
        if key[0] != key[2] and key not in done:
            done.add(key)
            yield _encode(EntityRelationRecord(source_id=key[0], relation=kind, target_id=key[2], weight=1.0,
                                               created_at=when, updated_at=when))


# ---- Markdown notes (Obsidian, basic-memory) -------------------------------------------

_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.S)
_WIKILINK = re.compile(r"\[\[([^\]|#]+)(?:#[^\]|]*)?(?:\|[^\]]*)?\]\]")
_INLINE_TAG = re.compile(r"(?<![\w&/])#([A-Za-z][\w/-]*)")


def _front_matter(text: str) -> tuple[dict[str, object], str]:
    """The simple YAML most notes carry (`key: value`, `key: [a, b]`, `key:` then `- item` lines), and the body."""
    m = _FRONT.match(text)
    if not m:
        return {}, text
    meta: dict[str, object] = {}
    key = None
    for raw in m.group(1).splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if raw.lstrip().startswith("- ") and key:
            value = meta.get(key)
            meta[key] = (value if isinstance(value, list) else []) + [raw.strip()[2:].strip().strip("'\"")]
            continue
        k, sep, v = raw.partition(":")
        if not sep:
            continue
        key, v = k.strip(), v.strip()
        if v.startswith("[") and v.endswith("]"):
            meta[key] = [x.strip().strip("'\"") for x in v[1:-1].split(",") if x.strip()]
        else:
            meta[key] = v.strip("'\"")
    return meta, text[m.end():]


def _when(value: object, fallback: str) -> str:
    if isinstance(value, str) and value:
        try:
            if re.fullmatch(r"\d{4}-\d\d-\d\d", value):
                value += "T00:00:00Z"
            return format_time(parse_time(value, path="created"))
        except InvalidParams:
            pass
    return fallback


def _markdown(folder: Path) -> Iterator[bytes]:
    if not folder.is_dir():
        raise InvalidParams(f"{folder} is not a folder of Markdown notes", path="file")
    files = sorted(p for p in folder.rglob("*.md") if not any(part.startswith(".") for part in p.relative_to(folder).parts))
    if not files:
        raise InvalidParams(f"{folder} holds no .md files", path="file")
    newest = max(int(p.stat().st_mtime) for p in files)
    yield _header(format_time(newest * US), "markdown")
    notes = []
    for p in files:
        name = os.fsdecode(p.relative_to(folder))
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:  # replacement marks would stand in for the note's words, silently
            raise InvalidParams(f"{name}: not UTF-8 text (byte {e.start}); save it as UTF-8 or move it out of "
                                "the folder; nothing was imported", path="file") from None
        meta, body = _front_matter(text)
        content = _whole(body.strip(), f"{name}:", advice=": split the note")
        title = str(meta.get("title") or p.stem)
        tags = meta.get("tags") or []
        tags = [tags] if isinstance(tags, str) else list(tags)
        tags += _INLINE_TAG.findall(body)
        notes.append((p, title, content, [t for t in dict.fromkeys(_tag(str(x)) for x in tags) if t][:32], meta))
    ids = {}
    for i, (p, title, *_rest) in enumerate(notes, start=1):
        ids.setdefault(p.stem.lower(), i)
        ids.setdefault(title.lower(), i)
        if permalink := _rest[-1].get("permalink"):
            ids.setdefault(str(permalink).lower(), i)
    links = []
    for i, (p, title, body, tags, meta) in enumerate(notes, start=1):
        when = format_time(int(p.stat().st_mtime) * US)
        yield _encode(EntryRecord(
            id=i, type="learning", title=_cut(title, TITLE_MAX_BYTES), content=body or _cut(title, CONTENT_MAX_BYTES),
            tags=tags, source=_cut(os.fsdecode(p.relative_to(folder)), 200), conversation_id=None, parent_id=None,
            recorded_at=when, valid_from=_when(meta.get("created") or meta.get("date"), when), valid_to=None,
        ))
        for target in dict.fromkeys(_WIKILINK.findall(body)):
            j = ids.get(target.strip().lower()) or ids.get(Path(target.strip()).name.lower())
            if j and j != i:
                links.append((i, j))
    for n, (i, j) in enumerate(links, start=1):
        yield _encode(RelationRecord(id=n, source_id=i, relation="relates_to", target_id=j,
                                     created_at=format_time(newest * US)))
