"""Export and import: round trips between real daemons, re-import, bad files, resuming, other tools' files."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import stat
import tempfile
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from arbiter.client import Client
from arbiter.errors import ArbiterError, Conflict, InvalidParams, NotFound
from arbiter.store import open_database
from arbiter.transfer import files, sources
from tests.conftest import DaemonProcess
from tests.integration.test_cli import arbiter, fails, js, ok

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def target(tmp_path):
    """A second daemon on a fresh home: where exports are imported."""
    home = Path(tempfile.mkdtemp(prefix="arb-"))
    d = DaemonProcess(home).start()
    yield d
    d.stop()
    shutil.rmtree(home, ignore_errors=True)


def build_history(c: Client, rng: random.Random, steps: int) -> None:
    """A random memory: entries across past valid times, replies, supersessions, retirements, links, conversations,
    and facts through the gate (applied, superseded, reinforced, rejected, left for review, applied later)."""
    ids: list[int] = []
    conversations: list[int] = []
    waiting: list[int] = []  # fact batches proposed and not yet decided
    for step in range(steps):
        op = rng.choice(["remember", "remember", "reply", "supersede", "forget", "link", "conversation", "update",
                         "restore", "entity", "reinforce", "fact", "fact", "fact", "decide", "declare"])
        if op == "conversation":
            conversations.append(c.conversation_create(f"chat {step}").id)
            continue
        if op == "fact":
            when = f"2026-{rng.randint(1, 10):02d}-{rng.randint(1, 28):02d}T00:00:00Z"
            facts = [{"subject": rng.choice(["user", "user", "Alice Martin"]),
                      "predicate": rng.choice(["works_at", "works_at", "lives_in", "enjoys", "team_size", "mood"]),
                      "object": rng.choice(["Acme", "Globex", "Berlin", "jazz", "12"]),
                      "confidence": rng.choice([0.3, 0.8, 1.0, 1.0]), "valid_from": when,
                      "sources": rng.sample(ids, min(len(ids), rng.randint(0, 2)))} for _ in range(rng.randint(1, 3))]
            try:
                batch = c.facts_propose(facts, apply=rng.random() < 0.6)
            except NotFound:  # a source was forgotten
                continue
            if batch.status != "applied":
                waiting.append(batch.id)
            continue
        if op == "decide":
            if waiting:
                batch = waiting.pop(rng.randrange(len(waiting)))
                rng.choice([c.batch_apply, c.batch_reject, c.batch_evaluate])(batch)
            continue
        if op == "declare":
            try:
                c.predicate_declare(rng.choice(["team_size", "mood"]), functional=rng.random() < 0.5)
            except Conflict:  # declared (or first applied) the other way before
                pass
            continue
        if not ids:
            op = "remember"
        tags = rng.sample(["alpha", "beta", "gamma", "delta", "omega"], rng.randint(0, 3))
        when = f"2026-{rng.randint(1, 10):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z"
        if op == "remember":
            conv = rng.choice(conversations) if conversations and rng.random() < 0.3 else None
            weight = rng.choice([{}, {}, {"salience": 0.9}, {"permanent": True}])
            ids.append(c.remember(type=rng.choice(["project", "learning", "user"]), title=f"entry {step}",
                                  content=f"content {step} about {' '.join(tags) or 'nothing'}", tags=tags,
                                  valid_from=when, conversation_id=conv, speaker=rng.choice([None, "Ana"]),
                                  **weight).id)
        elif op == "reply":
            try:
                ids.append(c.reply(rng.choice(ids), f"reply {step} on {' '.join(tags)}").id)
            except (NotFound, InvalidParams):  # the parent is retired
                pass
        elif op == "supersede":
            old = rng.choice(ids)
            try:
                ids.append(c.remember(type="project", title=f"revised {step}", content=f"newer view {step}",
                                      tags=tags, supersedes_ids=[old]).id)
            except (NotFound, InvalidParams):  # the old one is already retired
                pass
        elif op == "forget":
            c.forget(rng.choice(ids))
        elif op == "update":  # a correction: the old text becomes an earlier recorded state
            try:
                c.update(rng.choice(ids), content=f"corrected at step {step}", tags=tags,
                         speaker=rng.choice([None, "Ana", "Bo", ""]))
            except (NotFound, InvalidParams):  # retired entries are not corrected
                pass
        elif op == "entity":  # name things, sometimes fold one into another
            name = rng.choice(["Postgres", "Alice Martin", "Project Atlas", "Berlin"])
            ids.append(c.remember(type="project", title=f"about {name} {step}",
                                  content=f"{name} came up again at step {step}.", entities=[name]).id)
            if rng.random() < 0.2:
                try:
                    c.entity_merge("Postgres", rng.choice(["Berlin", "Project Atlas"]))
                except (NotFound, InvalidParams, Conflict):
                    pass
        elif op == "reinforce":
            try:
                c.reinforce(rng.choice(ids))
            except (NotFound, InvalidParams):  # retired entries are not reinforced
                pass
        elif op == "restore":
            try:
                c.restore(rng.choice(ids))
            except (NotFound, InvalidParams, Conflict):  # superseded entries stay retired
                pass
        elif op == "link" and len(ids) > 1:
            a, b = rng.sample(ids, 2)
            try:
                c.link(a, rng.choice(["relates_to", "supports", "refines"]), b)
            except (Conflict, NotFound, InvalidParams):  # a duplicate or a retired end: go on without it
                pass


def normalised(lines: list[str]) -> list[dict]:
    """The records with every id replaced by its ordinal in the file (per kind), so two exports compare ids aside."""
    ordinal: dict[tuple[str, int], int] = {}
    out = []
    for line in lines[1:]:
        rec = json.loads(line)
        kind = rec["kind"]
        if kind == "entity_event":
            rec.pop("detail")  # verbatim, holding the exporting database's ids
        if kind == "fact":  # a finding's reason names facts by the exporting database's ids
            rec["reason"] = re.sub(r"#\d+", "#", rec["reason"] or "")
        if "id" in rec and kind not in ("entity_merge", "fact_link"):
            ordinal[(kind, rec["id"])] = len([k for k in ordinal if k[0] == kind])
            rec["id"] = ordinal[(kind, rec["id"])]
        refs = (("parent_id", "entry"), ("source_id", "entry"), ("target_id", "entry"), ("entry_id", "entry"),
                ("conversation_id", "conversation"))
        if kind in ("entity_merge", "entity_relation", "entity_event", "mention"):
            refs = (("entry_id", "entry"), ("entity_id", "entity"), ("source_id", "entity"), ("target_id", "entity"),
                    ("into", "entity"), ("id", "entity"))
        if kind == "fact":
            refs = (("batch_id", "fact_batch"), ("subject_entity_id", "entity"), ("object_entity_id", "entity"))
            rec["sources"] = [ordinal[("entry", e)] for e in rec["sources"]]
        if kind == "fact_link":
            refs = (("id", "fact"), ("supersedes_fact_id", "fact"), ("finding_fact_id", "fact"))
        for key, kind_ref in refs:
            if rec.get(key) is not None:
                rec[key] = ordinal[(kind_ref, rec[key])]
        out.append(rec)
    return out


def id_maps(first: list[str], again: list[str]) -> dict[str, dict[int, int]]:
    """Old id -> new id per kind, by the records' order in two exports of the same memory."""
    def ids(lines, kind):
        return [r["id"] for r in map(json.loads, lines[1:]) if r["kind"] == kind]
    return {kind: dict(zip(ids(first, kind), ids(again, kind))) for kind in ("entry", "entity", "fact", "fact_batch")}


