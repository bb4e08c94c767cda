"""What the command line prints for reads and refusals: the words a user sees, the same across commands."""

from __future__ import annotations

import shlex

from arbiter import paths
from tests.integration.test_cli_errors import js, ok, one_line_error, run

BEFORE = "2000-01-01T00:00:00Z"


def test_thread_as_of_before_the_entry_says_when_it_held_as_get_does(daemon):
    h = daemon.home
    root = js(h, "remember", "--type", "project", "--title", "Deploy", "--content", "to staging first")
    reply = js(h, "reply", str(root["id"]), "--content", "staging is green")
    said = one_line_error(h, "thread", str(reply["id"]), "--as-of", BEFORE)
    assert said == one_line_error(h, "get", str(reply["id"]), "--as-of", BEFORE)
    assert "not found at" in said and reply["valid_from"] in said
    assert "not found at" in one_line_error(h, "thread", str(root["id"]), "--as-of", BEFORE)
    now = js(h, "thread", str(reply["id"]), "--as-of", reply["valid_from"])
    assert (now["root"]["id"], [r["id"] for r in now["replies"]]) == (root["id"], [reply["id"]])
    assert ok(h, "thread", str(reply["id"])).splitlines()[1].strip().startswith(f"#{reply['id']}")


def test_status_and_threads_read_as_words(daemon):
    h = daemon.home
    text = ok(h, "status")
    assert "None" not in text and "[]" not in text
    assert "teams: none" in text.splitlines() and "last_maintenance: none" in text.splitlines()
    root = js(h, "remember", "--type", "project", "--title", "Rollout", "--content", "canary at 5%")
    js(h, "reply", str(root["id"]), "--content", "canary is healthy")
    assert "  1 reply, last " in ok(h, "threads")


def test_an_empty_list_says_so_on_stderr_and_prints_nothing(daemon):
    for args, words in ((("list",), "(no entries)"), (("conversation", "list"), "(no conversations)"),
                        (("tags",), "(no tags)"), (("threads",), "(no open threads)")):
        result = run(daemon.home, *args)
        assert (result.exit_code, result.stdout, result.stderr.strip()) == (0, "", words), args


def test_superseding_a_teammates_entry_is_refused_in_grammatical_words(daemon):
    h = daemon.home
    ok(h, "user", "add", "alice")
    ok(h, "team", "add", "core")
    ok(h, "team", "join", "core", "alice")
    theirs = js(h, "remember", "--type", "project", "--title", "Plan", "--content", "v1", "--team", "core")
    mine = js(h, "--user", "alice", "remember", "--type", "project", "--title", "Plan B", "--content", "v2")
    said = one_line_error(h, "--user", "alice", "link", str(mine["id"]), "supersedes", str(theirs["id"]))
    assert f"entry {theirs['id']} is another user's: you cannot retire it with supersedes" in said
    assert js(h, "get", str(theirs["id"]))["valid_to"] is None


def test_summaries_count_in_the_right_number(daemon, tmp_path):
    h = daemon.home
    conv = js(h, "conversation", "add", "Standup")
    js(h, "remember", "--type", "project", "--title", "Ship", "--content", "Friday", "--conversation", str(conv["id"]))
    out = tmp_path / "memory.jsonl"
    said = ok(h, "export", str(out), "--no-progress").strip()
    assert said == f"exported 1 entry (0 earlier states), 0 relations, 1 conversation to {out}"
    ok(h, "purge", "1")
    assert ok(h, "import", str(out), "--no-progress").strip() == (
        "imported 1 entry (0 earlier states), 0 relations, 1 conversation")
    ok(h, "backup", "create", str(tmp_path / "b.db"))  # verify refuses the file the daemon serves
    assert ok(h, "backup", "verify", str(tmp_path / "b.db")).strip().endswith(", 1 tenant, 1 entry, 0 relations")


def test_no_daemon_reads_the_same_whether_the_home_has_a_token_or_not(daemon, tmp_path):
    fresh = one_line_error(tmp_path, "status")
    daemon.stop()
    stopped = one_line_error(daemon.home, "status")
    assert fresh.replace(str(tmp_path), "HOME") == stopped.replace(str(daemon.home), "HOME")
    assert stopped == f"arbiter: error: no daemon on {daemon.socket}: start it with `arbiter serve`"


def test_the_way_to_start_the_daemon_repeats_the_home_and_socket_given_as_flags(tmp_path):
    """Else following it started a daemon on the default home, not the one the command was pointed at."""
    home, sock = tmp_path / "my home", tmp_path / "it's.sock"

    def hint(*args) -> list[str]:
        said = one_line_error(tmp_path, *args, "status")
        return shlex.split(said.split("start it with `")[1].rstrip("`"))

    assert hint("--home", str(home)) == ["arbiter", "serve", "--home", str(home)]  # a fresh home: no token yet
    paths.write_secret(paths.token_path(home, paths.DEFAULT_TENANT), "a token, and no daemon")
    assert hint("--home", str(home), "--socket", str(sock)) == [
        "arbiter", "serve", "--home", str(home), "--socket", str(sock)]
    assert hint("--socket", str(sock)) == ["arbiter", "serve", "--socket", str(sock)]  # the home from ARBITER_HOME


def test_a_missing_id_reads_the_same_in_every_command(daemon):
    h = daemon.home
    for args in (("get", "999"), ("forget", "999"), ("restore", "999"), ("purge", "999"), ("history", "999"),
                 ("reinforce", "999"), ("thread", "999"), ("backlinks", "999"), ("density", "999")):
        assert one_line_error(h, *args).startswith("arbiter: error: entry 999 not found"), args
        assert "(at " not in one_line_error(h, *args), args
    said = one_line_error(h, "remember", "--type", "project", "--title", "t", "--content", "c", "--supersedes", "999")
    assert said == "arbiter: error: entry 999 not found: list or recall shows the ids you can see (at --supersedes 999)"


def test_around_takes_limit_as_every_list_does(daemon):
    h = daemon.home
    root = js(h, "remember", "--type", "project", "--title", "Root", "--content", "the root")
    for n in range(3):
        js(h, "reply", str(root["id"]), "--content", f"reply {n}")
    assert len(js(h, "around", str(root["id"]), "--limit", "2")["children"]) == 2
    assert js(h, "around", str(root["id"]), "--limit", "2") == js(h, "around", str(root["id"]), "-k", "2")
