"""What the command line says when the world is not as a command expects: one line, exit 1, nothing changed.

Files and folders that are missing or are the wrong kind, a port in use,
bytes that are not UTF-8: each is the user's to fix, so each is a sentence
naming it, never a traceback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from click.testing import CliRunner

from arbiter.cli import main
from tests.conftest import isolated_env
from tests.integration import test_cli as as_a_process


def run(home, *args: str, input: str | None = None, env: dict | None = None):
    """`arbiter ARGS` in this process with click's runner (a real daemon still answers on its socket).

    The developer's ARBITER_*/ANTHROPIC_* variables are dropped, as `isolated_env` does for a child.
    Anything but a clean exit (a traceback) propagates and fails the test.
    """
    clean = {k: None for k in os.environ if k.startswith(("ARBITER_", "ANTHROPIC_"))}
    return CliRunner().invoke(main, list(args), input=input, env={**clean, "ARBITER_HOME": str(home), **(env or {})},
                              catch_exceptions=False)


def ok(home, *args, **kw) -> str:
    result = run(home, *args, **kw)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def js(home, *args, **kw):
    return json.loads(ok(home, *args, "--json", **kw))


def fails(home, *args, code: int = 1, **kw) -> str:
    """A command that must fail with exit `code`; returns its stderr."""
    result = run(home, *args, **kw)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result.stderr


def one_line_error(home, *args, **kw) -> str:
    lines = fails(home, *args, **kw).strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_export_into_a_missing_folder_says_it_does_not_exist_and_writes_nothing(home, tmp_path):
    target = tmp_path / "no such folder" / "memory.jsonl"
    said = one_line_error(home, "export", str(target), "--no-progress")
    assert f"{target.parent} does not exist" in said and f"mkdir -p '{target.parent}'" in said, said
    assert not target.parent.exists()
    (tmp_path / "a-file").write_text("")
    said = one_line_error(home, "export", str(tmp_path / "a-file" / "memory.jsonl"), "--no-progress")
    assert f"{tmp_path / 'a-file'} is not a folder" in said


def test_export_refuses_an_existing_file_as_backup_does_unless_forced(daemon, tmp_path):
    h = daemon.home
    js(h, "remember", "--type", "project", "--title", "Ship v1", "--content", "Target: Friday")
    target = tmp_path / "memory.jsonl"
    target.write_text("keep me\n")
    said = one_line_error(h, "export", str(target), "--no-progress")
    assert f"{target} already exists; choose a new file name" in said and "--force" in said
    assert target.read_text() == "keep me\n" and sorted(p.name for p in tmp_path.iterdir()) == ["memory.jsonl"]
    backup = one_line_error(h, "backup", "create", str(target))
    assert backup.startswith(said.split(" (or --force")[0])  # the same words for the same refusal
    assert js(h, "export", str(target), "--force")["entries"] == 1
    assert target.read_text().count("\n") > 1 and sorted(p.name for p in tmp_path.iterdir()) == ["memory.jsonl"]


def test_a_home_that_is_a_file_is_a_usage_error_for_clients_and_the_daemon(tmp_path):
    not_a_folder = tmp_path / "home"
    not_a_folder.write_text("a file, not a folder\n")
    for args in (("list",), ("serve",), ("serve", "--home", str(not_a_folder)), ("stop", "--home", str(not_a_folder))):
        err = as_a_process.fails(not_a_folder, *args, code=2)
        assert "'--home'" in err and "is a file" in err, err
    assert not_a_folder.read_text() == "a file, not a folder\n"


def test_a_home_that_cannot_be_made_is_one_line(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert str(blocked) in as_a_process.one_line_error(blocked / "home", "serve")  # the daemon, as a process


def test_load_of_a_missing_file_is_a_usage_error(home, tmp_path):
    err = fails(home, "load", str(tmp_path / "nope.jsonl"), code=2)
    assert "does not exist" in err


def test_ui_on_a_port_in_use_names_the_port(daemon):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        said = as_a_process.one_line_error(daemon.home, "ui", "--port", str(port))  # it would serve forever
    assert f"127.0.0.1:{port}" in said


def test_text_that_is_not_utf8_is_refused_in_one_line_and_nothing_is_written(daemon):
    before = js(daemon.home, "status")["entries_active"]
    proc = subprocess.run(
        [sys.executable, "-m", "arbiter", "remember", "--type", "project", "--title", b"caf\xe9", "--content", "c"],
        env=isolated_env(daemon.home), capture_output=True, timeout=30,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "UTF-8" in err
    assert js(daemon.home, "status")["entries_active"] == before


def test_a_facts_file_that_is_not_utf8_names_its_line_and_proposes_nothing(daemon, tmp_path):
    facts = tmp_path / "facts.jsonl"
    facts.write_bytes(b'{"subject": "user", "predicate": "likes", "object": "tea"}\n'
                      b'{"subject": "user", "predicate": "likes", "object": "caf\xe9"}\n')
    said = one_line_error(daemon.home, "fact", "propose", "--file", str(facts))
    assert f"{facts} line 2: not UTF-8 text" in said
    said = one_line_error(daemon.home, "fact", "propose", "--file", "-", input=facts.read_bytes())
    assert "<stdin> line 2: not UTF-8 text" in said
    assert js(daemon.home, "batch", "list") == []


def test_an_empty_path_is_refused_not_read_as_the_working_folder(home, tmp_path, monkeypatch):
    """pathlib reads '' as '.': `--home ""` made the working folder a home, `backup verify ""` a traceback."""
    monkeypatch.chdir(tmp_path)
    for args in (("--home", "", "list"), ("--socket", "", "list"), ("backup", "create", ""), ("backup", "verify", ""),
                 ("backup", "restore", ""), ("load", ""), ("serve", "--db", ""), ("stop", "--home", ""),
                 ("mcp", "--token-file", "")):
        assert "must not be empty" in fails(home, *args, code=2), args
    assert list(tmp_path.iterdir()) == [] and list(home.iterdir()) == []


def test_export_and_import_refuse_an_empty_path_as_every_other_path_is(home, tmp_path, monkeypatch):
    """`export ""` said ". already exists", `export "" --force` ended in a traceback, `import ""` "'' does not exist"."""
    monkeypatch.chdir(tmp_path)
    for args in (("export", ""), ("export", "", "--force"), ("import", "")):
        assert "must not be empty" in fails(home, *args, code=2), args
    assert list(tmp_path.iterdir()) == [] and list(home.iterdir()) == []


def test_commands_with_progress_fail_in_one_line_without_a_daemon(daemon, tmp_path):
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"type": "learning", "title": "Tabs", "content": "Use tabs in Go"}\n')
    exported = tmp_path / "memory.jsonl"
    js(daemon.home, "remember", "--type", "learning", "--title", "Spaces", "--content", "Use spaces in Python")
    js(daemon.home, "export", str(exported))
    daemon.stop()
    for args in (("export", str(tmp_path / "again.jsonl")), ("import", str(exported)), ("load", str(notes))):
        assert "arbiter serve" in one_line_error(daemon.home, *args), args
    assert not (tmp_path / "again.jsonl").exists()


def test_importing_a_file_with_no_records_says_so(daemon, tmp_path):
    header_only = tmp_path / "empty.jsonl"
    ok(daemon.home, "export", str(header_only), "--no-progress")
    assert ok(daemon.home, "import", str(header_only)).strip() == f"nothing to import: {header_only} holds no records"
    assert js(daemon.home, "import", str(header_only))["default"]["entries"] == 0
    blank = tmp_path / "memory.jsonl"
    blank.write_text("\n")
    assert "nothing to import" in ok(daemon.home, "import", "--from", "mcp-memory", str(blank))


def test_tenant_and_user_are_names_before_they_become_a_token_path(home):
    for args in (("--user", "../../admin"), ("--tenant", "a/b")):
        err = fails(home, *args, "list", code=2)
        assert "a name is letters, digits" in err, (args, err)
    assert "'--tenant': must not be empty" in fails(home, "--tenant", "", "list", code=2)
    err = fails(home, "list", code=2, env={"ARBITER_USER": "../x"})
    assert "a name is letters, digits" in err


def test_flags_that_would_be_dropped_are_refused(home, tmp_path):
    facts = tmp_path / "facts.jsonl"
    facts.write_text('{"subject": "user", "predicate": "works_at", "object": "Acme"}\n')
    err = fails(home, "fact", "propose", "--file", str(facts), "--confidence", "0.3", "--source", "4", code=2)
    assert "--confidence, --source describe one fact" in err
    err = fails(home, "associations", "--rebuild", "--kind", "entity", code=2)
    assert "not with --rebuild" in err


def test_backup_restore_under_a_running_daemon_names_itself(daemon, tmp_path):
    copy = tmp_path / "copy.db"
    ok(daemon.home, "backup", "create", str(copy))
    said = one_line_error(daemon.home, "backup", "restore", str(copy))
    assert "arbiter stop" in said and "`arbiter backup restore` never replaces" in said


def test_update_with_nothing_to_change_is_a_usage_error(home):
    assert "nothing to update" in fails(home, "update", "12", code=2)


def test_a_load_stopped_at_its_first_line_says_nothing_is_written(daemon):
    line = '{"type": "user", "title": "t", "content": "c", "bogus": 1}\n'
    said = one_line_error(daemon.home, "load", "-", "--no-progress", input=line)
    assert said.endswith("nothing is written: fix it and load the file again") and "1-0" not in said


def test_a_source_and_an_imported_title_are_one_line_as_remember_asks_of_a_title(daemon, tmp_path):
    h = daemon.home
    for source in ("standup\nnotes", "red \x1b[31m"):
        said = one_line_error(h, "remember", "--type", "project", "--title", "Ship", "--content", "c", "--source", source)
        assert said.startswith("arbiter: error: --source: a source is one line"), said
    e = js(h, "remember", "--type", "project", "--title", "Ship", "--content", "Friday", "--source", "standup")
    assert "source" in one_line_error(h, "update", str(e["id"]), "--source", "x\ny")
    exported = tmp_path / "memory.jsonl"
    ok(h, "export", str(exported), "--no-progress")
    ok(h, "purge", str(e["id"]))
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    for field, value in (("title", "two\nlines"), ("title", "red \x1b[31m"), ("source", "a\nb")):
        bad = [{**r, field: value} if r["kind"] == "entry" else r for r in records]
        exported.write_text("".join(json.dumps(r) + "\n" for r in bad))
        said = one_line_error(h, "import", str(exported), "--no-progress")
        assert field in said and "one line" in said, said
        assert js(h, "list") == [] and js(h, "status")["entries_retired"] == 0


def test_a_trailing_newline_is_not_one_line_either(daemon):
    """`$` in a pattern also matches before a final newline: "Ship\\n" passed for one line."""
    h = daemon.home
    base = ("remember", "--type", "project", "--content", "c")
    for extra, field in ((("--title", "Ship\n"), "--title"), (("--title", "t", "--tag", "release\n"), "--tag 'release\\n'"),
                         (("--title", "t", "--speaker", "Bob\n"), "--speaker"),
                         (("--title", "t", "--entity", "Apollo\n"), "--entity 'Apollo\\n'")):
        assert f"error: {field}:" in one_line_error(h, *base, *extra), extra
    assert "NAME:" in one_line_error(h, "tenant", "add", "evil\n")
    assert "speaker" in one_line_error(h, "update", "1", "--speaker", "Bob\n")
    assert js(h, "list") == [] and [t["name"] for t in js(h, "tenant", "list")] == ["default"]
    assert sorted(p.name for p in (h / "tenants").iterdir()) == ["default.token"]


def test_a_fact_with_a_control_character_is_refused_and_no_batch_is_made(daemon):
    h = daemon.home
    for part, value in (("--object", "Acme \x1b[31mCorp"), ("--subject", "us\x07er")):
        args = {"--subject": "user", "--predicate": "works_at", "--object": "Acme", part: value}
        said = one_line_error(h, "fact", "propose", *[x for kv in args.items() for x in kv])
        assert part.removeprefix("--") in said and "control characters" in said, said
    assert js(h, "batch", "list") == []
    spaced = js(h, "fact", "propose", "--subject", "user", "--predicate", "works_at", "--object", "Acme\n\tCorp")
    assert spaced["facts"][0]["object"] == "Acme Corp"


def test_serve_on_a_db_that_is_not_a_database_is_one_line_and_leaves_it_alone(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n" * 100)
    for db in (notes, tmp_path):
        said = as_a_process.one_line_error(tmp_path / "home", "serve", "--db", str(db))
        assert said == f"arbiter: error: cannot open {db} as a database: " + (
            "file is not a database" if db == notes else "unable to open database file")
    assert notes.read_text() == "not a database\n" * 100
    # Nothing left behind: no lock file beside either, no home made for the refused daemon.
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    assert not tmp_path.with_name(tmp_path.name + ".lock").exists()


def test_serve_on_another_programs_sqlite_database_refuses_and_changes_nothing(tmp_path):
    import sqlite3

    other = tmp_path / "notes.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes(body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.close()
    before = other.read_bytes()
    said = as_a_process.one_line_error(tmp_path / "home", "serve", "--db", str(other))
    assert said.startswith(f"arbiter: error: {other} is another program's SQLite database (tables: notes)")
    assert other.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["notes.sqlite"]
    home = tmp_path / "home"
    home.mkdir()
    (home / "keep.txt").write_text("mine")  # a home that was there stays, with what it held
    as_a_process.one_line_error(home, "serve", "--db", str(other))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "notes.sqlite"]
    assert [p.name for p in home.iterdir()] == ["keep.txt"]


def test_a_blank_conversation_title_is_refused_as_a_blank_entry_title_is(daemon):
    for title in ("", "   "):
        assert one_line_error(daemon.home, "conversation", "add", title) == "arbiter: error: TITLE: must not be empty"
    assert js(daemon.home, "conversation", "list") == []



def test_an_export_of_what_an_older_version_stored_still_runs_and_its_import_names_the_line(daemon, tmp_path):
    """An entry stored before sources had to be one line still exports; importing it is refused in words."""
    from arbiter.store import connect

    h = daemon.home
    e = js(h, "remember", "--type", "project", "--title", "Ship", "--content", "Friday", "--source", "standup")
    conn = connect(daemon.db)  # as an older Arbiter wrote it
    with conn:
        conn.execute("UPDATE entries SET source = ?, revised_at = recorded_at + 1 WHERE id = ?", ("stand\nup", e["id"]))
    conn.close()
    out = tmp_path / "memory.jsonl"
    assert ok(h, "export", str(out), "--no-progress").startswith("exported 1 entry (1 earlier state)")
    said = one_line_error(h, "import", str(out), "--no-progress")
    assert "source: a source is one line" in said and "nothing was imported" in said


def test_an_empty_source_on_a_write_means_no_source_as_it_does_on_update(daemon):
    """`remember --source ""` stored "" while `update --source ''` removed the source."""
    h = daemon.home
    said = js(h, "remember", "--type", "project", "--title", "Ship v1", "--content", "Friday", "--source", "")
    assert said["source"] is None and js(h, "get", str(said["id"]))["source"] is None
    with daemon.client() as c:
        wrote = c.remember(type="project", title="Ship v2", content="Monday", source="")
        replied = c.reply(wrote.id, "moved to Tuesday", source="")
        many = c.remember_many([{"type": "project", "title": "Ship v3", "content": "later", "source": ""}])
        assert [c.get(i).source for i in (wrote.id, replied.id, *many)] == [None, None, None]
        assert wrote.source is None and replied.source is None
        sourced = c.remember(type="project", title="Ship v4", content="soon", source="standup")
        assert c.update(sourced.id, source="").source is None  # what update's "" already meant