def fact_answers(c: Client, maps: dict[str, dict[int, int]] | None = None, **read) -> list[tuple]:
    """Every fact a read answers (each status; as_of only on active ones), ids through `maps` when given."""
    def to(kind, old):
        return old if maps is None or old is None else maps[kind][old]
    out = []
    for status in ("active", "candidate", "rejected"):
        if status != "active" and read.get("as_of"):
            continue
        for f in c.facts(status=status, limit=1000, **read).facts:
            out.append((to("fact", f.id), f.subject, f.predicate, f.object, f.confidence, f.status, f.valid_from,
                        f.valid_to, to("fact", f.supersedes_fact_id), to("fact_batch", f.batch_id),
                        [to("entry", e) for e in f.sources], f.aspects, f.finding, f.recorded_at,
                        to("entity", f.subject_entity_id), to("entity", f.object_entity_id)))
    return out


def same_facts(a: Client, b: Client, first: list[str], again: list[str]) -> None:
    """`a` and `b` answer every fact read alike, now and at each valid and record instant the facts hold."""
    maps = id_maps(first, again)
    facts = [r for r in map(json.loads, first[1:]) if r["kind"] == "fact"]
    valid = sorted({t for f in facts for t in [f["valid_from"]] + [s["valid_to"] for s in f["states"]] if t})
    known = sorted({s["recorded_at"] for f in facts for s in f["states"]})
    assert fact_answers(a, maps) == fact_answers(b)
    for when in valid[:: max(1, len(valid) // 6)]:
        assert fact_answers(a, maps, as_of=when) == fact_answers(b, as_of=when)
    for when in known[:: max(1, len(known) // 6)]:
        assert fact_answers(a, maps, known_at=when) == fact_answers(b, known_at=when)
        if valid:
            assert fact_answers(a, maps, known_at=when, as_of=valid[len(valid) // 2]) == \
                fact_answers(b, known_at=when, as_of=valid[len(valid) // 2])
    for old in list(maps["fact"])[:5]:
        mine, theirs = a.fact_history(old), b.fact_history(maps["fact"][old])
        assert [(maps["fact"][f.id], f.status) for f in mine.facts] == [(f.id, f.status) for f in theirs.facts]
        assert [(maps["fact"][r.fact_id], r.status, r.valid_to, r.confidence, r.recorded_at) for r in mine.revisions] \
            == [(r.fact_id, r.status, r.valid_to, r.confidence, r.recorded_at) for r in theirs.revisions]
    assert a.predicates() == b.predicates()
    assert [(x.slug, x.score, x.facts, x.entities, x.predicates) for x in a.aspects().aspects] == \
        [(x.slug, x.score, x.facts, x.entities, x.predicates) for x in b.aspects().aspects]
    for q in ("Acme", "jazz", "Berlin"):
        assert [maps["fact"][h.id] for h in a.recall(q, limit=20).facts] == [h.id for h in b.recall(q, limit=20).facts]


def export_lines(c: Client) -> list[str]:
    import io

    buf = io.BytesIO()
    files.export(c, buf)
    return buf.getvalue().decode().splitlines()


def test_round_trip_into_a_fresh_home_answers_the_same(daemon, target, tmp_path):
    with daemon.client() as c:
        build_history(c, random.Random(16), 80)
        faint = c.remember(type="context", title="faint", content="barely worth keeping", salience=0.05).id
        assert c.maintain(min_salience=0.2).retired == [faint]  # retired for low salience
        originals = c.list(limit=1000)
    out = tmp_path / "memory.jsonl"
    summary = js(daemon.home, "export", str(out))
    first = out.read_text().splitlines()
    header = json.loads(first[0])
    assert header["kind"] == "arbiter-export" and header["format"] == files.FORMAT and header["tenant"] == "default"
    assert summary["entries"] == len([line for line in first if '"kind":"entry"' in line])

    imported = js(target.home, "import", str(out))["default"]
    assert imported["entries"] == summary["entries"] and imported["relations"] == summary["relations"]
    with target.client() as t:
        again = export_lines(t)
    assert normalised(again) == normalised(first)

    # The same answers, ids aside, now and at past times on both axes of validity.
    with daemon.client() as c, target.client() as t:
        new_id = {old: new for old, new in zip(sorted(e["id"] for e in map(json.loads, first[1:]) if e["kind"] == "entry"),
                                               sorted(e["id"] for e in map(json.loads, again[1:]) if e["kind"] == "entry"))}
        assert len(c.list(limit=1000)) == len(originals)
        for when in ["2026-02-01T00:00:00Z", "2026-06-15T12:00:00Z", "2026-10-30T00:00:00Z", None]:
            mine = [(new_id[e.id], e.title, e.valid_to) for e in c.list(as_of=when, limit=1000)]
            theirs = [(e.id, e.title, e.valid_to) for e in t.list(as_of=when, limit=1000)]
            assert mine == theirs
            for q in ("alpha", "content beta", "reply omega"):
                assert [new_id[h.id] for h in c.recall(q, as_of=when, limit=20).hits] == \
                    [h.id for h in t.recall(q, as_of=when, limit=20).hits]
        for e in originals[:10]:
            mine, theirs = c.get(e.id), t.get(new_id[e.id])
            assert (mine.title, mine.content, mine.tags, mine.recorded_at, mine.valid_from) == \
                (theirs.title, theirs.content, theirs.tags, theirs.recorded_at, theirs.valid_from)
        # The record-time axis: what the memory said at each instant something was recorded.
        records = [json.loads(line) for line in first[1:]]
        instants = sorted({r[k] for r in records for k in ("recorded_at", "revised_at", "recorded_from") if r.get(k)})
        assert any(r["kind"] == "revision" for r in records)  # the history holds corrections
        assert any(r["kind"] == "revision" and r["speaker"] for r in records)  # of who said it too
        assert any(r["kind"] == "mention" for r in records)
        assert {r["kind"] for r in records} >= {"salience", "retirement"}
        assert [(r["entry_id"], r["reason"]) for r in records if r["kind"] == "retirement"] == \
            [(faint, next(r["reason"] for r in records if r["kind"] == "retirement"))]
        for e in originals[:10]:  # salience inputs kept: reinforcing answers alike on both sides
            mine, theirs = c.reinforce(e.id), t.reinforce(new_id[e.id])
            assert (mine.initial, mine.permanent, mine.reinforcements) == \
                (theirs.initial, theirs.permanent, theirs.reinforcements)
        assert [(e.name, e.type, sorted(e.aliases), e.mentions) for e in c.entities(limit=100)] == \
            [(e.name, e.type, sorted(e.aliases), e.mentions) for e in t.entities(limit=100)]
        for known in instants[:: max(1, len(instants) // 8)]:
            mine = [(new_id[e.id], e.content, e.speaker, e.valid_to) for e in c.list(known_at=known, limit=1000)]
            theirs = [(e.id, e.content, e.speaker, e.valid_to) for e in t.list(known_at=known, limit=1000)]
            assert mine == theirs
            assert [new_id[h.id] for h in c.recall("corrected", known_at=known, limit=20).hits] == \
                [h.id for h in t.recall("corrected", known_at=known, limit=20).hits]
        for e in originals[:10]:
            mine, theirs = c.history(e.id), t.history(new_id[e.id])
            assert [(x.content, x.recorded_at) for x in mine.entries] == [(x.content, x.recorded_at) for x in theirs.entries]
        assert {r["kind"] for r in records} >= {"predicate", "fact_batch", "fact", "fact_link"}
        assert {s["status"] for r in records if r["kind"] == "fact" for s in r["states"]} == \
            {"candidate", "active", "rejected"}
        assert any(r["kind"] == "fact" and r["states"][-1]["valid_to"] for r in records)  # superseded
        same_facts(c, t, first, again)


def test_an_export_while_an_agent_writes_is_a_file_that_imports(daemon, target, tmp_path):
    """An export reads page by page: an entry written after the entry pages and linked to an older one put a
    relation in the file whose end was not in it, and the whole file was refused at import."""
    with daemon.client() as c:
        first = c.remember(type="project", title="Older", content="Written before the export.").id
    writes = []

    def agent(n: int) -> None:  # the exporter's progress callback: runs between pages, as a concurrent writer would
        if not writes:
            with daemon.client() as w:
                writes.append(w.remember(type="project", title="Late", content="Written during the export.").id)
                w.link(writes[0], "relates_to", first)

    out = tmp_path / "m.jsonl"
    with daemon.client() as c:
        with open(out, "w+b") as f:
            summary = files.export_whole(c, f, progress=agent)
    assert summary.entries == 2 and summary.relations == 1
    assert ok(target.home, "import", str(out)).startswith("imported 2 entries")

    def busy(n: int) -> None:  # writes during every attempt: refused, never a file that will not import
        with daemon.client() as w:
            late = w.remember(type="project", title=f"Busy {len(writes)}", content=f"Again {len(writes)}.").id
            writes.append(late)
            w.link(late, "relates_to", first)

    with daemon.client() as c, open(tmp_path / "busy.jsonl", "w+b") as out, pytest.raises(Conflict):
        files.export_whole(c, out, progress=busy)


def _an_entry_import_refuses(daemon) -> int:
    """An entry whose source has two lines, as an older Arbiter could store it (sources became one line later)."""
    with daemon.client() as c:
        old = c.remember(type="project", title="Old note", content="Stored with a source of two lines.").id
    conn = open_database(daemon.db)
    try:
        with conn:
            conn.execute("UPDATE entries SET source = ?, revised_at = coalesce(revised_at, recorded_at) + 1 "
                         "WHERE id = ?", ("standup\nnotes", old))
    finally:
        conn.close()
    return old


def test_an_export_import_would_refuse_for_another_reason_says_which_line_at_once(daemon, tmp_path):
    """Only a torn file (writes during the export) is made again: any other line import refuses would be
    written again, and was retried three times, then blamed on writes."""
    old = _an_entry_import_refuses(daemon)
    writes = []

    def agent(n: int) -> None:  # one write during the first export, so the file is checked (a second would not be)
        if not writes:
            with daemon.client() as w:
                writes.append(w.remember(type="project", title="During", content="Written during the export.").id)

    with daemon.client() as c, open(tmp_path / "m.jsonl", "w+b") as out, pytest.raises(ArbiterError) as refused:
        files.export_whole(c, out, progress=agent)
    assert type(refused.value) is ArbiterError  # not a Conflict: nothing here is the writers' doing
    lines = (tmp_path / "m.jsonl").read_bytes().splitlines()
    assert refused.value.path == f"line {next(i for i, x in enumerate(lines, 1) if json.loads(x).get('id') == old)}"
    with daemon.client(daemon.admin_token) as admin, open(tmp_path / "all.jsonl", "w+b") as out, \
            pytest.raises(ArbiterError) as refused:
        files.export_whole(admin, out, tenants=[t.name for t in admin.tenant_list().tenants])
    assert type(refused.value) is ArbiterError and refused.value.path.startswith("line ")


def test_an_export_file_is_its_owners_alone_whatever_the_umask(daemon, tmp_path):
    """An export holds the memory, as a backup does: born 0600, and so is a file it replaces with --force."""
    with daemon.client() as c:
        c.remember(type="project", title="Private", content="Only for the owner's eyes.")
    out, stale = tmp_path / "m.jsonl", tmp_path / "m.jsonl.partial"
    stale.write_text("left by an interrupted export")
    stale.chmod(0o644)
    old = os.umask(0o022)
    try:
        ok(daemon.home, "export", str(out), "--no-progress")
        out.chmod(0o644)
        ok(daemon.home, "export", str(out), "--force", "--no-progress")
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert not stale.exists()


def test_an_export_to_stdout_is_the_file_an_export_to_a_file_is(daemon, target, tmp_path):
    with daemon.client() as c:
        build_history(c, random.Random(11), 20)
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out), "--no-progress")
    streamed = ok(daemon.home, "export", "--no-progress")  # FILE defaults to `-`
    assert streamed.splitlines()[1:] == out.read_text().splitlines()[1:]  # all but the header's time
    (tmp_path / "s.jsonl").write_text(streamed)
    assert ok(target.home, "import", str(tmp_path / "s.jsonl")).startswith("imported ")


def test_an_export_to_stdout_is_checked_before_any_of_it_is_written(daemon):
    """`--all` is always checked (an admin has no memory version to compare); stdout went unchecked."""
    _an_entry_import_refuses(daemon)
    proc = arbiter(daemon.home, "export", "--all", "-", "--no-progress")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert "line " in proc.stderr and "Traceback" not in proc.stderr


def test_reimport_is_a_noop_that_says_so(daemon, target, tmp_path):
    with daemon.client() as c:
        build_history(c, random.Random(3), 20)
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out))
    assert ok(target.home, "import", str(out)).startswith("imported ")
    with target.client() as t:
        before = t.status()
    again = ok(target.home, "import", str(out))
    assert again.startswith("already imported (") and "nothing changed" in again
    with target.client() as t:
        assert t.status().entries_active == before.entries_active


def test_a_malformed_line_is_named_and_nothing_changes(daemon, target, tmp_path):
    with daemon.client() as c:
        build_history(c, random.Random(5), 30)
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out))
    lines = out.read_text().splitlines()
    entry = [i for i, line in enumerate(lines) if '"kind":"entry"' in line]
    e1, e2 = entry[0], entry[1]
    for number, broken in [(len(lines) - 1, lines[-2][:-5]),  # cut short: not JSON
                           (e2 + 1, lines[e2].replace('"type":"', '"type":"nonsense-')),  # not in the vocabulary
                           (e1 + 1, lines[e1].replace('"valid_from":"2026', '"valid_from":"yesterday')),
                           (e1 + 1, re.sub(r'"speaker":(null|"[^"]*")', r'"speaker":"a\\nb"', lines[e1])),  # two lines
                           ]:
        bad = list(lines)
        bad[number - 1] = broken
        f = tmp_path / "bad.jsonl"
        f.write_text("\n".join(bad) + "\n")
        err = fails(target.home, "import", str(f))
        assert f"line {number}:" in err and "nothing was imported" in err
    with target.client() as t:
        assert t.status().entries_active + t.status().entries_retired == 0



def test_a_file_cut_short_at_a_line_boundary_is_refused(daemon, target, tmp_path):
    """Every line is whole JSON, so a copy that stopped between two lines read as a smaller export and
    imported part of the memory as if it were all of it. The end line counts the lines before it."""
    with daemon.client() as c:
        build_history(c, random.Random(6), 30)
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out))
    lines = out.read_text().splitlines()
    assert json.loads(lines[-1]) == {"kind": "end", "records": len(lines) - 2}
    f = tmp_path / "bad.jsonl"
    for bad, words in [
        (lines[:-1], f"stops at line {len(lines) - 1} without its end line: it was cut short"),
        (lines[: len(lines) // 2], f"stops at line {len(lines) // 2} without its end line"),
        ([*lines[:-2], lines[-1]], f"line {len(lines) - 1}: the end line counts {len(lines) - 2} lines between the "
                                   f"header and it, and the file holds {len(lines) - 3}: lines were lost or added"),
        ([*lines, lines[1]], f"line {len(lines) + 1}: a line after the end line (line {len(lines)})"),
    ]:
        f.write_text("\n".join(bad) + "\n")
        err = fails(target.home, "import", str(f))
        assert words in err and "nothing was imported" in err, err
    with target.client() as t:
        assert t.status().entries_active + t.status().entries_retired == 0
    # A format 3 file (written before the end line) has none, and imports whole.
    header = {**json.loads(lines[0]), "format": 3}
    f.write_text("\n".join([json.dumps(header), *lines[1:-1]]) + "\n")
    assert ok(target.home, "import", str(f)).startswith("imported ")
    with daemon.client() as c, target.client() as t:
        assert t.status().entries_active == c.status().entries_active

def test_records_the_store_could_not_hold_are_named_before_anything_is_written(daemon, target, tmp_path):
    """Each of these once went in (two entries under one id, a window ending before it starts) or ended in an
    internal error on the daemon (an entry related to itself, a relation twice, an empty record window)."""
    with daemon.client() as c:
        a = c.remember(type="project", title="First", content="Apollo uses PostgreSQL.", entities=["Apollo", "PostgreSQL"])
        b = c.remember(type="project", title="Second", content="Another note.")
        c.update(a.id, content="Apollo uses PostgreSQL 16.")
        c.link(b.id, "relates_to", a.id)
        c.entity_relate("Apollo", "uses", "PostgreSQL")
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out))
    lines = out.read_text().splitlines()
    at = {kind: next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == kind)
          for kind in ("entry", "revision", "relation", "entity_relation")}

    def forged(kind: str, **change) -> str:
        return json.dumps({**json.loads(lines[at[kind]]), **change})

    entry, relation = json.loads(lines[at["entry"]]), json.loads(lines[at["relation"]])
    revision = json.loads(lines[at["revision"]])
    cases = [
        (at["entry"] + 1, [lines[at["entry"]]]),  # the same entry id twice
        (at["entry"], [forged("entry", valid_to="2000-01-01T00:00:00Z")]),  # valid before it begins
        (at["revision"], [forged("revision", recorded_to=revision["recorded_from"])]),  # an empty record window
        (at["relation"], [forged("relation", target_id=relation["source_id"])]),  # an entry related to itself
        (at["relation"] + 1, [forged("relation", id=relation["id"] + 100)]),  # the same relation twice
        (at["entity_relation"], [forged("entity_relation", target_id=json.loads(lines[at["entity_relation"]])["source_id"])]),
    ]
    assert entry["valid_from"] > "2000"
    for index, (replace_at, new_lines) in enumerate(cases):
        bad = list(lines)
        if index in (0, 4):  # a repeat goes in after the original
            bad[replace_at:replace_at] = new_lines
        else:
            bad[replace_at:replace_at + 1] = new_lines
        f = tmp_path / f"bad{index}.jsonl"
        f.write_text("\n".join(bad) + "\n")
        err = fails(target.home, "import", str(f))
        assert f"line {replace_at + 1}:" in err and "nothing was imported" in err, (index, err)
        assert "internal error" not in err
    with target.client() as t:
        assert t.status().entries_active + t.status().entries_retired == 0


def test_a_fact_history_the_gate_did_not_pass_is_refused(daemon, target, tmp_path):
    with daemon.client() as c:
        c.facts_propose([{"subject": "user", "predicate": "works_at", "object": "Acme"}], apply=True)
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out))
    lines = out.read_text().splitlines()
    batch = next(i for i, line in enumerate(lines) if '"kind":"fact_batch"' in line)
    fact = next(i for i, line in enumerate(lines) if '"kind":"fact"' in line)
    for at, forged in [(batch, lines[batch].replace('"status":"applied"', '"status":"proposed"')),
                       (fact, lines[fact].replace('"finding":"accept"', '"finding":"contradiction"')),
                       (fact, lines[fact].replace('"status":"candidate"', '"status":"active"', 1))]:
        bad = list(lines)
        bad[at] = forged
        f = tmp_path / "bad.jsonl"
        f.write_text("\n".join(bad) + "\n")
        err = fails(target.home, "import", str(f))
        assert f"line {fact + 1}:" in err and "nothing was imported" in err
    with target.client() as t:
        assert t.facts().facts == [] and t.batch_list().batches == []
    assert "1 fact" in ok(target.home, "import", str(out)).strip().split(", ")


