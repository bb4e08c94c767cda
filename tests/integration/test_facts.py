"""Facts end to end: the `arbiter` commands against a real daemon on a real socket."""

from __future__ import annotations

import json

import pytest

from arbiter.cli._common import counted
from arbiter.errors import InvalidParams, NotFound
from tests.integration.test_cli import fails, js, ok, one_line_error


def test_propose_evaluate_apply_and_read_through_the_cli(daemon, tmp_path):
    home = daemon.home
    entry = js(home, "remember", "--type", "user", "--title", "Job", "--content", "I work at Acme since 2024")["id"]
    first = js(home, "fact", "propose", "--subject", "user", "--predicate", "Works At", "--object", "Acme",
               "--source", str(entry), "--valid-from", "2024-01-15T00:00:00Z", "--apply")
    assert first["status"] == "applied" and first["facts"][0]["predicate"] == "works_at"

    lines = tmp_path / "facts.jsonl"
    lines.write_text("\n".join(json.dumps(x) for x in [
        {"subject": "user", "predicate": "works_at", "object": "Globex", "confidence": 0.9,
         "valid_from": "2025-06-01T00:00:00Z"},
        {"subject": "user", "predicate": "listens_to", "object": "jazz", "aspects": ["music", "nope"]},
        {"subject": "user", "predicate": "enjoys", "object": "chess", "confidence": 0.1},
    ]) + "\n")
    batch = js(home, "fact", "propose", "--file", str(lines))
    assert ok(home, "facts", "user").count("\n") == 1  # candidates are invisible
    assert len(js(home, "facts", "--status", "candidate")) == 3
    shown = ok(home, "batch", "evaluate", str(batch["id"]))
    assert "supersede" in shown and "low_confidence" in shown
    applied = js(home, "batch", "apply", str(batch["id"]))
    assert applied["counts"] == {"active": 2, "rejected": 1}
    again = js(home, "batch", "apply", str(batch["id"]))
    assert again["changed"] is False and "already applied" in again["note"]

    now = {f["predicate"]: f["object"] for f in js(home, "facts", "user")}
    assert now == {"works_at": "Globex", "listens_to": "jazz"}
    then = js(home, "facts", "user", "--predicate", "works_at", "--as-of", "2025-01-01T00:00:00Z")
    assert [f["object"] for f in then] == ["Acme"] and then[0]["sources"] == [entry]
    history = js(home, "fact", "history", str(first["facts"][0]["id"]))
    assert [f["object"] for f in history["facts"]] == ["Acme", "Globex"]
    assert [b["status"] for b in js(home, "batch", "list")] == ["applied", "applied"]

    music = next(a for a in js(home, "aspects")["aspects"] if a["slug"] == "music")
    assert music["facts"] == 1 and music["score"] > 0
    music_line = next(line for line in ok(home, "aspects").splitlines() if "Music" in line)
    assert f"(1 fact, {counted(music['entities'], 'entity', 'entities')}, 1 predicate," in music_line
    assert any(p["name"] == "works_at" and p["functional"] for p in js(home, "predicates"))
    assert js(home, "predicates", "--declare", "Favourite Editor", "--functional")[0]["name"] == "favourite_editor"


def test_bad_input_is_one_line_and_changes_nothing(daemon):
    home = daemon.home
    for args in (
        ["--subject", "", "--predicate", "p", "--object", "o"],
        ["--subject", "s" * 300, "--predicate", "p", "--object", "o"],
        ["--subject", "s", "--predicate", "p", "--object", "o", "--confidence", "2"],
        ["--subject", "s", "--predicate", "p", "--object", "o", "--source", "99"],
    ):
        assert one_line_error(home, "fact", "propose", *args).startswith("arbiter: error:")
    assert js(home, "batch", "list") == []
    assert "batch 7 not found" in one_line_error(home, "batch", "apply", "7")
    fails(home, "fact", "propose", "--subject", "s", code=2)


def test_a_valid_from_in_the_future_is_refused_so_every_read_agrees(client):
    """Facts keep the entries' rule: one holding from later would be true to `facts` and not to `facts` as of now,
    and superseding would close the older fact's window in the future."""
    with pytest.raises(InvalidParams) as err:
        client.facts_propose([{"subject": "user", "predicate": "works_at", "object": "Acme"},
                              {"subject": "user", "predicate": "works_at", "object": "Globex",
                               "valid_from": "2999-01-01T00:00:00Z"}], apply=True)
    assert err.value.path == "facts[1].valid_from"
    assert client.batch_list().batches == []  # the whole batch was refused
    fact = client.facts_propose([{"subject": "user", "predicate": "works_at", "object": "Acme"}], apply=True).facts[0]
    later = client.facts_propose([{"subject": "user", "predicate": "works_at", "object": "Globex"}], apply=True).facts[0]
    now = [f.id for f in client.facts("user").facts]
    assert now == [f.id for f in client.facts("user", as_of=later.valid_from).facts] == [later.id]
    assert [f.id for f in client.facts("user", as_of=fact.valid_from).facts] == [fact.id]


def test_the_client_sees_typed_errors(client):
    b = client.facts_propose([{"subject": "user", "predicate": "enjoys", "object": "tea"}])
    try:
        client.facts_propose([{"subject": "user", "predicate": "enjoys", "object": "tea", "confidence": 7}])
    except InvalidParams as e:
        assert e.path.startswith("$.facts[0].confidence") or "confidence" in e.path
    else:
        raise AssertionError("confidence 7 was accepted")
    try:
        client.batch_show(b.id + 100)
    except NotFound:
        pass
    else:
        raise AssertionError("a missing batch was found")
    assert client.batch_apply(b.id).counts == {"active": 1}
