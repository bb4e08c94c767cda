"""The session briefing: a markdown map of a tenant's memory, handed to an agent on connect.

Sections, in order: identity and totals (with a line per aspect that holds
facts), conventions detected from the data,
guidance, topic map (with the most-mentioned entities), open threads, recent activity. The text stays under a
byte budget (8 KB by default): when it would not, the least useful lists are
shortened first (recent activity, then the tag vocabulary, tag pairs and
families, entities, open threads, topic clusters), and a closing line says what was cut.
Every list shown in part, whether a query's cap or the budget left items out,
ends with how many more there are and which tool lists them (`_Part`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import apsw

from arbiter._time import format_time
from arbiter.facts import aspects
from arbiter.graph import clusters, tags, threads
from arbiter.entities.model import ENTITIES_PER_TOOL_CALL
from arbiter.model import ENTRY_TYPES, OPEN_THREADS_PER_TOOL_CALL, Briefing, ThreadSummary, TopicCluster
from arbiter.store import entries, tenants, users
from arbiter.store.users import Viewer

if TYPE_CHECKING:
    from arbiter.advisor import Advisor

MAX_CLUSTERS = 12
MAX_THREADS = 15
MAX_RECENT = 10
MAX_ENTITIES = 15
ENTITY_WINDOW = 2000
MAX_VOCABULARY = 60
MAX_PAIRS = 8
MAX_FAMILY_PAIRS = 5
CLUSTER_TAGS_SHOWN = 10
TITLE_CHARS = 90
NAMING_BUDGET_S = 12.0
#: No tool lists every tag, family or pair; these say where the tags that form topics are.
TAGS_HINT = "`explore` kind `topics` shows the tags that form topics"

#: The guidance line on tags, filled in with the tag lists the briefing shows above it once fitted (`_guidance`).
REUSE_TAGS = "- **Reuse the {shown}** above; invent a new tag only when none fits."
NO_TAGS_YET = "- **No tags yet**: choose short, general tags that later entries can reuse."

GUIDANCE = [
    "- **Search before writing.** When a request overlaps a topic below, `recall` (or `explore` kind `topic` with one "
    "of its tags) first; if the memory already holds it, extend that entry instead of writing a duplicate.",
    "- **Reply, don't restart.** A follow-up on an open thread below is a `remember` with `parent_id` set "
    "to the thread's id, not a new top-level entry.",
    "- **Link explicitly** when extending or correcting: `supersedes` (replaces and retires the old entry), "
    "`contradicts`, `refines`, `supports`. Mention another entry as `#ID` in content to leave a backlink.",
    REUSE_TAGS,
    "- `explore` kinds `around` and `backlinks` show an entry's neighbourhood before you change it; kind "
    "`briefing` returns this map again.",
]


def _guidance(any_tags: bool, families: _Part | None) -> list[str]:
    """GUIDANCE, its line on tags naming only the tag lists shown above it (the budget may cut the families)."""
    shown = "tag vocabulary and families" if families is not None and families.keep else "tag vocabulary"
    tags_line = REUSE_TAGS.format(shown=shown) if any_tags else NO_TAGS_YET
    return [tags_line if line == REUSE_TAGS else line for line in GUIDANCE]


def _date(us: int | None) -> str:
    text = format_time(us)
    return text[:16].replace("T", " ") + " UTC" if text else "never"


def _md(text: str, limit: int = 0) -> str:
    """One line of user text, safe inside a markdown list item; clipped to `limit` characters if given."""
    flat = " ".join(text.split()).replace("`", "'")
    return flat if not limit or len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


@dataclass
class _Part:
    """A list inside a section: `items` are those read (a query's cap may leave some unread), `total` how many exist.

    `render(kept items, more)` makes its lines; `more` is "" when every item
    is shown, else "… N more (`hint`)", N counting both the items the byte
    budget cut and those never read: a model told nothing would believe it
    saw the whole list.
    """

    what: str
    items: list[str]
    render: Callable[[list[str], str], list[str]]
    hint: str
    total: int
    floor: int = 0
    keep: int = field(init=False)

    def __post_init__(self) -> None:
        self.keep = len(self.items)

    def lines(self) -> list[str]:
        hidden = self.total - self.keep
        return self.render(self.items[: self.keep], f"… {hidden} more ({self.hint})" if hidden else "")

    @property
    def cut(self) -> int:
        """Items read but dropped to fit the byte budget."""
        return len(self.items) - self.keep


@dataclass
class _Doc:
    """Blocks of lines in order: fixed lines, a `_Part` the byte budget may shorten, or a function of what the
    parts keep (lines that name what is shown above them)."""

    blocks: list[list[str] | _Part | Callable[[], list[str]]] = field(default_factory=list)

    def render(self, note: str | None = None) -> str:
        out: list[str] = []
        for b in self.blocks:
            out.extend(b if isinstance(b, list) else b.lines() if isinstance(b, _Part) else b())
        if note:
            out += ["", note]
        return "\n".join(out).rstrip() + "\n"


def _bullets(items: list[str], more: str, indent: str = "") -> list[str]:
    return items + [f"{indent}- {more}"] if more else list(items)


def _inline(head: str, empty: str = "") -> Callable[[list[str], str], list[str]]:
    """One line: `head` then the items and `more`, comma-separated (`empty` when no item is left, none if "")."""
    def render(items: list[str], more: str) -> list[str]:
        if not items:
            return [head + empty + "."] if empty else []
        return [head + ", ".join(items + ([more] if more else [])) + "."]
    return render


def build(
    conn: apsw.Connection,
    v: Viewer,
    tenant_name: str,
    *,
    now: int,
    advisor: Advisor | None,
    max_bytes: int = 8192,
    naming_deadline: float | None = None,
) -> tuple[Briefing, list[clusters.NameRow]]:
    """The briefing of what `v` sees, and the fresh cluster names the caller should save (`clusters.save_names`)."""
    totals = entries.type_totals(conn, v)
    active = sum(t[1] for t in totals)
    retired = sum(t[2] for t in totals)
    last = max((t[3] for t in totals if t[3] is not None), default=None)
    shapes = clusters.shapes(conn, v)
    if naming_deadline is None:
        naming_deadline = clusters.naming_deadline(NAMING_BUDGET_S)
    named, fresh = clusters.name(
        conn, v, shapes[:MAX_CLUSTERS], advisor=advisor, now=now, deadline=naming_deadline
    )
    open_threads, thread_count = threads.open_threads(conn, v, limit=MAX_THREADS)
    doc = _Doc()

    # 1. identity and totals
    by_type = ", ".join(
        f"{etype} {a}" + (f" (+{r} retired)" if r else "") for etype, a, r, _ in totals if a or r
    )
    doc.blocks.append([
        "# Memory briefing",
        "",
        "## 1. Identity and totals",
        *_identity(conn, v, tenant_name),
        f"- You see {active} active entries, {retired} retired, "
        f"{tenants.conversation_count(conn, v)} conversations; last write {_date(last)}.",
        f"- By type (active): {by_type or 'none yet'}.",
        *_ownership(conn, v),
    ])
    doc.blocks.append(aspects.briefing_lines(conn, v))  # at most 15 lines: never cut
    doc.blocks.append(["", "## 2. Conventions"])

    # 2. conventions
    used = [t[0] for t in totals if t[1]]
    unused = [t for t in ENTRY_TYPES if t not in used]
    doc.blocks.append([
        f"- Entry types in use: {', '.join(used) or 'none'}" + (f" (never used: {', '.join(unused)})" if unused else "")
        + "."
    ])
    vocabulary = tags.vocabulary(conn, v, top=MAX_VOCABULARY, strongest=MAX_PAIRS)
    vocab_items = [f"`{t.tag}` ×{t.count}" for t in vocabulary.tags]
    doc.blocks.append(_Part(
        "tags of the vocabulary",
        vocab_items,
        _inline("- Tag vocabulary (by use on active entries): ", "no tags yet"),
        TAGS_HINT,
        total=vocabulary.distinct,
        floor=min(10, len(vocab_items)),
    ))
    conv = tags.conventions(conn, v)
    # Every family is named once: in a pair of families that co-occur, else alone.
    fam_items = [
        f"  - `{fp.a.name}` ({', '.join(fp.a.members[:6])}) with `{fp.b.name}` ({', '.join(fp.b.members[:6])}): "
        f"on the same entry {fp.together}×"
        for fp in conv.family_pairs
    ]
    paired = {f.name for fp in conv.family_pairs for f in (fp.a, fp.b)}
    alone = [f"  - `{fam.name}`: {', '.join(fam.members[:8])} ({fam.uses} uses)"
             for fam in conv.families if fam.name not in paired]
    families = None
    if fam_items or alone:
        families = _Part(
            "tag families",
            fam_items[:MAX_FAMILY_PAIRS] + alone[:3],
            lambda items, more: (["- Tag families (tags of one shape; use one of each family that applies):"]
                                 + _bullets(items, more, "  ") if items else []),
            TAGS_HINT,
            total=len(fam_items) + len(alone),
        )
        doc.blocks.append(families)
    pair_items = [
        f"`{p.a}` + `{p.b}` ×{p.count}" for p in vocabulary.pairs if p.count >= 2
    ]
    if pair_items:
        doc.blocks.append(_Part(
            "tag pairs",
            pair_items,
            _inline("- Tags that travel together: "),
            "`explore` kind `topic` with a `tag` shows its topic and the tags beside it",
            total=vocabulary.paired,
        ))

    # 3. guidance
    doc.blocks.append(lambda: ["", "## 3. Before you write", *_guidance(bool(vocab_items), families), "",
                               "## 4. Topic map"])

    # 4. topic map
    if named:
        cluster_items = [_cluster_line(c) for c in named]
        doc.blocks.append(_Part(
            "topic clusters",
            cluster_items,
            _bullets,
            "`explore` kind `topics` lists them all",
            total=len(shapes),
            floor=min(3, len(cluster_items)),
        ))
    else:
        doc.blocks.append(["- No topic clusters yet (they need at least three tags that share entries)."])
    top, mentioned = talked_about(conn, v)
    if top:
        doc.blocks.append(_Part(
            "entities",
            [f"**{_md(name, 60)}** ({etype}) ×{n}" for name, etype, n in top],
            _inline("- Most-mentioned entities of the latest entries (`entities` with a `name` for their memories): "),
            f"`entities` finds them by name or type, up to {ENTITIES_PER_TOOL_CALL} a call",
            total=mentioned,
            floor=min(5, len(top)),
        ))

    # 5. open threads
    doc.blocks.append(["", "## 5. Open threads (newest activity first; continue one with `remember` and its `parent_id`)"])
    if open_threads:
        doc.blocks.append(_Part(
            "open threads", _thread_lines(open_threads), _bullets,
            f"`explore` kind `open_threads` lists up to {OPEN_THREADS_PER_TOOL_CALL}",
            total=thread_count,
            floor=min(3, len(open_threads)),
        ))
    else:
        doc.blocks.append(["- None."])

    # 6. recent activity
    doc.blocks.append(["", "## 6. Recent activity"])
    recent = entries.recent(conn, v, limit=MAX_RECENT)
    if recent:
        doc.blocks.append(_Part(
            "recent entries",
            [f"- #{eid} [{etype}] {_md(title, TITLE_CHARS)} ({_date(rec)[:10]})" for eid, etype, title, rec in recent],
            _bullets,
            "`list` pages through them, newest first",
            total=active,
            floor=min(3, len(recent)),
        ))
    else:
        doc.blocks.append(["- Nothing yet: this memory is empty."])

    text, cut = _fit(doc, max_bytes)
    return (
        Briefing(text=text, bytes=len(text.encode()), cut=cut, clusters=named, open_threads=open_threads),
        fresh,
    )


def talked_about(
    conn: apsw.Connection, v: Viewer, *, limit: int = MAX_ENTITIES
) -> tuple[list[tuple[str, str, int]], int]:
    """(name, type, mentions) of the entities most mentioned by the latest `ENTITY_WINDOW` active entries `v` sees,
    and how many different entities those entries mention.

    A window, not the whole tenant: counting every link of a 250K-entry
    tenant costs ~100 ms, and what the latest entries talk about is what a
    new session needs.
    """
    rows = conn.execute(
        "SELECT x.name, x.type, count(*) AS n, count(*) OVER () "
        "FROM entry_entities l JOIN entities x ON x.tenant_id = l.tenant_id AND x.id = l.entity_id "
        f"WHERE l.tenant_id = ? AND l.entry_id IN (SELECT e.id FROM entries e WHERE {v.sees()} AND e.valid_to IS NULL "
        "ORDER BY e.id DESC LIMIT ?) GROUP BY x.id, x.name, x.type ORDER BY n DESC, x.name LIMIT ?",
        (v.tenant_id, ENTITY_WINDOW, limit),
    ).fetchall()
    return [r[:3] for r in rows], rows[0][3] if rows else 0


def _identity(conn: apsw.Connection, v: Viewer, tenant_name: str) -> list[str]:
    teams = users.team_list(conn, v)
    if v.solo and not teams:
        return [f"- Tenant `{tenant_name}`, user `{v.user_name}` (its only user)."]
    return [
        f"- You are `{v.user_name}` in tenant `{tenant_name}`; teams: "
        + (", ".join(f"`{t}`" for t in teams) if teams else "none (everything you write is private)") + "."
    ]


def _ownership(conn: apsw.Connection, v: Viewer) -> list[str]:
    """Active entries by whose they are: personal, shared by the caller, shared by teammates."""
    if v.solo and len(v.scopes) == 1:
        return []
    mine, shared, pool = conn.execute(
        f"SELECT count(*) FILTER (WHERE e.author_id = ?1 AND e.scope_id = ?2), "
        f"count(*) FILTER (WHERE e.author_id = ?1 AND e.scope_id != ?2), count(*) FILTER (WHERE e.author_id != ?1) "
        f"FROM entries e WHERE {v.sees()} AND e.valid_to IS NULL",
        (v.user_id, v.private_scope),
    ).fetchone()
    return [f"- Active entries: {mine} personal (only you see them), {shared} you shared with a team, "
            f"{pool} in your teams' pool from teammates."]


def _cluster_line(c: TopicCluster) -> str:
    shown = ", ".join(f"`{t}`" for t in c.tags[:CLUSTER_TAGS_SHOWN])
    more = f" +{len(c.tags) - CLUSTER_TAGS_SHOWN}" if len(c.tags) > CLUSTER_TAGS_SHOWN else ""
    return f"- **{_md(c.name)}** ({c.entries} entries): {_md(c.description)} Tags: {shown}{more}."


def _thread_lines(open_threads: list[ThreadSummary]) -> list[str]:
    """One item per thread, grouped by who sees it (private first, then each team), newest activity first.

    A group's heading rides on its first thread's item, so the budget cuts
    threads, never a heading alone, and the count of those left out is of threads.
    """
    if all(t.team is None for t in open_threads):
        return [_thread_line(t) for t in open_threads]
    out = []
    for team in sorted({t.team for t in open_threads}, key=lambda x: (x is not None, x or "")):
        group = [t for t in open_threads if t.team == team]
        heading = "Private (yours)" if team is None else f"Shared with team `{team}` (reply to continue them)"
        out += [f"- {heading}:\n  " + _thread_line(group[0])] + ["  " + _thread_line(t) for t in group[1:]]
    return out


def _thread_line(t: ThreadSummary) -> str:
    by = f" by {t.author}" if t.author else ""
    return (
        f"- #{t.root.id} [{t.root.type}] {_md(t.root.title, TITLE_CHARS)}{by}: {t.replies} "
        f"{'reply' if t.replies == 1 else 'replies'}, last {t.last_activity[:10]} "
        f"(latest #{t.last_reply.id}: {_md(t.last_reply.title, TITLE_CHARS // 2)})"
    )


# Least useful first: what goes when the briefing is over budget.
_CUT_ORDER = [
    "recent entries", "tags of the vocabulary", "tag pairs", "tag families", "entities", "open threads", "topic clusters",
]
_NOTE_RESERVE = 400


def _fit(doc: _Doc, max_bytes: int) -> tuple[str, list[str]]:
    parts = {b.what: b for b in doc.blocks if isinstance(b, _Part)}
    budget = max_bytes - _NOTE_RESERVE
    text = doc.render()
    for what in _CUT_ORDER:
        part = parts.get(what)
        while part is not None and len(text.encode()) > budget and part.keep > part.floor:
            part.keep = max(part.floor, part.keep // 2)
            text = doc.render()
    cut = [f"{p.cut} of {len(p.items)} {p.what}" for p in parts.values() if p.cut]
    if cut:
        text = doc.render(
            f"_Cut to stay under {max_bytes // 1024} KB: {'; '.join(cut)}. "
            "`recall`, `list` and `explore` (kinds `open_threads`, `topics`, `topic`) reach the rest._"
        )
    data = text.encode()
    if len(data) > max_bytes:  # every list at its floor and still too long: very long titles
        text = data[: max_bytes - 60].decode("utf-8", "ignore").rsplit("\n", 1)[0] + "\n\n_Truncated at the size limit._\n"
        cut.append("the end of the briefing")
    return text, cut