@pytest.mark.parametrize("format", [1, 2])
def test_a_file_an_older_arbiter_wrote_imports(target, format):
    """Written by Arbiter at the commit before format 2 (1) and before format 3 (2): a supersession, an update,
    a link and a reply; both times of every state come back."""
    name = f"export-format-{format}.jsonl"
    assert json.loads((DATA / name).read_text().splitlines()[0])["format"] == format
    assert ok(target.home, "import", str(DATA / name)).startswith("imported 4 entries (2 earlier states), 2 relations")
    with target.client() as t:
        slips = next(e for e in t.list(limit=10) if e.title == "Apollo slips")
        plan = next(e for e in t.history(slips.id).entries if e.title == "Apollo plan")
        assert plan.superseded_by == [slips.id] and plan.valid_from == "2026-03-01T00:00:00.000000Z"
        assert slips.content == "Apollo ships in June"
        earlier = next(r for r in map(json.loads, (DATA / name).read_text().splitlines())
                       if r["kind"] == "revision" and r["title"] == "Apollo slips")
        assert t.get(slips.id, known_at=earlier["recorded_from"]).content == "Apollo ships in May"
        assert t.get(slips.id, known_at=earlier["recorded_to"]).content == "Apollo ships in June"
        assert [(b.entry.title, b.relation) for b in t.backlinks(slips.id).links if b.kind == "relation"] == \
            [("Pick Postgres", "supports")]
        assert t.thread(slips.id).replies[0].content == "Agreed on June"
        assert t.entity_show("PostgreSQL").entity.mentions == 2


