"""`arbiter load`: JSON Lines in remember_many batches, progress, a bad line named, resume with --skip."""

from __future__ import annotations

import io
import json

from arbiter.cli._progress import Progress
from tests.integration.test_cli import arbiter, js, ok


def _lines(n: int, start: int = 0) -> list[str]:
    return [
        json.dumps({"type": "learning", "title": f"note {i}", "content": f"body of note {i}", "tags": ["bulk"]})
        for i in range(start, start + n)
    ]


def test_load_writes_every_line_in_batches_with_plain_progress(daemon, tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text("\n".join(_lines(250)) + "\n\n")  # a trailing blank line is ignored
    proc = arbiter(daemon.home, "load", str(f), "--batch", "100", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["written"] == 250 and summary["lines"] == 251 and summary["skipped"] == 0
    assert summary["last_id"] - summary["first_id"] == 249
    # Not a terminal: no bar redraws, one plain line at the end.
    assert "\r" not in proc.stderr and "load  250/251 entries" in proc.stderr
    with daemon.client() as c:
        assert c.status().entries_active == 250
        assert c.get(summary["first_id"]).title == "note 0"


def test_a_bad_line_is_named_and_load_resumes_with_skip(daemon, tmp_path):
    lines = _lines(30)
    lines[24] = '{"type": "learning", "title": "no content"}'
    f = tmp_path / "in.jsonl"
    f.write_text("\n".join(lines) + "\n")
    proc = arbiter(daemon.home, "load", str(f), "--batch", "10")
    assert proc.returncode == 1
    error = proc.stderr.strip().splitlines()[-1]
    assert "line 25" in error and "--skip 24" in error and "content" in error
    with daemon.client() as c:
        assert c.status().entries_active == 24  # every line before the bad one, none after
    lines[24] = json.dumps({"type": "learning", "title": "fixed", "content": "now it has content"})
    f.write_text("\n".join(lines) + "\n")
    assert js(daemon.home, "load", str(f), "--skip", "24")["written"] == 6
    with daemon.client() as c:
        assert c.status().entries_active == 30


def test_load_names_malformed_json_and_refused_llm_flags(daemon, tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text(_lines(1)[0] + "\n{not json\n")
    proc = arbiter(daemon.home, "load", str(f))
    assert proc.returncode == 1 and "line 2: not JSON" in proc.stderr
    f.write_text(json.dumps({"type": "user", "title": "t", "content": "c", "auto_tag": True}) + "\n")
    proc = arbiter(daemon.home, "load", str(f), "--skip", "0")
    assert proc.returncode == 1 and "line 1: auto_tag" in proc.stderr
    # Every flag remember_many refuses is named with its line, to fix, not as a refused batch to load again.
    with daemon.client() as c:
        before = c.status().entries_active
    for k, (flag, value) in enumerate([("candidates", True), ("extract_entities", True), ("auto_link", True),
                                       ("new_conversation", "Import")]):
        flagged = json.dumps({"type": "user", "title": "t", "content": "c", flag: value})
        f.write_text(_lines(1, start=1000 + k)[0] + "\n" + flagged + "\n")
        proc = arbiter(daemon.home, "load", str(f), "--batch", "5")
        error = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode == 1 and f"line 2: {flag}" in error and "fix it" in error, error
    with daemon.client() as c:
        assert c.status().entries_active == before + 4  # each run wrote its good first line, no flagged one


def test_load_reads_stdin(daemon):
    out = ok(daemon.home, "load", "-", "--no-progress", input="\n".join(_lines(3)) + "\n")
    assert out.startswith("loaded 3 entries")


def test_progress_on_a_terminal_redraws_one_line_with_rate_and_eta():
    out = io.StringIO()
    p = Progress(1000, "load", file=out, interactive=True)
    p.started -= 2.0  # as if two seconds had passed: a rate to show
    p.update(500)
    p.finish()
    text = out.getvalue()
    assert text.startswith("\r") and text.endswith("\n") and "\n" not in text[:-1]
    assert "[############------------]  load  500/1,000 entries" in text
    assert "/s  ETA " in text


def test_loading_the_same_file_twice_writes_nothing_the_second_time(daemon, tmp_path):
    f = tmp_path / "in.jsonl"
    # Its last line repeats its first: one entry, as `remember` would answer.
    f.write_text("\n".join(_lines(40) + _lines(1)) + "\n")
    first = json.loads(ok(daemon.home, "load", str(f), "--json"))
    assert (first["written"], first["duplicates"]) == (40, 1)
    with daemon.client() as c:
        before = c.status().entries_active
    again = arbiter(daemon.home, "load", str(f))
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "nothing new to load: 41 lines repeating an entry already there, not written again"
    with daemon.client() as c:
        assert c.status().entries_active == before
