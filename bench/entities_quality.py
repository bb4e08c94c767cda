"""How well the entities an entry is linked to are the ones its text names: precision, recall and F1, overall and by type.

    python -m bench.entities_quality [--notes bench/entities_notes.txt] [--tree PATH] [--misses] [--out FILE]

The notes (`entities_notes.txt`, hand-labelled agent-style notes: engineering,
meetings, CRM, a personal assistant, research) are written one `remember` at a
time, in order, to a fresh daemon through the real socket, so extraction runs
as it runs for a user, evidence from earlier notes included. Then every
entity is read back (`entities`, then `entity_show` of each) and each note's
linked entities are compared with its gold mentions. The briefing's entity
line (its most-mentioned entities) is printed too, with how many of its
names are gold names of some note.

A note's mentions are a set: a name written three times in one note is one
mention. A linked entity matches a gold mention if its name or one of its
aliases is the gold name (or its canonical spelling) once both are
normalised (`names.norm`, honorifics such as "Dr." dropped). By type, a
linked entity counts for the type it was given and a gold mention is found
only by an entity of its type: extraction leaves most names "other", so
typed figures sit far under the overall ones. `--misses` prints what was missed and
what was linked wrongly, note by note. `--tree` runs another checkout's
daemon, to measure before and after a change with one scorer. Nothing is
asserted: docs/benchmarks.md holds the figures.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from arbiter.entities.names import norm
from bench import report

NOTES = Path(__file__).with_name("entities_notes.txt")
_MARK = re.compile(r"\{([^{}|]+)\|([a-z]+)(?:\|([^{}|]+))?\}")
_HONORIFIC = re.compile(r"^(?:dr|prof|mr|mrs|ms|mx|sir|dame)\.?\s+", re.IGNORECASE)


@dataclass(frozen=True)
class Gold:
    surface: str
    type: str
    canonical: str | None = None

    def keys(self) -> set[str]:
        return {match_key(self.surface)} | ({match_key(self.canonical)} if self.canonical else set())


@dataclass
class Note:
    title: str
    content: str
    gold: list[Gold] = field(default_factory=list)


def match_key(name: str) -> str:
    """What a name is compared by: normalised, without an honorific ("Dr. Patel" is "patel")."""
    return norm(_HONORIFIC.sub("", name.strip()))


def _unmark(line: str, gold: list[Gold]) -> str:
    def take(m: re.Match) -> str:
        gold.append(Gold(m.group(1), m.group(2), m.group(3)))
        return m.group(1)
    return _MARK.sub(take, line)


def parse(text: str) -> list[Note]:
    """The notes of a labelled file: "### title", then content lines; `{surface|type}` marks, `%` comments."""
    notes: list[Note] = []
    for line in text.splitlines():
        if line.startswith("%"):
            continue
        if line.startswith("### "):
            notes.append(Note("", ""))
            notes[-1].title = _unmark(line[4:].strip(), notes[-1].gold)
        elif notes:
            body = _unmark(line, notes[-1].gold)
            notes[-1].content = f"{notes[-1].content}\n{body}" if notes[-1].content else body
        elif line.strip():
            raise ValueError(f"text before the first note: {line!r}")
    for n in notes:
        n.content = n.content.strip()
        if "{" in n.title + n.content or "}" in n.title + n.content:
            raise ValueError(f"a malformed mark in note {n.title!r}")
        # A name marked more than once in a note is one mention.
        n.gold = list({match_key(g.surface): g for g in n.gold}.values())
    return notes


@dataclass(frozen=True)
class Linked:
    """An entity a note was linked to: its name, aliases and type."""
    name: str
    type: str
    aliases: tuple[str, ...] = ()

    def keys(self) -> set[str]:
        return {match_key(n) for n in (self.name, *self.aliases)}


@dataclass
class Tally:
    linked: int = 0
    right: int = 0
    gold: int = 0
    found: int = 0
    #: Gold mentions found by an entity of any type (by type: the name found, typed or not).
    named: int = 0

    def figures(self) -> dict:
        p = self.right / self.linked if self.linked else 0.0
        r = self.found / self.gold if self.gold else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        return {"precision": round(p, 3), "recall": round(r, 3), "f1": round(f, 3),
                "recall_any_type": round(self.named / self.gold, 3) if self.gold else 0.0,
                "linked": self.linked, "wrong": self.linked - self.right, "gold": self.gold, "missed": self.gold - self.found}


@dataclass
class Score:
    overall: Tally = field(default_factory=Tally)
    #: Typed: a linked entity counts for its own type, and is right only if it names a gold mention of that type.
    by_type: dict[str, Tally] = field(default_factory=dict)
    misses: list[tuple[int, str]] = field(default_factory=list)
    wrong: list[tuple[int, str]] = field(default_factory=list)

    def result(self) -> dict:
        return {**self.overall.figures(), "by_type": {t: self.by_type[t].figures() for t in sorted(self.by_type)}}


def score(notes: list[Note], linked: list[list[Linked]]) -> Score:
    """Compare each note's gold mentions with the entities it was linked to (`linked[i]` for `notes[i]`).

    A gold mention is found if an entity the note is linked to answers to it; a
    linked entity is right if it answers to one of the note's gold mentions.
    So a note naming "Zoë Lindqvist" and "Zoë" is right to be linked to one
    person or to two, and "Met Lee Chen" is wrong whatever else is found.
    """
    s = Score()

    def tally(t: str) -> Tally:
        return s.by_type.setdefault(t, Tally())

    for i, (note, got) in enumerate(zip(notes, linked, strict=True)):
        for g in note.gold:
            hits = [e for e in got if e.keys() & g.keys()]
            s.overall.gold += 1
            s.overall.found += bool(hits)
            s.overall.named += bool(hits)
            tally(g.type).gold += 1
            tally(g.type).found += any(e.type == g.type for e in hits)
            tally(g.type).named += bool(hits)
            if not hits:
                s.misses.append((i, f"{g.surface} ({g.type})"))
        for e in got:
            golds = [g for g in note.gold if e.keys() & g.keys()]
            s.overall.linked += 1
            s.overall.right += bool(golds)
            tally(e.type).linked += 1
            tally(e.type).right += any(g.type == e.type for g in golds)
            if not golds:
                s.wrong.append((i, f"{e.name} ({e.type})"))
    return s


def linked_entities(client, ids: list[int]) -> list[list[Linked]]:
    """Each entry's linked entities, read back through the client: every entity, then the entries naming it."""
    by_entry: dict[int, list[Linked]] = {i: [] for i in ids}
    listed = client.entities(limit=1000)
    if len(listed) == 1000:
        raise SystemExit("more than 1000 entities: this reader would miss some")
    for e in listed:
        shown = client.entity_show(e.name, limit=200)  # a note set of a few hundred entries: no entity has more
        for m in shown.entries:
            if m.id in by_entry:
                by_entry[m.id].append(Linked(e.name, e.type, tuple(e.aliases)))
    return [by_entry[i] for i in ids]