def test_an_imported_entry_is_a_duplicate_to_remember(target):
    """The import writes through the entries triggers too: its entries have their duplicate keys (and are queued
    for what the idle writer derives), so remembering one again writes nothing."""
    ok(target.home, "import", str(DATA / "export-format-2.jsonl"))
    with target.client() as t:
        imported = next(e for e in t.list(limit=10) if e.title == "Pick Postgres")
        again = t.remember(type=imported.type, title=imported.title, content=imported.content)
        assert again.duplicate_of == imported.id
        assert len(t.list(limit=10)) == 3  # the active ones, as before


def test_a_newer_format_is_a_clear_error(target, tmp_path):
    f = tmp_path / "future.jsonl"
    f.write_text(json.dumps({"kind": "arbiter-export", "format": files.FORMAT + 1, "arbiter": "9.0",
                             "exported_at": "2030-01-01T00:00:00Z", "tenant": "default"}) + "\n")
    err = fails(target.home, "import", str(f))
    assert f"format {files.FORMAT + 1}" in err and "upgrade Arbiter" in err
    f.write_text('{"hello": "world"}\n')
    assert "not an Arbiter export header" in fails(target.home, "import", str(f))


def test_an_interrupted_import_goes_on_from_its_last_batch(daemon, target, tmp_path):
    with daemon.client() as c:
        build_history(c, random.Random(9), 40)
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out))
    checked = files.check(out)
    raw = out.read_bytes().splitlines()
    import msgspec

    with target.client() as t:  # the first batch of four lines lands, then the importer "dies"
        t.import_batch(digest=checked.digest, lines=checked.sections[0].last_line, first_line=2,
                       records=[msgspec.Raw(line) for line in raw[1:5]])
    text = ok(target.home, "import", str(out))
    assert "went on from line 6" in text
    assert ok(target.home, "import", str(out)).startswith("already imported (")  # the import finished
    with target.client() as t:
        assert normalised(export_lines(t)) == normalised(out.read_text().splitlines())


