"""What a newcomer tripped on at the command line (issue 33): each case as they typed it, against a real daemon."""

from __future__ import annotations

import json


from tests.integration import test_cli as cli
from tests.integration import test_mcp_tools as mcp


def test_import_dash_reads_stdin_as_load_dash_does(daemon, tmp_path):
    h = daemon.home
    cli.ok(h, "remember", "--type", "project", "--title", "Ship v1", "--content", "Target: Friday")
    cli.ok(h, "tenant", "add", "other")
    exported = cli.ok(h, "export", "--no-progress")
    said = cli.ok(h, "--tenant", "other", "import", "-", "--no-progress", input=exported)
    assert "imported 1 entry " in said, said
    assert [e["title"] for e in cli.js(h, "--tenant", "other", "list")] == ["Ship v1"]
    assert "already imported" in cli.ok(h, "--tenant", "other", "import", "-", "--no-progress", input=exported)
    err = cli.one_line_error(h, "--tenant", "other", "import", "-", input='{"kind": "nothing"}\n')
    assert "line 1" in err


def test_user_is_refused_on_a_command_that_runs_as_the_administrator(daemon, tmp_path):
    h = daemon.home
    cli.ok(h, "user", "add", "bob")
    cli.ok(h, "remember", "--type", "project", "--title", "Private", "--content", "not for bob")
    for args in (["export", "--all", str(tmp_path / "all.jsonl")], ["tenant", "add", "acme"],
                 ["backup", "create", str(tmp_path / "b.db")], ["tenant", "list"]):
        err = cli.one_line_error(h, "--user", "bob", *args)
        assert "--user bob" in err and "administrator" in err, (args, err)
        err = cli.one_line_error(h, *args, env={"ARBITER_USER": "bob"})
        assert "--user bob" in err, (args, err)
    assert not (tmp_path / "all.jsonl").exists() and not (tmp_path / "b.db").exists()
    assert [t["name"] for t in cli.js(h, "tenant", "list")] == ["default"]
    export = cli.ok(h, "export", "--all", "-", "--no-progress")
    err = cli.one_line_error(h, "--user", "bob", "import", "--all", "-", input=export)
    assert "administrator" in err


def _limit_error(home, size: int) -> str:
    return cli.one_line_error(home, "remember", "--type", "project", "--title", "Big", "--content", "-",
                              input="x" * size)


def test_content_over_the_limit_gets_one_message_at_every_size(daemon):
    said = {size: _limit_error(daemon.home, size) for size in (70_000, 1 << 20, 5 << 20)}
    for size, err in said.items():
        assert err == f"arbiter: error: --content: {size} bytes is over the limit of 65536", err
    assert cli.js(daemon.home, "list") == []


def test_content_over_the_limit_gets_the_same_message_over_mcp(daemon):
    async def body(session):
        return [await session.call_tool("remember", {"type": "project", "title": "Big", "content": "x" * size})
                for size in (70_000, 5 << 20)]

    results = mcp.run_session(daemon.home, body)
    for result, size in zip(results, (70_000, 5 << 20)):
        assert result.is_error and f"content: {size} bytes is over the limit of 65536" in mcp.text(result), mcp.text(result)


def test_one_rule_for_control_characters_in_content_and_titles(daemon):
    h = daemon.home
    err = cli.one_line_error(h, "remember", "--type", "project", "--title", "t", "--content", "-", input="a\x00b")
    assert "U+0000" in err and "control characters" in err and "whitespace" in err, err
    err = cli.one_line_error(h, "remember", "--type", "project", "--title", "t", "--content", "bell \x07")
    assert "U+0007" in err, err
    with daemon.client() as c:  # the daemon holds the rule, whoever sends the text
        try:
            c.remember(type="project", title="t", content="esc \x1b[31m")
        except Exception as e:  # noqa: BLE001  (its class and path are what is checked)
            assert (type(e).__name__, e.path) == ("InvalidParams", "content"), e
        else:
            raise AssertionError("content with an escape character was stored")
    title_err = cli.one_line_error(h, "remember", "--type", "project", "--title", "a\x01b", "--content", "x")
    assert "control characters" in title_err
    kept = cli.js(h, "remember", "--type", "project", "--title", "Lines", "--content", "one\n\ttwo\r\nthree\x0bfour\x0c")
    assert kept["content"] == "one\n\ttwo\r\nthree\x0bfour\x0c"  # whitespace, as pasted from chats and PDFs
    assert [e["title"] for e in cli.js(h, "list")] == ["Lines"]


def test_serve_checks_the_socket_path_before_creating_anything(tmp_path):
    home = tmp_path / ("a" * 60) / ("b" * 60)
    err = cli.one_line_error(home, "serve")
    assert "--socket" in err and "bytes" in err, err
    assert not home.exists()


def _field(text: str, name: str) -> str:
    (value,) = [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith(f"{name}: ")]
    return value


