"""The `arbiter` command line as users script it: a subprocess against a real daemon."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from arbiter import __version__
from arbiter._time import US, format_time
from tests.conftest import arbiter_cli, wait_for

LINE = re.compile(r"^#(\d+)  \[(\w+)\]  (.+)  \((\d{4}-\d\d-\d\d)(?: · (superseded|retired))?\)$")


def arbiter(home, *args, input: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return arbiter_cli(home, *args, input=input, env=env)


def ok(home, *args, **kw) -> str:
    proc = arbiter(home, *args, **kw)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout


def js(home, *args, **kw):
    return json.loads(ok(home, *args, "--json", **kw))


def fails(home, *args, code=1, **kw) -> str:
    """Run a command that must fail: exit `code`, no traceback; returns stderr."""
    proc = arbiter(home, *args, **kw)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc.stderr


def one_line_error(home, *args, **kw) -> str:
    err = fails(home, *args, **kw)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


ENTRY_KEYS = {"id", "type", "title", "valid_from", "valid_to"}


def test_version():
    proc = subprocess.run([sys.executable, "-m", "arbiter", "--version"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and __version__ in proc.stdout


def test_help_has_examples(home):
    assert "Example" in ok(home, "--help")
    for cmd in ("remember", "list", "recall", "link", "serve"):
        assert "Example" in ok(home, cmd, "--help"), cmd


def test_remember_get_list_and_their_shapes(daemon):
    h = daemon.home
    e = js(h, "remember", "--type", "project", "--title", "Ship v1", "--content", "Target: Friday",
           "--tag", "release", "--tag", "v1", "--source", "standup")
    assert ENTRY_KEYS <= e.keys()
    assert (e["type"], e["title"], e["content"], e["tags"], e["source"], e["valid_to"]) == (
        "project", "Ship v1", "Target: Friday", ["release", "v1"], "standup", None)
    got = js(h, "get", str(e["id"]))
    assert got.pop("salience")["id"] == e["id"]  # get adds the entry's salience now
    assert got == {k: v for k, v in e.items() if k in got}  # remember may add a `note`
    line = ok(h, "remember", "--type", "feedback", "--title", "Prefers tabs", "--content", "In Go files").strip()
    m = LINE.match(line)
    assert m and m[2] == "feedback" and m[3] == "Prefers tabs" and m[5] is None, line
    listed = js(h, "list")
    assert isinstance(listed, list) and [x["id"] for x in listed] == [int(m[1]), e["id"]]
    assert all(ENTRY_KEYS <= x.keys() for x in listed)
    assert [x["id"] for x in js(h, "list", "--type", "project")] == [e["id"]]
    assert [x["id"] for x in js(h, "list", "--tag", "release", "--limit", "5")] == [e["id"]]
    assert js(h, "list", "--type", "user") == []
    assert {x["id"] for x in js(h, "list", "--type", "project", "--type", "feedback")} == {int(m[1]), e["id"]}
    reply = js(h, "remember", "--type", "project", "--title", "Re: Ship v1", "--content", "Agreed",
               "--parent", str(e["id"]))
    assert reply["parent_id"] == e["id"]
    human = ok(h, "get", str(e["id"]))
    assert human.splitlines()[0] == f"#{e['id']}  [project]  Ship v1  ({e['valid_from'][:10]})"
    assert "Target: Friday" in human


def test_content_from_stdin(daemon):
    text = "line one\nline two — ünïcode\n"
    e = js(daemon.home, "remember", "--type", "reference", "--title", "Piped", "--content", "-", input=text)
    assert e["content"] == text


def test_supersede_history_and_the_superseded_marker(daemon):
    h = daemon.home
    old = js(h, "remember", "--type", "project", "--title", "Ship v1", "--content", "Friday")
    new = js(h, "remember", "--type", "project", "--title", "Ship v1 slips", "--content", "Monday",
             "--supersedes", str(old["id"]))
    chain = js(h, "history", str(new["id"]))["entries"]
    assert [x["id"] for x in chain] == [old["id"], new["id"]]
    assert chain[0]["valid_to"] is not None and chain[1]["valid_to"] is None
    lines = ok(h, "history", str(old["id"])).splitlines()
    assert LINE.match(lines[0])[5] == "superseded" and LINE.match(lines[1])[5] is None


def test_get_of_a_retired_or_missing_id_fails_with_one_line(daemon):
    h = daemon.home
    e = js(h, "remember", "--type", "user", "--title", "Gone soon", "--content", "c")
    assert ok(h, "forget", str(e["id"])).strip() == f"#{e['id']} forgotten"
    retired = js(h, "get", str(e["id"]), "--as-of", e["valid_from"])
    said = one_line_error(h, "get", str(e["id"]))
    assert "is retired" in said and retired["valid_to"] in said and "as of an earlier instant" in said
    assert "not found" in one_line_error(h, "get", "424242")
    assert js(h, "get", str(e["id"]), "--as-of", e["valid_from"])["id"] == e["id"]


def test_forget_twice_exits_0_and_says_so(daemon):
    h = daemon.home
    e = js(h, "remember", "--type", "user", "--title", "Twice", "--content", "c")
    assert js(h, "forget", str(e["id"])) == {"id": e["id"], "forgotten": True}
    again = arbiter(h, "forget", str(e["id"]))
    assert again.returncode == 0 and "already retired" in again.stdout
    assert js(h, "forget", str(e["id"])) == {"id": e["id"], "forgotten": False}


@pytest.mark.parametrize(
    "args",
    [
        ("remember", "--title", "no type", "--content", "c"),
        ("remember", "--type", "gossip", "--title", "t", "--content", "c"),
        ("remember", "--type", "user", "--title", "no content"),
        ("get", "not-a-number"),
        ("get",),
        ("link", "1", "hates", "2"),
        ("list", "--limit", "0"),
        ("expand", "1", "--depth", "3"),
        ("no-such-command",),
        ("list", "--no-such-flag"),
    ],
)
def test_usage_errors_exit_2(home, args):
    fails(home, *args, code=2)


def test_times_as_rfc3339_and_epoch_seconds(daemon):
    h = daemon.home
    t0 = 1795168800  # 2026-11-20T10:00:00Z
    e = js(h, "remember", "--type", "project", "--title", "Backdated", "--content", "c1", "--valid-from", str(t0))
    assert e["valid_from"] == "2026-11-20T10:00:00.000000Z"
    f = js(h, "remember", "--type", "project", "--title", "Fractional", "--content", "c2",
           "--valid-from", "1795168800.25")
    assert f["valid_from"] == "2026-11-20T10:00:00.250000Z"
    g = js(h, "remember", "--type", "project", "--title", "Offset", "--content", "c3",
           "--valid-from", "2026-11-20T11:00:00+01:00")
    assert g["valid_from"] == e["valid_from"]
    for as_of in ("2026-11-20T10:00:00Z", str(t0), f"{t0}.0", "2026-11-20T10:00:00.000000Z"):
        assert js(h, "get", str(e["id"]), "--as-of", as_of)["id"] == e["id"]
        assert [x["id"] for x in js(h, "list", "--as-of", as_of)] == [g["id"], e["id"]]
    assert "not found" in one_line_error(h, "get", str(e["id"]), "--as-of", str(t0 - 1))
    assert js(h, "list", "--as-of", format_time(t0 * US - 1)) == []
    assert "--as-of: " in one_line_error(h, "list", "--as-of", "next week")


def test_link_unlink_expand_density_update_purge(daemon):
    h = daemon.home
    a = js(h, "remember", "--type", "project", "--title", "A", "--content", "alpha")["id"]
    b = js(h, "remember", "--type", "project", "--title", "B", "--content", "bravo")["id"]
    c = js(h, "remember", "--type", "project", "--title", "C", "--content", "charlie")["id"]
    r = js(h, "link", str(a), "supports", str(b))
    assert (r["source_id"], r["relation"], r["target_id"]) == (a, "supports", b)
    ok(h, "link", str(b), "refines", str(c))
    assert "already exists" in one_line_error(h, "link", str(a), "supports", str(b))
    g = js(h, "expand", str(a), "--depth", "2")
    assert {n["id"] for n in g["nodes"]} == {a, b, c}
    assert {k: v for k, v in g["depth"].items()} == {str(a): 0, str(b): 1, str(c): 2}
    assert ok(h, "expand", str(a)).splitlines()[0].startswith(f"#{a}  [project]  A")
    d = js(h, "density", str(b))
    assert (d["in_degree"], d["out_degree"], d["relations"], d["reach_2hop"]) == (1, 1, ["refines", "supports"], 2)
    assert js(h, "unlink", str(a), "supports", str(b)) == {"removed": True}
    assert js(h, "density", str(b))["in_degree"] == 0
    u = js(h, "update", str(c), "--title", "C fixed", "--tag", "x", "--tag", "y")
    assert (u["title"], u["tags"], u["content"]) == ("C fixed", ["x", "y"], "charlie")
    assert js(h, "update", str(c), "--content", "-", input="from stdin")["content"] == "from stdin"
    assert js(h, "purge", str(c)) == {"id": c, "purged": True}
    assert "not found" in one_line_error(h, "get", str(c))
    assert "not found" in one_line_error(h, "purge", str(c))


def test_recall_says_when_a_query_has_no_searchable_word_and_stars_search_prefixes(daemon):
    h = daemon.home
    e = js(h, "remember", "--type", "project", "--title", "Deployment checklist", "--content", "run the migrations")
    for query in ("🚀", "*", "%"):
        proc = arbiter(h, "recall", query)
        assert proc.returncode == 0 and proc.stdout == ""
        assert "note: no searchable word in the query" in proc.stderr
        res = js(h, "recall", query)
        assert res["hits"] == [] and "no searchable word" in res["note"]
    assert [x["id"] for x in js(h, "recall", "depl*")["hits"]] == [e["id"]]
    assert js(h, "recall", "depl")["hits"] == []


def test_recall_json_is_the_whole_result_with_facts_and_note(daemon):
    h = daemon.home
    e = js(h, "remember", "--type", "user", "--title", "New job", "--content", "I work at Acme Corp now")
    ok(h, "fact", "propose", "--subject", "user", "--predicate", "works_at", "--object", "Acme Corp",
       "--source", str(e["id"]), "--apply")
    res = js(h, "recall", "where does the user work", "--explain")
    assert {"hits", "facts", "searched", "note", "expression"} <= res.keys()
    assert [x["id"] for x in res["hits"]] == [e["id"]] and ENTRY_KEYS <= res["hits"][0].keys()
    assert [(f["predicate"], f["object"]) for f in res["facts"]] == [("works_at", "Acme Corp")]
    assert res["expression"]
    proc = arbiter(h, "recall", "🚀", "--json")
    assert proc.returncode == 0 and proc.stderr == ""  # the note is in the object, not beside it
    assert "no searchable word" in json.loads(proc.stdout)["note"]


def test_recall_conversation_status_and_tenants(daemon):
    h = daemon.home
    conv = js(h, "conversation", "add", "planning")
    assert conv["title"] == "planning"
    assert [x["id"] for x in js(h, "conversation", "list")] == [conv["id"]]
    e = js(h, "remember", "--type", "project", "--title", "Deploy checklist", "--content", "run the migrations first",
           "--conversation", str(conv["id"]))
    js(h, "remember", "--type", "feedback", "--title", "Unrelated", "--content", "tabs over spaces")
    hits = js(h, "recall", "deploy migrations", "--limit", "5")["hits"]
    assert isinstance(hits, list) and hits[0]["id"] == e["id"]
    assert all(ENTRY_KEYS <= x.keys() for x in hits)
    assert js(h, "recall", "deploy", "--conversation", str(conv["id"]), "--type", "project",
              "--as-of", "2100-01-01T00:00:00Z")["hits"][0]["id"] == e["id"]
    assert LINE.match(ok(h, "recall", "deploy").splitlines()[0])
    assert js(h, "recall", "xylophone")["hits"] == []
    tagged = js(h, "remember", "--type", "learning", "--title", "Deploy lesson", "--content", "deploy on tuesdays",
                "--tag", "ops")
    assert tagged["id"] in [x["id"] for x in js(h, "recall", "deploy", "--tag", "ops", "--limit", "5")["hits"]]
    s = js(h, "status")
    assert (s["tenant"], s["entries_active"], s["conversations"]) == ("default", 3, 1)
    added = js(h, "tenant", "add", "team")
    assert added["name"] == "team" and added["token"].startswith("arb_")
    assert [t["name"] for t in js(h, "tenant", "list")] == ["default", "team"]
    assert js(h, "--tenant", "team", "status")["entries_active"] == 0
    assert js(h, "status", env={"ARBITER_TENANT": "team"})["tenant"] == "team"


def test_global_flags_and_env(daemon, tmp_path):
    elsewhere = tmp_path / "unused-home"
    # --home and --socket both point the CLI at the daemon; the later flag wins over the env.
    assert js(elsewhere, "--home", str(daemon.home), "status")["tenant"] == "default"
    token_home = daemon.home
    assert js(token_home, "--socket", str(daemon.socket), "status")["tenant"] == "default"
    assert js(token_home, "status", env={"ARBITER_SOCKET": str(daemon.socket)})["tenant"] == "default"


def test_no_daemon_is_one_line_and_exit_1(daemon, tmp_path):
    line = one_line_error(daemon.home, "--socket", str(tmp_path / "nothing.sock"), "status")
    assert "arbiter serve" in line
    # A fresh home has no token file because no daemon ever ran there: say that, not "no token".
    fresh = one_line_error(tmp_path, "status")
    assert "no daemon" in fresh and "arbiter serve" in fresh and "token" not in fresh
    # With the daemon up, a tenant without a token file is a token problem.
    assert "no token" in one_line_error(daemon.home, "--tenant", "nobody", "status")


def test_known_at_history_and_restore_from_the_command_line(daemon):
    h = daemon.home
    e = js(h, "remember", "--type", "project", "--title", "Ship v1", "--content", "Target: Friday")
    ok(h, "update", str(e["id"]), "--content", "Target: Monday")
    assert js(h, "get", str(e["id"]), "--known-at", e["recorded_at"])["content"] == "Target: Friday"
    assert [x["id"] for x in js(h, "recall", "friday", "--known-at", e["recorded_at"])["hits"]] == [e["id"]]
    assert js(h, "recall", "friday")["hits"] == []
    assert ok(h, "forget", str(e["id"]))
    assert ok(h, "restore", str(e["id"])).strip() == f"#{e['id']} restored"
    assert ok(h, "restore", str(e["id"])).strip() == f"#{e['id']} was already active"
    lines = ok(h, "history", str(e["id"])).splitlines()
    assert LINE.match(lines[0]) and lines[1] == "revisions (record time, what changed):"
    changes = [line.split("  ")[3] for line in lines[2:]]
    assert changes == ["remembered", "updated: content", "retired", "restored"]
    assert [r["change"] for r in js(h, "history", str(e["id"]), "--known-at", e["recorded_at"])["revisions"]] == [
        "remembered"
    ]


def test_open_threads_list_without_crashing(daemon):
    h = daemon.home
    root = js(h, "remember", "--type", "project", "--title", "Deploy runbook", "--content", "Step one")
    js(h, "reply", str(root["id"]), "--content", "Looks good")
    out = ok(h, "threads").splitlines()
    assert out[0].startswith(f"#{root['id']}  [project]  Deploy runbook  (") and "1 reply," in out[0]


def test_list_pages_past_a_thousand_and_unknown_conversations_are_not_found(daemon):
    h = daemon.home
    with daemon.client() as c:
        ids = c.remember_many([{"type": "context", "title": f"n{i}", "content": "c"} for i in range(1005)])
    assert [x["id"] for x in js(h, "list", "--all", "--limit", "1000")] == ids[::-1]
    assert [x["id"] for x in js(h, "list", "--before", str(ids[5]), "--limit", "1000")] == ids[4::-1]
    for command in (("list",), ("recall", "anything")):
        line = one_line_error(h, *command, "--conversation", "99")
        assert "conversation 99 not found" in line


def test_expand_takes_both_time_axes(daemon):
    h = daemon.home
    a = js(h, "remember", "--type", "project", "--title", "A", "--content", "a")
    b = js(h, "remember", "--type", "project", "--title", "B", "--content", "b")
    ok(h, "link", str(a["id"]), "relates_to", str(b["id"]))
    ok(h, "forget", str(b["id"]))
    assert [n["id"] for n in js(h, "expand", str(a["id"]))["nodes"]] == [a["id"]]
    assert [n["id"] for n in js(h, "expand", str(a["id"]), "--as-of", b["valid_from"])["nodes"]] == [a["id"], b["id"]]
    # When only B was recorded, the link was not: B is a neighbour in time (an association), not a relation.
    then = js(h, "expand", str(a["id"]), "--known-at", b["recorded_at"])
    assert then["edges"] == [] and [e["kind"] for e in then["associations"]] == ["temporal"]


def test_a_title_must_be_one_line_and_errors_are_in_words(daemon):
    h = daemon.home
    line = one_line_error(h, "remember", "--type", "user", "--title", "Ship\nv1", "--content", "c")
    assert "a title is one line" in line and "regex" not in line
    line = one_line_error(h, "remember", "--type", "user", "--title", "t", "--content", "c", "--tag", "two words")
    assert "a tag cannot contain spaces" in line and "--tag 'two words'" in line
    assert js(h, "list") == []


def test_errors_name_the_flag_or_argument_typed_not_the_wire_field(daemon):
    h = daemon.home
    e = js(h, "remember", "--type", "project", "--title", "Ship v1", "--content", "Target: Friday")
    said = {
        ("remember", "--type", "project", "--title", "t", "--content", "c", "--conversation", "0"): "--conversation: ",
        ("list", "--conversation", "0"): "--conversation: ",
        ("recall", "x", "--conversation", "-3"): "--conversation: ",
        ("remember", "--type", "project", "--title", "t", "--content", "c", "--parent", "0"): "--parent: ",
        ("remember", "--type", "project", "--title", "t", "--content", "c", "--valid-from", "soon"): "--valid-from: ",
        ("remember", "--type", "project", "--title", "t", "--content", "c", "--valid-from", "2999-01-01T00:00:00Z"):
            "--valid-from: 2999-01-01T00:00:00.000000Z is in the future",
        ("remember", "--type", "project", "--title", "t", "--content", "c", "--supersedes", str(e["id"]),
         "--supersedes", "0"): "--supersedes 0: must be at least 1",
        ("remember", "--type", "project", "--title", "t", "--content", "c", "--supersedes", "999"):
            "entry 999 not found: list or recall shows the ids you can see (at --supersedes 999)",
        ("remember", "--type", "project", "--title", "t", "--content", "c", "--entity", ""): "--entity '': ",
        ("get", "0"): "ENTRY_ID: must be at least 1",
        ("get", str(e["id"]), "--as-of", "soon"): "--as-of: ",
        ("link", "0", "relates_to", str(e["id"])): "SOURCE: must be at least 1",
        ("fact", "history", "0"): "FACT_ID: must be at least 1",
        ("fact", "propose", "--subject", "", "--predicate", "works_at", "--object", "Acme"): "--subject: ",
        ("fact", "propose", "--subject", "u", "--predicate", "works_at", "--object", "Acme", "--source", "0"):
            "--source 0: must be at least 1",
        ("fact", "propose", "--subject", "u", "--predicate", "likes", "--object", "tea", "--valid-from",
         "2999-01-01T00:00:00Z"): "--valid-from: 2999-01-01T00:00:00.000000Z is in the future",
    }
    for args, words in said.items():
        line = one_line_error(h, *args)
        assert words in line, (args, line)
        assert not any(wire in line for wire in ("conversation_id", "parent_id", "supersedes_ids", "valid_from",
                                                  "as_of", "entities[", "source_id", "id:", "facts[")), line
    assert [x["id"] for x in js(h, "list")] == [e["id"]]  # and nothing was written
    assert js(h, "batch", "list") == []
    # From a file, a fact's field is no flag's: its wire name says which line's.
    said = one_line_error(h, "fact", "propose", "--file", "-", input='{"subject": "", "predicate": "p", "object": "o"}\n')
    assert said == "arbiter: error: facts[0].subject: must not be empty"


def test_get_shows_salience_reads_reinforcements_and_permanence(daemon):
    h = daemon.home
    e = js(h, "remember", "--type", "project", "--title", "Ship v1", "--content", "Target: Friday", "--salience", "0.3")
    first = js(h, "get", str(e["id"]))["salience"]  # its own read is counted after it answers
    assert (first["initial"], first["access_count"], first["last_access"], first["reinforcements"],
            first["permanent"]) == (0.3, 0, None, 0, False)
    assert "salience: " in ok(h, "get", str(e["id"])) and "(initial 0.3 · " in ok(h, "get", str(e["id"]))
    ok(h, "reinforce", str(e["id"]))
    later = wait_for(lambda: (s := js(h, "get", str(e["id"]))["salience"])["access_count"] >= 3 and s,
                     what="the reads counted")
    assert later["reinforcements"] == 1 and later["salience"] > first["salience"] and later["last_access"]
    assert "reinforced 1 time" in ok(h, "get", str(e["id"]))
    kept = js(h, "remember", "--type", "project", "--title", "Keep", "--content", "forever", "--permanent")
    line = ok(h, "get", str(kept["id"])).splitlines()[1]
    assert line == "salience: 0.800 (initial 0.5 · never read · permanent: the initial value, at least 0.8)"
    then = js(h, "get", str(e["id"]), "--as-of", e["valid_from"])["salience"]  # the value now, at any time asked
    assert then["reinforcements"] == 1


def test_speaker_is_written_shown_and_named_in_recall(daemon):
    h = daemon.home
    said = js(h, "remember", "--type", "context", "--title", "Support group", "--content",
              "Caroline: the support group was powerful.", "--speaker", "Caroline")
    js(h, "remember", "--type", "context", "--title", "Support group", "--content",
       "Melanie: Caroline, how was the support group?", "--speaker", "Melanie")
    assert said["speaker"] == "Caroline"
    assert "speaker: Caroline" in ok(h, "get", str(said["id"]))
    hits = js(h, "recall", "How was the support group for Caroline?")["hits"]
    assert hits[0]["id"] == said["id"]
    assert "speaker" in one_line_error(h, "remember", "--type", "context", "--title", "t", "--content", "c",
                                       "--speaker", "a\nb")