def test_export_all_and_import_all_keep_tenants_apart(daemon, target, tmp_path):
    ok(daemon.home, "remember", "--type", "user", "--title", "default's", "--content", "one")
    with daemon.client(daemon.admin_token) as admin:
        token = admin.tenant_create("team").token
    with Client(daemon.socket, token) as c:
        c.remember(type="user", title="team's", content="two")
    out = tmp_path / "all.jsonl"
    summary = js(daemon.home, "export", "--all", str(out))
    assert summary["tenants"] == 2 and summary["entries"] == 2
    assert "import it with --all" in fails(target.home, "import", str(out))
    proc = arbiter(target.home, "import", "--all", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "created tenant 'team'" in proc.stderr
    with target.client() as t:
        assert [e.title for e in t.list()] == ["default's"]
    team = (target.home / "tenants" / "team.token").read_text().strip()
    with Client(target.socket, team) as c:
        assert [e.title for e in c.list()] == ["team's"]



def test_import_all_keeps_a_tenant_token_file_no_tenant_here_holds(daemon, target, tmp_path):
    """A file under HOME/tenants can be the only copy of another database's token (`serve --db scratch.db` made
    a tenant of that name). The import used it against this database: "token matches no user; ... run the same
    import again", and every run said the same."""
    ok(daemon.home, "remember", "--type", "user", "--title", "default's", "--content", "one")
    ok(daemon.home, "user", "add", "carol")
    with daemon.client(daemon.admin_token) as admin:
        token = admin.tenant_create("team").token
    with Client(daemon.socket, token) as c:
        c.remember(type="user", title="team's", content="two")
    out = tmp_path / "all.jsonl"
    ok(daemon.home, "export", "--all", str(out))
    held = target.home / "tenants" / "team.token"
    held.write_text("arbt_of_another_database\n")
    err = fails(target.home, "import", "--all", str(out))
    assert f"{held} already holds a token" in err and "move the file aside" in err, err
    assert held.read_text() == "arbt_of_another_database\n"
    assert "team" not in [t["name"] for t in js(target.home, "tenant", "list")]
    # Refused before any section is written: the default tenant's part, before team's in the file, too.
    assert js(target.home, "list") == [] and "carol" not in ok(target.home, "user", "list")
    held.rename(tmp_path / "team.token.elsewhere")
    proc = arbiter(target.home, "import", "--all", str(out))
    assert proc.returncode == 0 and "created tenant 'team'" in proc.stderr, proc.stderr
    with Client(target.socket, held.read_text().strip()) as c:
        assert [e.title for e in c.list()] == ["team's"]
    assert "user 'carol' of tenant 'default': token in" in proc.stderr


def test_a_converted_source_keeps_the_key_it_was_imported_under():
    """An import is known by the sha256 of its lines, header included: converted records written in format 4
    (with its end line) made a source imported before the change import a second time."""
    for source, path in (("mcp-memory", DATA / "mcp-memory.jsonl"), ("markdown", DATA / "notes")):
        converted = [json.loads(line) for line in sources.lines(source, path)]
        assert converted[0]["format"] == 3 and all(r["kind"] != "end" for r in converted[1:])

def test_import_from_the_mcp_memory_server(target):
    text = ok(target.home, "import", "--from", "mcp-memory", str(DATA / "mcp-memory.jsonl"))
    assert text.startswith("imported 3 entries (0 earlier states), 3 relations")
    with target.client() as t:
        by_title = {e.title: e for e in t.list(limit=10)}
        john = by_title["John_Smith"]
        assert john.tags == ["person"] and john.type == "reference"
        assert john.content.splitlines() == ["Speaks fluent Spanish", "Graduated in 2019", "Prefers morning meetings",
                                             "Allergic to peanuts", "works_at: Anthropic", "leads: Project_Atlas"]
        linked = {n.title for n in t.expand(john.id).nodes}
        assert linked == {"John_Smith", "Anthropic", "Project_Atlas"}
        assert t.recall("peanuts").hits[0].id == john.id
        person = t.entity_show("John_Smith")
        assert person.entity.type == "person"
        assert {r.relation for r in person.relations} == {"related_to"}
        assert t.entity_show("Anthropic").entity.type == "organisation"
    assert "already imported" in ok(target.home, "import", "--from", "mcp-memory", str(DATA / "mcp-memory.jsonl"))


def test_mcp_memory_observations_an_entry_cannot_hold_are_named(target, tmp_path):
    """They were cut at 64 KiB: the entity's last observations were lost without a word."""
    f = tmp_path / "memory.jsonl"
    lines = [{"type": "entity", "name": "Big", "entityType": "person", "observations": [f"fact {i} " + "x" * 990]}
             for i in range(70)]
    f.write_text("".join(json.dumps(line) + "\n" for line in lines))
    err = fails(target.home, "import", "--from", "mcp-memory", str(f))
    assert "'Big'" in err and "nothing was imported" in err
    with target.client() as t:
        assert t.status().entries_active == 0


def test_import_markdown_notes(target):
    text = ok(target.home, "import", "--from", "markdown", str(DATA / "notes"))
    assert text.startswith("imported 3 entries (0 earlier states), 4 relations")
    with target.client() as t:
        by_title = {e.title: e for e in t.list(limit=10)}
        assert set(by_title) == {"Ledger migration", "John Smith", "Postgres upgrade"}
        ledger = by_title["Ledger migration"]
        assert ledger.tags == ["billing", "migration", "runbook"]
        assert ledger.valid_from.startswith("2026-03-02") and ledger.source == "Ledger migration.md"
        assert set(by_title["Postgres upgrade"].tags) == {"infrastructure", "database"}
        assert {n.title for n in t.expand(ledger.id).nodes} == {"Ledger migration", "John Smith", "Postgres upgrade"}
    assert "is a folder" in fails(target.home, "import", str(DATA / "notes"), code=2)


def test_a_note_markdown_cannot_carry_whole_is_named_and_nothing_is_imported(target, tmp_path):
    """A note that is not UTF-8 went in with replacement marks for its words, and one over an entry's size
    was cut at 64 KiB: either lost the note's text without a word."""
    notes = tmp_path / "notes"
    shutil.copytree(DATA / "notes", notes)
    (notes / "Café.md").write_bytes("Notes from the café in Zürich.\n".encode("latin-1"))
    err = fails(target.home, "import", "--from", "markdown", str(notes))
    assert "Café.md: not UTF-8" in err and "nothing was imported" in err
    (notes / "Café.md").unlink()
    (notes / "Long.md").write_text("A long note.\n" + "word " * 14000)
    err = fails(target.home, "import", "--from", "markdown", str(notes))
    assert "Long.md: 70,012 bytes" in err and "nothing was imported" in err
    with target.client() as t:
        assert t.status().entries_active == 0
    (notes / "Long.md").write_text("A long note.\n" + "word " * 13000)  # under the limit: whole
    ok(target.home, "import", "--from", "markdown", str(notes))
    with target.client() as t:
        assert len(next(e for e in t.list(limit=10) if e.title == "Long").content) == 12 + 1 + 5 * 13000 - 1


# ---- the round-trip property ------------------------------------------------------------


@pytest.fixture(scope="module")
def shared():
    """One daemon for every example: each example writes to a new tenant and imports into another."""
    home = Path(tempfile.mkdtemp(prefix="arb-"))
    d = DaemonProcess(home).start()
    yield d
    d.stop()
    shutil.rmtree(home, ignore_errors=True)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 40))