def test_status_shows_the_maintenance_maintain_printed_then_says_it_is_hidden_from_a_user(daemon):
    h = daemon.home
    cli.ok(h, "remember", "--type", "project", "--title", "Ship v1", "--content", "Target: Friday")
    printed = cli.ok(h, "maintain").splitlines()[0]
    assert _field(cli.ok(h, "status"), "last_maintenance") == printed  # the checkpoint's words included
    cli.ok(h, "user", "add", "bob")
    for who in ([], ["--user", "bob"]):
        status = cli.ok(h, *who, "status")
        for name in ("last_maintenance", "average_salience"):
            assert _field(status, name).startswith("hidden"), status
    assert cli.js(h, "--user", "bob", "status")["last_maintenance"] is None  # JSON keeps the protocol's value


def test_density_counts_replies_and_mentions_and_expand_says_why_each_row_is_there(daemon):
    h = daemon.home

    def remember(*args) -> int:
        return cli.js(h, "remember", "--type", "project", *args)["id"]

    root = remember("--title", "Deploy plan", "--content", "Staging first, then production")
    for text in ("done on staging", "production on Friday", "rolled back once"):
        cli.ok(h, "reply", str(root), "--content", text)
    post = remember("--title", "Postmortem", "--content", f"What went wrong in #{root}")
    assert cli.js(h, "density", str(post))["mentions"] == 1
    d = cli.js(h, "density", str(root))
    assert (d["in_degree"], d["out_degree"], d["replies"], d["mentioned_by"], d["mentions"]) == (0, 0, 3, 1, 0), d
    assert "3 replies  mentioned by 1, mentions 0" in cli.ok(h, "density", str(root))
    cause = remember("--title", "Flaky disk", "--content", "The build host's disk fills up every week")
    cli.ok(h, "link", str(cause), "causes", str(root))
    rows = cli.ok(h, "expand", str(root)).splitlines()
    nodes = [line for line in rows if line.lstrip().startswith("#") and not line.startswith(f"#{root} ")]
    assert nodes and all("  <- " in line for line in nodes), rows  # entries written close in time included
    assert any(f"#{cause} " in line and "<- causes #" in line for line in nodes), rows


def _socket_error(daemon, method: str, params: dict) -> dict:
    """The error object the daemon's socket answers a request with."""
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(daemon.socket))
        s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params,
                              "token": daemon.token}).encode() + b"\n")
        return json.loads(s.makefile("rb").readline())["error"]


def test_json_errors_are_json_objects_with_the_sockets_code(daemon):
    h = daemon.home
    for args, method, params in (
        (["get", "999"], "get", {"id": 999}),
        (["remember", "--type", "project", "--title", "t", "--content", "bell \x07"], "remember",
         {"type": "project", "title": "t", "content": "bell \x07"}),
    ):
        proc = cli.arbiter(h, *args, "--json")
        assert proc.returncode == 1 and proc.stdout == "", proc
        (line,) = proc.stderr.splitlines()
        error = json.loads(line)["error"]
        wire = _socket_error(daemon, method, params)
        assert (error["code"], error["data"]["name"]) == (wire["code"], wire["data"]["name"]), (error, wire)
        assert error["message"]
    assert json.loads(cli.arbiter(h, "get", "999", "--json").stderr)["error"]["data"]["name"] == "not_found"
    plain = cli.one_line_error(h, "get", "999")
    assert plain.startswith("arbiter: error: ")


def test_words_counts_agree_with_their_nouns_and_every_term_of_salience_is_shown(daemon, tmp_path):
    h = daemon.home
    cli.ok(h, "team", "add", "core")
    root = cli.js(h, "remember", "--type", "project", "--title", "Deploy plan", "--content", "Staging first")["id"]
    assert cli.ok(h, "share", str(root), "--team", "core").startswith(f"thread #{root}: 1 entry now ")
    shown = cli.ok(h, "get", str(root)).splitlines()[1]  # salience: 0.600 (initial 0.5 · never read · +0.100 ...)
    value, terms = float(shown.split()[1]), shown.split("(", 1)[1]
    assert "recency and age" in terms, shown
    assert value == round(0.5 + float(terms.split(" · ")[-1].split()[0]), 3), shown  # the terms add up
    user = cli.js(h, "remember", "--type", "user", "--title", "New job", "--content", "I started at Acme Corp today")
    cli.ok(h, "fact", "propose", "--subject", "user", "--predicate", "works_at", "--object", "Acme Corp",
           "--source", str(user["id"]), "--apply")
    briefing = cli.ok(h, "briefing")
    assert " 1 fact, " in briefing and "1 facts" not in briefing, briefing
    newer = tmp_path / "newer.jsonl"
    newer.write_text('{"kind": "arbiter-export", "format": 99}\n')
    err = cli.one_line_error(h, "import", str(newer))
    assert "written by a newer Arbiter" in err and "?" not in err, err