def run(notes: list[Note], home: Path, *, tree: Path | None = None) -> tuple[list[list[Linked]], list[str]]:
    """Write `notes` to a fresh daemon on `home` one `remember` at a time; the entities each was linked to, and the
    names on the briefing's entity line."""
    from bench.load import BenchDaemon

    daemon = BenchDaemon(home, "NORMAL", tree=tree)
    try:
        with daemon.client() as c:
            ids, took = [], []
            for n in notes:
                started = time.perf_counter()
                ids.append(c.remember(type="context", title=n.title, content=n.content).id)
                took.append(time.perf_counter() - started)
            print(f"remember p50 {statistics.median(took) * 1000:.2f} ms over {len(took)} notes (a tiny tenant)",
                  file=sys.stderr)
            line = next((x for x in c.briefing(max_bytes=65536).text.splitlines() if "Most-mentioned entities" in x), "")
            return linked_entities(c, ids), re.findall(r"\*\*(.+?)\*\*", line)
    finally:
        daemon.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes", type=Path, default=NOTES)
    ap.add_argument("--tree", type=Path, help="run the daemon from this checkout")
    ap.add_argument("--misses", action="store_true", help="print each missed and each wrong entity")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    notes = parse(args.notes.read_text(encoding="utf-8"))
    home = Path(tempfile.mkdtemp(prefix="arb-entq-"))
    try:
        linked, briefed = run(notes, home, tree=args.tree)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    s = score(notes, linked)
    if args.misses:
        for label, items in (("missed", s.misses), ("wrong", s.wrong)):
            for i, what in items:
                print(f"{label:6} #{i + 1:<3} {notes[i].title[:40]:40} {what}", file=sys.stderr)
    gold = {k for n in notes for g in n.gold for k in g.keys()}
    result = {"notes": len(notes), "gold_mentions": sum(len(n.gold) for n in notes), **s.result(),
              # The briefing's "most-mentioned entities" line, and how many of its names some note's gold holds.
              "briefing_entities": briefed, "briefing_entities_gold": sum(match_key(b) in gold for b in briefed)}
    report(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