def test_round_trip_property_over_random_histories(shared, seed, steps):
    print(f"history seed {seed}, {steps} steps")
    with shared.client(shared.admin_token) as admin:
        src = admin.tenant_create(f"src{seed}-{steps}").token
        dst = admin.tenant_create(f"dst{seed}-{steps}").token
    with Client(shared.socket, src) as a, Client(shared.socket, dst) as b:
        build_history(a, random.Random(seed), steps)
        first = export_lines(a)
        path = Path(tempfile.mkdtemp(prefix="arb-x-")) / "m.jsonl"
        path.write_text("\n".join(first) + "\n")
        files.run_import(lambda tenant: Client(shared.socket, dst), path)
        again = export_lines(b)

        def anyone(lines):  # the importer is the author of what it imports: here dst's first user, not src's
            return [{k: v for k, v in r.items() if k != "author"} for r in normalised(lines)]
        assert anyone(again) == anyone(first)
        times = sorted({json.loads(line)[k] for line in first[1:] for k in ("valid_from", "valid_to")
                        if json.loads(line).get(k)})
        order = {old["id"]: new["id"] for old, new in zip(
            [r for r in map(json.loads, first[1:]) if r["kind"] == "entry"],
            [r for r in map(json.loads, again[1:]) if r["kind"] == "entry"])}
        for when in times[:: max(1, len(times) // 5)]:
            assert [order[e.id] for e in a.list(as_of=when, limit=1000)] == [e.id for e in b.list(as_of=when, limit=1000)]
        known = sorted({json.loads(line)[k] for line in first[1:] for k in ("recorded_at", "revised_at", "recorded_from")
                        if json.loads(line).get(k)})
        for when in known[:: max(1, len(known) // 5)]:
            assert [(order[e.id], e.content) for e in a.list(known_at=when, limit=1000)] == \
                [(e.id, e.content) for e in b.list(known_at=when, limit=1000)]
        same_facts(a, b, first, again)
        shutil.rmtree(path.parent, ignore_errors=True)


# ---- users and teams ----------------------------------------------------------------


@contextlib.contextmanager
def _people(d):
    """In `d`'s default tenant: alice and bob in team `core`, alice alone in `ops`, carol in none; a client each."""
    tokens = {}
    with d.client() as owner:
        for name in ("alice", "bob", "carol"):
            tokens[name] = owner.user_add(name).token
    clients = {name: Client(d.socket, token) for name, token in tokens.items()}
    try:
        clients["alice"].team_add("core")
        clients["alice"].team_join("core", "bob")
        clients["alice"].team_add("ops")
        yield clients
    finally:
        for c in clients.values():
            c.close()


def _records(lines: list[str], kind: str) -> list[dict]:
    return [r for r in map(json.loads, lines[1:]) if r["kind"] == kind]


def test_a_users_export_holds_what_they_see_with_authors_and_teams(daemon, target, tmp_path):
    with _people(daemon) as c:
        conv = c["alice"].conversation_create("standup").id
        c["alice"].remember(type="project", title="alice private", content="only mine", conversation_id=conv)
        shared = c["alice"].remember(type="project", title="core plan", content="for the team", team="core")
        c["alice"].remember(type="project", title="ops note", content="ops only", team="ops")
        reply = c["bob"].reply(shared.id, "bob agrees")
        secret = c["bob"].remember(type="project", title="bob secret", content="not for alice")
        c["bob"].link(secret.id, "relates_to", shared.id)  # one end alice cannot see: not in her file
        c["carol"].remember(type="user", title="carol private", content="carol's")
        c["alice"].facts_propose([{"subject": "alice", "predicate": "lives_in", "object": "Lisbon"}], apply=True)
        c["bob"].facts_propose([{"subject": "core", "predicate": "uses", "object": "Postgres",
                                 "sources": [shared.id, secret.id]}], apply=True, team="core")
        c["bob"].facts_propose([{"subject": "bob", "predicate": "works_at", "object": "Initech"}], apply=True)

        lines = export_lines(c["alice"])
        facts = {r["object"]: r for r in _records(lines, "fact")}
        assert set(facts) == {"Lisbon", "Postgres"}  # bob's private fact is not in her file, nor its entity
        assert facts["Postgres"]["sources"] == [shared.id]  # bob's secret entry is no source she sees
        assert [(b["author"], b["team"]) for b in _records(lines, "fact_batch")] == [("alice", None), ("bob", "core")]
        assert "Initech" not in "\n".join(lines)
        entries = {r["title"]: r for r in _records(lines, "entry")}
        assert set(entries) == {"alice private", "core plan", "ops note", reply.title}
        assert (entries["alice private"]["author"], entries["alice private"]["team"]) == ("alice", None)
        assert (entries["core plan"]["author"], entries["core plan"]["team"]) == ("alice", "core")
        assert (entries[reply.title]["author"], entries[reply.title]["team"]) == ("bob", "core")
        assert _records(lines, "relation") == []
        assert [r["author"] for r in _records(lines, "conversation")] == ["alice"]
        assert _records(lines, "user") == [] and _records(lines, "team") == []  # people are an --all export's
        text = "\n".join(lines)
        assert "bob secret" not in text and "carol" not in text and "Initech" not in text

        # Into another home, as its first user, who is in `core` there but not in `ops`.
        with target.client() as t:
            t.team_add("core")
            checked = files.check(None, lines=iter(line.encode() + b"\n" for line in lines))
            section = checked.sections[0]
            summary = files.send(t, None, checked, section, lines=lambda: iter(line.encode() + b"\n" for line in lines))
            assert summary.entries == 4 and summary.private == 1 and summary.new_users == []
            got = {e.title: (e.author, e.team) for e in t.list(limit=10)}
            assert got == {"alice private": ("default", None), "core plan": ("default", "core"),
                           "ops note": ("default", None), reply.title: ("default", "core")}
            assert [x.id for x in t.recall("team").hits] == [e.id for e in t.list(limit=10) if e.title == "core plan"]
            assert summary.facts == 2
            got = {f.object: f for f in t.facts().facts}
            assert set(got) == {"Lisbon", "Postgres"}
            assert [t.get(e).title for e in got["Postgres"].sources] == ["core plan"]
            assert [(b.author, b.team) for b in t.batch_list().batches] == [("default", "core"), ("default", None)]


def test_a_reply_whose_parent_the_reader_no_longer_sees_is_exported_without_it(daemon, target, tmp_path):
    with _people(daemon) as c:
        root = c["alice"].remember(type="project", title="Quagga plan", content="quagga", team="core")
        reply = c["bob"].reply(root.id, "quagga: agreed")
        later = c["bob"].remember(type="project", title="Quagga later", content="quagga later")
        c["alice"].unshare(root.id)  # each entry goes back to its author's private scope
        lines = export_lines(c["bob"])
        entries = {r["id"]: r for r in _records(lines, "entry")}
        assert root.id not in entries and entries[reply.id]["parent_id"] is None
        # Pages go on after the last id they gave: none is given twice, none is skipped.
        first = c["bob"].export_page("entry", limit=1)
        (one,) = [msgspec.json.decode(r)["id"] for r in first.records]
        rest = [msgspec.json.decode(r)["id"] for r in c["bob"].export_page("entry", after=one).records]
        assert one not in rest and sorted([one, *rest]) == sorted(entries) and later.id in entries


def test_entity_relations_keep_their_weight_through_export_and_import(daemon, target, tmp_path):
    with daemon.client() as c:
        c.remember(type="project", title="stack", content="the stack", entities=["Postgres", "Apollo"])
        c.entity_relate("Postgres", "part_of", "Apollo", weight=2.5)
    out = tmp_path / "e.jsonl"
    ok(daemon.home, "export", str(out))
    ok(target.home, "import", str(out))
    with target.client() as t:
        assert [(r.relation, r.target.name, r.weight) for r in t.entity_show("Postgres").relations] == [
            ("part_of", "Apollo", 2.5)]


def test_another_user_importing_the_same_file_gets_their_own_copy(daemon, target, tmp_path):
    with daemon.client() as d:
        d.remember(type="project", title="shared memory", content="from the first home")
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out))
    with _people(target) as c:
        assert ok(target.home, "import", str(out)).startswith("imported ")
        imported = files.run_import(lambda tenant: c["carol"], out)[None]
        assert not imported.already and imported.entries == 1
        assert [(e.title, e.author) for e in c["carol"].list()] == [("shared memory", "carol")]
        again = files.run_import(lambda tenant: c["carol"], out)[None]
        assert again.already
        assert files.run_import(lambda tenant: c["bob"], out)[None].entries == 1


def test_export_all_and_import_all_keep_users_teams_and_authors(daemon, target, tmp_path):
    with _people(daemon) as c:
        c["alice"].team_add("gone")
        c["alice"].team_join("gone", "carol")
        shared = c["alice"].remember(type="project", title="core plan", content="for the team", team="core")
        reply = c["bob"].reply(shared.id, "bob agrees")
        c["bob"].remember(type="project", title="bob secret", content="bob's own")
        c["carol"].remember(type="project", title="carol in gone", content="carol wrote this", team="gone")
        c["carol"].team_leave("gone", "carol")
        c["bob"].facts_propose([{"subject": "core", "predicate": "uses", "object": "Postgres",
                                 "sources": [shared.id]}], apply=True, team="core")
        c["bob"].facts_propose([{"subject": "bob", "predicate": "enjoys", "object": "chess"}])  # left for review
        out = tmp_path / "all.jsonl"
        summary = js(daemon.home, "export", "--all", str(out))
        assert summary["users"] == 4 and summary["teams"] == 3
        lines = out.read_text().splitlines()
        assert [m for m in _records(lines, "member") if m["user"] == "carol"][0]["left_at"] is not None

        proc = arbiter(target.home, "import", "--all", str(out))
        assert proc.returncode == 0, proc.stderr
        assert "3 users, 3 teams" in proc.stdout
        for name in ("alice", "bob", "carol"):
            assert f"user {name!r} of tenant 'default'" in proc.stderr
        with Client.from_home(target.home, user="bob") as bob:
            assert bob.whoami().teams == ["core"]
            assert [(b.author, b.team, b.status) for b in bob.batch_list().batches] == \
                [("bob", None, "proposed"), ("bob", "core", "applied")]
            assert sorted((e.title, e.author, e.team) for e in bob.list()) == sorted([
                ("bob secret", "bob", None), ("core plan", "alice", "core"), (reply.title, "bob", "core")])
        with Client.from_home(target.home, user="alice") as alice:
            assert "bob secret" not in [e.title for e in alice.list()]
            assert [(f.object, [alice.get(e).title for e in f.sources]) for f in alice.facts().facts] == \
                [("Postgres", ["core plan"])]
        with Client.from_home(target.home, user="carol") as carol:
            assert carol.whoami().teams == []
            assert [(e.title, e.team) for e in carol.list()] == [("carol in gone", "gone")]  # what she wrote, still
        again = tmp_path / "again.jsonl"
        ok(target.home, "export", "--all", str(again))
        second = again.read_text().splitlines()

        def same(lines):  # the first user is the home's own, created when its daemon first started
            return [r for r in normalised(lines) if not (r["kind"] == "user" and r["name"] == "default")]
        assert same(second) == same(lines)


def test_an_alias_keeps_who_may_see_it_through_export_all_and_import_all(daemon, target, tmp_path):
    """bob's private note spells the team's entity another way: after a round trip, still his spelling alone."""
    with _people(daemon) as c:
        c["alice"].remember(type="project", title="Brontavix plan", content="the team meets Brontavix",
                            team="core", entities=["Brontavix Quellmoor Industries"])
        c["bob"].remember(type="project", title="bob's spelling", content="bob spells it his way",
                          entities=["Brontavix Quelmoor Industries"])
        assert c["bob"].entity_show("Brontavix Quellmoor Industries").entity.aliases == ["Brontavix Quelmoor Industries"]
        assert c["alice"].entity_show("Brontavix Quellmoor Industries").entity.aliases == []
        out = tmp_path / "all.jsonl"
        ok(daemon.home, "export", "--all", str(out))
        assert {m.get("name") for m in _records(out.read_text().splitlines(), "mention")} >= {
            "Brontavix Quellmoor Industries", "Brontavix Quelmoor Industries"}
    proc = arbiter(target.home, "import", "--all", str(out))
    assert proc.returncode == 0, proc.stderr
    with Client.from_home(target.home, user="bob") as bob:
        assert bob.entity_show("Brontavix Quellmoor Industries").entity.aliases == ["Brontavix Quelmoor Industries"]
    with Client.from_home(target.home, user="alice") as alice:
        assert alice.entity_show("Brontavix Quellmoor Industries").entity.aliases == []


def test_a_causes_qualifier_goes_through_export_and_import(daemon, target, tmp_path):
    with daemon.client() as c:
        a, b, d = (c.remember(type="project", title=f"t{i}", content=f"c{i}").id for i in range(3))
        c.link(a, "causes", b, qualifier="prevents")
        c.link(d, "supports", b)
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out))
    lines = out.read_text().splitlines()
    relations = [json.loads(line) for line in lines if '"kind":"relation"' in line]
    assert [(r["relation"], r.get("qualifier")) for r in relations] == [("causes", "prevents"), ("supports", None)]
    assert "qualifier" not in relations[1]  # unset, not null: older readers' files look the same
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(line.replace('"relation":"supports"', '"relation":"supports","qualifier":"enables"')
                             for line in lines) + "\n")
    err = fails(target.home, "import", str(bad))
    assert f"line {lines.index(next(x for x in lines if 'supports' in x)) + 1}: supports takes no qualifier" in err
    ok(target.home, "import", str(out))
    with target.client() as t:
        new_b = next(e.id for e in t.list(limit=10) if e.title == "t1")
        assert {(r.relation, r.qualifier) for r in t.expand(new_b).edges} == {("causes", "prevents"), ("supports", None)}


def test_a_past_speaker_goes_through_export_and_import_and_older_files_take_the_entrys(daemon, target, tmp_path):
    with daemon.client() as c:
        e = c.remember(type="context", title="t", content="It was powerful", speaker="Melanie")
        c.update(e.id, speaker="Caroline")
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out))
    lines = out.read_text().splitlines()
    assert [json.loads(x)["speaker"] for x in lines if '"kind":"revision"' in x] == ["Melanie"]
    # A file written before revisions kept a speaker: its revisions had their entry's, which could not change.
    older = tmp_path / "older.jsonl"
    older.write_text("\n".join(x.replace(',"speaker":"Melanie"', "") if '"kind":"revision"' in x else x
                               for x in lines) + "\n")
    for path, past in ((out, "Melanie"), (older, "Caroline")):
        ok(target.home, "import", str(path))
        with target.client() as t:
            new = max(x.id for x in t.list(limit=10))
            assert t.get(new).speaker == "Caroline"
            assert t.get(new, known_at=t.history(new).revisions[0].recorded_from).speaker == past


def test_a_merge_whose_entity_went_in_an_earlier_batch_is_kept(daemon, target, tmp_path):
    """Merges follow every entity record; a merge was applied only if its entity went in the same import batch,
    so in a file of more than one batch the merged-away entity came back as an entity of its own."""
    with daemon.client() as c:
        c.remember_many([{"type": "project", "title": f"thing {i}", "content": f"about thing {i}",
                          "entities": [f"Thing{i:04d}"]} for i in range(files.BATCH // 2 + 100)])
        c.entity_merge("Thing0001", "Thing0000")
        before = [(e.name, sorted(e.aliases), e.mentions) for e in c.entities("Thing000", limit=5)]
    assert before[:2] == [("Thing0001", ["Thing0000"], 2), ("Thing0002", [], 1)]
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out))
    lines = out.read_text().splitlines()
    entity = next(n for n, line in enumerate(lines, 1) if '"kind":"entity"' in line)
    merge = next(n for n, line in enumerate(lines, 1) if '"kind":"entity_merge"' in line)
    assert entity <= files.BATCH + 1 < merge  # the entity in the first batch, its merge in a later one
    ok(target.home, "import", str(out))
    with target.client() as t:
        assert [(e.name, sorted(e.aliases), e.mentions) for e in t.entities("Thing000", limit=5)] == before
        assert normalised(export_lines(t)) == normalised(lines)


def test_a_merge_in_a_later_batch_never_re_points_an_entity_the_tenant_had(target, tmp_path):
    with target.client() as t:
        t.remember(type="project", title="db", content="we use it", entities=["Zorblat"])
    at = '"2026-01-01T00:00:00.000000Z"'
    entity = ('{"kind":"entity","id":%d,"name":"%s","type":"other","description":null,"created_at":%s,'
              '"updated_at":%s,"retired_at":null,"names":[{"name":"%s","alias":false,"created_at":%s}]}')
    out = tmp_path / "m.jsonl"
    out.write_text("\n".join([
        '{"kind":"arbiter-export","format":3,"arbiter":"0.1.0","exported_at":%s,"tenant":"default"}' % at,
        entity % (1, "Zorblat", at, at, "Zorblat", at), entity % (2, "Quuxo", at, at, "Quuxo", at),
        '{"kind":"entity_merge","id":1,"into":2}']) + "\n")
    checked = files.check(out)
    with target.client() as t:  # the entities in one batch, the merge in the next
        t.import_batch(digest=checked.digest, lines=checked.lines, first_line=2,
                       records=[msgspec.Raw(line) for line in out.read_bytes().splitlines()[1:3]])
    ok(target.home, "import", str(out))
    with target.client() as t:
        assert [(e.name, e.mentions) for e in t.entities("Zorblat")] == [("Zorblat", 1)]


def test_more_records_the_store_could_not_hold_are_named_before_anything_is_written(daemon, target, tmp_path):
    """The whole-file check passed these, then the daemon refused them (an internal error, or a qualifier's
    error) at their batch: in a file of several batches, after the batches before it were written."""
    with daemon.client() as c:
        a = c.remember(type="project", title="First", content="Apollo is late.", entities=["Apollo"], salience=0.9)
        b = c.remember(type="project", title="Second", content="Another note.")
        c.update(a.id, content="Apollo is later.")
        c.link(b.id, "relates_to", a.id)
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out))
    lines = out.read_text().splitlines()
    at = {kind: next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == kind)
          for kind in ("salience", "revision", "relation", "entity")}

    def forged(kind: str, **change) -> str:
        return json.dumps({**json.loads(lines[at[kind]]), **change})

    entity = json.loads(lines[at["entity"]])
    cases = [
        (at["salience"] + 1, lines[at["salience"]]),  # an entry's salience twice
        (at["revision"] + 1, forged("revision", title="the same window again")),  # two states for one record window
        (at["entity"], forged("entity", names=entity["names"] + [{**entity["names"][0], "name": "APOLLO", "alias": True}])),
        (at["relation"], forged("relation", qualifier="enables")),  # only `causes` takes one
    ]
    for index, (line, new) in enumerate(cases):
        bad = list(lines)
        if index < 2:  # a repeat goes in after the original
            bad.insert(line, new)
        else:
            bad[line] = new
        f = tmp_path / f"bad{index}.jsonl"
        f.write_text("\n".join(bad) + "\n")
        err = fails(target.home, "import", str(f))
        assert f"line {line + 1}:" in err and "nothing was imported" in err, (index, err)
    with target.client() as t:
        assert t.status().entries_active + t.status().entries_retired == 0


def test_entities_the_tenant_knows_as_one_lose_the_relation_between_them_and_the_import_goes_on(daemon, target, tmp_path):
    """Each maps onto the tenant's one entity (a name it already has), so their relation joined that entity to
    itself: an internal error at that batch, every time the import was run again."""
    with daemon.client() as c:
        c.remember(type="project", title="plan", content="the plan", entities=["Zorblat", "Zorblat Project"])
        c.entity_relate("Zorblat", "part_of", "Zorblat Project")
    with target.client() as t:
        t.remember(type="project", title="ours", content="our plan", entities=["Zorblat", "Zorblat Project"])
        t.entity_merge("Zorblat", "Zorblat Project")
    out = tmp_path / "m.jsonl"
    ok(daemon.home, "export", str(out))
    ok(target.home, "import", str(out))
    with target.client() as t:
        shown = t.entity_show("Zorblat Project")
        assert (shown.entity.name, len(shown.entries), shown.relations) == ("Zorblat", 2, [])
    memory = tmp_path / "memory.jsonl"  # the MCP memory server keeps 'Alice' and 'alice' apart; a tenant cannot
    memory.write_text('{"type":"entity","name":"Alice","entityType":"person","observations":["likes tea"]}\n'
                      '{"type":"entity","name":"alice","entityType":"person","observations":["likes coffee"]}\n'
                      '{"type":"relation","from":"Alice","to":"alice","relationType":"knows"}\n')
    ok(target.home, "import", "--from", "mcp-memory", str(memory))
    with target.client() as t:
        assert len(t.entity_show("alice").entries) == 2


def test_import_all_creates_memberships_where_missing_and_leaves_the_tenants_own_alone(daemon, target, tmp_path):
    """A membership the file says ended was ended here too, where the user is in the team now (and one the file
    says goes on reopened one they had left here): the import changed who sees the team's entries."""
    with _people(daemon) as c:
        c["alice"].team_join("core", "carol")
        c["alice"].team_leave("core", "carol")
        c["alice"].team_join("ops", "bob")
    out = tmp_path / "all.jsonl"
    ok(daemon.home, "export", "--all", str(out))
    with _people(target) as t:  # here carol is in core now, and bob has left ops
        t["alice"].team_join("core", "carol")
        t["alice"].team_join("ops", "bob")
        t["alice"].team_leave("ops", "bob")
        t["carol"].remember(type="project", title="core note", content="for core", team="core")
        proc = arbiter(target.home, "import", "--all", str(out))
        assert proc.returncode == 0, proc.stderr
        assert t["carol"].whoami().teams == ["core"] and t["bob"].whoami().teams == ["core"]
        assert [e.title for e in t["carol"].list()] == ["core note"]


def test_what_import_all_changes_of_who_sees_what_counts_at_once(daemon, target, tmp_path):
    """The daemon keeps what each user sees; the import's new users and memberships did not reset it, so the
    first user, alone in the tenant when last asked, still saw the whole tenant: the imported users' own notes."""
    with _people(daemon) as c:
        c["bob"].remember(type="project", title="bob secret", content="bob's own")
        c["alice"].remember(type="project", title="core plan", content="for the team", team="core")
    out = tmp_path / "all.jsonl"
    ok(daemon.home, "export", "--all", str(out))
    checked = files.check(out)
    (section,) = checked.sections
    with target.client() as owner:
        assert owner.list() == []  # alone in the tenant: they see all of it
        # The import's batches land (its last step, issuing the new users' tokens, has not run yet).
        lines = out.read_bytes().splitlines()
        owner.import_batch(digest=checked.digest, lines=section.last_line, first_line=section.first_line,
                           records=[msgspec.Raw(line) for line in lines[section.first_line - 1:section.last_line]],
                           authors=True)
        assert owner.list() == []


def test_a_note_whose_text_an_entry_refuses_is_named_by_its_file(target, tmp_path):
    """The check named the line of the export the notes were turned into ('line 3'), which no file has."""
    notes = tmp_path / "notes"
    shutil.copytree(DATA / "notes", notes)
    (notes / "Bad.md").write_text("---\ntitle: two\x01parts\n---\nThe body.\n")
    err = fails(target.home, "import", "--from", "markdown", str(notes))
    assert err.startswith("arbiter: error: Bad.md: title: ") and "nothing was imported" in err
    memory = tmp_path / "memory.jsonl"
    memory.write_text('{"type":"entity","name":"Ann\\u0001Lee","entityType":"person","observations":["hi"]}\n')
    err = fails(target.home, "import", "--from", "mcp-memory", str(memory))
    assert "entity 'Ann\\x01Lee': title: " in err and "nothing was imported" in err
    with target.client() as t:
        assert t.status().entries_active == 0
