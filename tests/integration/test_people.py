"""Users, teams and visibility through a real daemon: isolation across every verb, sharing, cascades, briefings.

One daemon per module: the tenant's first user (`default`, the tenant token)
adds alice, bob and carol; alice starts team `core` and adds bob. Carol is in
no team. Each test writes its own entries with its own words.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import msgspec
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from arbiter import paths
from arbiter.client import Client
from arbiter.errors import Conflict, Forbidden, InvalidParams, NotFound, Unauthorized
from tests.conftest import arbiter_cli, as_user, isolated_env, tool_text

REPO = Path(__file__).resolve().parents[2]




def _missing_message(c: Client, call, *args) -> str:
    with pytest.raises(NotFound) as e:
        call(*args)
    return str(e.value.message)


def test_a_private_entry_is_missing_for_everyone_else_across_every_verb(people):
    with as_user(people, "alice") as alice:
        mine = alice.remember(type="project", title="Zanzibar launch plan", content="zanzibar rollout in March")
        other = alice.remember(type="project", title="Alice scratch", content="another note")
    with as_user(people, "bob") as bob:
        nowhere = 10**9
        for call in (bob.get, bob.history, bob.thread, bob.expand, bob.density, bob.backlinks, bob.around,
                     bob.forget, bob.purge, bob.restore):
            seen = _missing_message(bob, call, mine.id)
            assert seen == _missing_message(bob, call, nowhere).replace(str(nowhere), str(mine.id)), call.__name__
        with pytest.raises(NotFound):
            bob.update(mine.id, title="mine now")
        with pytest.raises(NotFound):
            bob.reply(mine.id, "a reply")
        mine_too = bob.remember(type="project", title="Bob note", content="bob's own words")
        with pytest.raises(NotFound):
            bob.link(mine_too.id, "supports", mine.id)
        with pytest.raises(NotFound):
            bob.share(mine.id, "core")
        assert bob.recall("zanzibar").hits == []
        assert mine.id not in [e.id for e in bob.list(limit=100)]
        assert "Zanzibar" not in bob.briefing().text
        assert bob.status().entries_active == len(bob.list(limit=100))
    with as_user(people, "alice") as alice:
        assert [h.id for h in alice.recall("zanzibar").hits] == [mine.id]
        assert alice.get(mine.id).author == "alice" and alice.get(mine.id).team is None
        alice.link(other.id, "relates_to", mine.id)
        assert alice.status().relations >= 1
    with as_user(people, "bob") as bob:
        assert bob.status().relations == 0


def test_counts_names_and_duplicates_leave_out_what_the_caller_cannot_see(people):
    # A link from a shared entry to a private one has one end bob cannot see: it is missing for him, and so
    # are a teammate's private entries in every total he reads.
    with as_user(people, "bob") as bob:
        relations = bob.status().relations
    with as_user(people, "alice") as alice:
        shared = alice.remember(type="project", title="Tapir plan", content="tapir launch", team="core",
                                tags=["tapir-ops"], entities=["Bramblewick"])
        private = alice.remember(type="feedback", title="Tapir doubts", content="tapir risks",
                                 tags=["tapir-ops"], entities=["Bramblewick"])
        alice.update(private.id, content="tapir risks, revised")
        alice.link(shared.id, "relates_to", private.id)
        alice.link(private.id, "supports", shared.id)
        assert alice.status().relations >= 2
        for i in range(3):
            alice.remember(type="project", title=f"Tapir vendor {i}", content="tapir parts",
                           entities=["Quillfeather Labs"])
        chat = alice.conversation_create("Tapir chat")
        alice.remember(type="project", title="Tapir chat note", content="tapir notes", conversation_id=chat.id)
        secret = alice.remember(type="project", title="Tapir secret", content="The tapir budget is 40K.")
    with as_user(people, "bob") as bob:
        assert bob.status().relations == relations
        density = bob.density(shared.id)
        assert (density.in_degree, density.out_degree, density.relations, density.reach_2hop) == (0, 0, [], 0)
        around = bob.around(shared.id)
        assert private.id not in [n.entry.id for n in around.shared_tags] + [r.entry.id for r in around.relations]
        graph = bob.expand(shared.id)
        assert graph.edges == [] and private.id not in [n.id for n in graph.nodes]
        assert private.id not in [a.other_id for a in bob.associations(shared.id).associations]
        revisions = [msgspec.json.decode(r) for r in bob.export_page("revision").records]
        assert private.id not in [r["entry_id"] for r in revisions]
        listed = bob.list(limit=1000)
        assert bob.status().entries_active == len(listed)
        text = bob.briefing().text
        assert f"You see {len(listed)} active entries" in text
        mine = sum(e.author == "bob" and e.team is None for e in listed)
        shared = sum(e.author == "bob" and e.team is not None for e in listed)
        pool = sum(e.author != "bob" for e in listed)
        assert (f"Active entries: {mine} personal (only you see them), {shared} you shared with a team, "
                f"{pool} in your teams' pool from teammates.") in text
        assert "Quillfeather" not in text
        assert chat.id not in [c.id for c in bob.conversation_list()]
        assert bob.status().conversations == len(bob.conversation_list())
        # The same words as alice's private entry are no duplicate for bob: his own entry is written.
        again = bob.remember(type="project", title="Tapir budget", content="the tapir budget is 40k.")
        assert again.duplicate_of is None and again.id != secret.id


def test_anothers_private_near_copies_take_no_place_among_the_callers_similar_entries(people):
    """`remember` checks the entries sharing most MinHash bands: only among those the writer sees."""
    from arbiter.duplicates import _VERIFY

    text = ("the quarterly budget review moved the cloud migration to next spring after the vendor audit found gaps "
            "in the backup plan")
    with as_user(people, "bob") as bob:
        mine = bob.remember(type="project", title="Budget review", content=text)
    with as_user(people, "alice") as alice:
        for _ in range(_VERIFY):
            alice.remember(type="project", title="Budget review", content=text + " and more", allow_duplicate=True)
    with as_user(people, "bob") as bob:
        assert bob.remember(type="project", title="Budget review", content=text + " and more").similar == [mine.id]


def test_sharing_a_thread_moves_it_whole_and_unsharing_hands_each_entry_back(people):
    with as_user(people, "alice") as alice:
        root = alice.remember(type="project", title="Quokka migration", content="quokka cutover plan")
    with as_user(people, "bob") as bob:
        assert bob.recall("quokka").hits == []
    with as_user(people, "alice") as alice:
        shared = alice.share(root.id, "core")
        assert shared.ids == [root.id] and shared.team == "core"
    with as_user(people, "bob") as bob:
        assert [h.id for h in bob.recall("quokka").hits] == [root.id]
        reply = bob.reply(root.id, "quokka cutover done on staging")
        assert reply.team == "core" and reply.author == "bob"
    with as_user(people, "carol") as carol:  # in no team
        assert carol.recall("quokka").hits == []
        with pytest.raises(NotFound):
            carol.get(reply.id)
    with as_user(people, "alice") as alice:
        assert {e.id for e in alice.thread(root.id).replies} == {reply.id}
        with pytest.raises(Forbidden, match="reply to it instead"):
            alice.update(reply.id, content="overwritten")
        assert alice.get(reply.id).content == "quokka cutover done on staging"
        with pytest.raises(Forbidden, match="only its author can share it"):
            alice.share(reply.id, "core")
        own = alice.reply(root.id, "quokka: noted")
        with pytest.raises(InvalidParams, match="by its root"):
            alice.share(own.id, "core")
        back = alice.unshare(root.id)
        assert set(back.ids) == {root.id, reply.id, own.id}
        with pytest.raises(NotFound):
            alice.get(reply.id)  # bob's, private to bob again
    with as_user(people, "bob") as bob:
        assert [h.id for h in bob.recall("quokka").hits] == [reply.id]
        with pytest.raises(NotFound):
            bob.get(root.id)


def test_leaving_a_team_hides_its_pool_at_once_but_not_what_one_wrote(people):
    with as_user(people, "carol") as carol:
        older = carol.remember(type="project", title="Burrow diet", content="diet notes", tags=["burrow"])
    with as_user(people, "alice") as alice:
        alice.team_add("ops")
        alice.team_join("ops", "carol")
        pool = alice.remember(type="project", title="Wombat rota", content="wombat on-call rota", team="ops",
                              tags=["burrow"])
    with as_user(people, "carol") as carol:
        own = carol.remember(type="project", title="Wombat notes", content="wombat handover notes", team="ops",
                             tags=["burrow"])
        assert {h.id for h in carol.recall("wombat").hits} == {pool.id, own.id}
        assert [n.entry.id for n in carol.around(own.id).shared_tags] == [pool.id, older.id]
        left = carol.team_leave("ops", "carol")
        assert left.changed and not left.member
        assert [h.id for h in carol.recall("wombat").hits] == [own.id]
        # The team's pool no longer takes a place among the nearest: the one neighbour asked for is hers.
        assert [n.entry.id for n in carol.around(own.id, k=1).shared_tags] == [older.id]
        with pytest.raises(NotFound):
            carol.get(pool.id)
        assert carol.team_leave("ops", "carol").changed is False
        scores = [(h.id, h.score) for h in carol.recall("wombat handover").hits]
    with as_user(people, "alice") as alice:
        assert {h.id for h in alice.recall("wombat").hits} == {pool.id, own.id}
        alice.remember(type="project", title="Wombat pool", content="wombat " + "rota " * 200, team="ops")
    with as_user(people, "carol") as carol:
        # The pool she left is no part of her ranking statistics.
        assert [(h.id, h.score) for h in carol.recall("wombat handover").hits] == scores


def test_sharing_a_root_after_leaving_its_team_leaves_a_teammates_reply_where_it_was(people):
    """alice leaves `den`, where bob replied to her root; sharing the root with `kits` must not bring his reply along."""
    with as_user(people, "alice") as alice:
        alice.team_add("den")
        alice.team_join("den", "bob")
        alice.team_add("kits")
        alice.team_join("kits", "carol")
        root = alice.remember(type="project", title="Ferret plan", content="ferret plan", team="den")
    with as_user(people, "bob") as bob:
        theirs = bob.reply(root.id, "ferret: a remark for den only")
    with as_user(people, "alice") as alice:
        alice.team_leave("den", "alice")
        assert alice.share(root.id, "kits").ids == [root.id]
        with pytest.raises(NotFound):
            alice.get(theirs.id)
        assert alice.unshare(root.id).ids == [root.id]
    with as_user(people, "carol") as carol:
        with pytest.raises(NotFound):
            carol.get(theirs.id)
    with as_user(people, "bob") as bob:
        assert bob.get(theirs.id).team == "den"


def test_sharing_an_unshared_root_again_leaves_a_reply_now_private_to_its_author_where_it_is(people):
    """Unsharing handed bob's reply back to him: sharing the root again, with `holt`, must not publish it there."""
    with as_user(people, "alice") as alice:
        alice.team_add("holt")
        alice.team_join("holt", "carol")
        root = alice.remember(type="project", title="Stoat plan", content="stoat plan", team="core")
    with as_user(people, "bob") as bob:
        theirs = bob.reply(root.id, "stoat: bob's remark")
    with as_user(people, "alice") as alice:
        below = alice.reply(theirs.id, "stoat: alice under bob")
        assert set(alice.unshare(root.id).ids) == {root.id, theirs.id, below.id}
        assert alice.share(root.id, "holt").ids == [root.id]  # `below` stays with bob's reply, private to her
        assert alice.get(below.id).team is None
    with as_user(people, "carol") as carol:
        with pytest.raises(NotFound):
            carol.get(theirs.id)
        assert carol.thread(root.id).replies == []
    with as_user(people, "bob") as bob:
        assert bob.get(theirs.id).team is None


def test_cascades_touch_only_the_callers_own_replies(people):
    from arbiter.model import ForgetResult

    with as_user(people, "alice") as alice:
        root = alice.remember(type="project", title="Capybara design", content="capybara schema", team="core")
        mine = alice.reply(root.id, "capybara: alice follow-up")
    with as_user(people, "bob") as bob:
        theirs = bob.reply(root.id, "capybara: bob's review")
        nested = bob.reply(mine.id, "capybara: bob under alice")
    with as_user(people, "alice") as alice:
        with pytest.raises(Forbidden, match="not yours to forget"):
            alice.forget(theirs.id)
        result = alice.call("forget", {"id": root.id}, ForgetResult)
        assert result.forgotten and result.also == [mine.id]
    with as_user(people, "bob") as bob:
        assert bob.get(theirs.id).valid_to is None and bob.get(nested.id).valid_to is None
        with pytest.raises(NotFound):
            bob.get(mine.id)  # retired with alice's root


def test_purge_orphans_a_teammates_reply_and_purges_ones_own(people):
    from arbiter.model import PurgeResult

    with as_user(people, "alice") as alice:
        root = alice.remember(type="project", title="Axolotl draft", content="axolotl draft", team="core")
        mine = alice.reply(root.id, "axolotl: alice")
    with as_user(people, "bob") as bob:
        theirs = bob.reply(root.id, "axolotl: bob")
    with as_user(people, "alice") as alice:
        result = alice.call("purge", {"id": root.id}, PurgeResult)
        assert result.purged and result.also == [mine.id]
        with pytest.raises(NotFound):
            alice.get(mine.id)
    with as_user(people, "bob") as bob:
        kept = bob.get(theirs.id)
        assert kept.parent_id is None and kept.content == "axolotl: bob"


def test_ranking_statistics_do_not_move_with_a_teammates_private_writes(people):
    with as_user(people, "bob") as bob:
        bob.remember(type="project", title="Ibex deploy", content="ibex deploy checklist for the gateway")
        bob.remember(type="project", title="Ibex rollback", content="ibex rollback steps")
        before = [(h.id, h.score) for h in bob.recall("ibex deploy gateway").hits]
    with as_user(people, "alice") as alice:
        alice.remember_many([
            {"type": "project", "title": f"private {i}", "content": "ibex deploy gateway " * (i % 5 + 1)}
            for i in range(200)
        ])
    with as_user(people, "bob") as bob:
        assert [(h.id, h.score) for h in bob.recall("ibex deploy gateway").hits] == before


def test_the_briefing_shows_a_teammates_shared_open_thread_by_full_id(people):
    with as_user(people, "alice") as alice:
        root = alice.remember(type="project", title="Narwhal incident", content="narwhal outage", team="core")
        alice.reply(root.id, "narwhal: root cause found")
    with as_user(people, "bob") as bob:
        text = bob.briefing().text
        assert "You are `bob`" in text and "`core`" in text
        assert f"#{root.id} [project] Narwhal incident by alice" in text
        assert "Shared with team `core`" in text
        assert any(t.root.id == root.id and t.team == "core" for t in bob.open_threads().threads)
    with as_user(people, "carol") as carol:
        assert "Narwhal" not in carol.briefing().text


def test_once_unshared_a_thread_is_no_one_s_open_thread_through_the_others_entries(people):
    with as_user(people, "alice") as alice:
        root = alice.remember(type="project", title="Gecko plan", content="gecko rollout", team="core")
    with as_user(people, "bob") as bob:
        reply = bob.reply(root.id, "gecko: agreed")
        assert root.id in [t.root.id for t in bob.open_threads().threads]
    with as_user(people, "alice") as alice:
        alice.unshare(root.id)  # each entry goes back to its author: alice's root, bob's reply
        assert root.id not in [t.root.id for t in alice.open_threads().threads]  # its one reply is bob's
    with as_user(people, "bob") as bob:
        thread = bob.thread(reply.id)
        assert (thread.root.id, thread.replies) == (reply.id, [])  # the top of what he sees is his reply


def test_people_bad_input_gets_clear_errors_and_changes_nothing(people):
    with as_user(people, "bob") as bob:
        with pytest.raises(NotFound, match="no team 'nope'"):
            bob.team_join("nope", "carol")
        with pytest.raises(NotFound, match="no user 'zed'"):
            bob.team_join("core", "zed")
        assert bob.team_join("core", "bob").changed is False  # already a member: idempotent
        with pytest.raises(Forbidden):
            bob.user_add("mallory")  # only the first user adds users
        with pytest.raises(Forbidden, match="not in team"):
            bob.remember(type="project", title="x", content="y", team="ops")
    with as_user(people, "alice") as alice:
        with pytest.raises(Conflict):
            alice.team_add("core")
    with as_user(people, "default") as owner:
        with pytest.raises(Conflict):
            owner.user_add("alice")
        assert [u.name for u in owner.user_list().users] == ["default", "alice", "bob", "carol"]
        assert {t.name: t.members for t in owner.team_list().teams}["core"] == ["alice", "bob"]


def test_a_rotated_token_stops_working_at_once(people):
    d, tokens = people
    with Client(d.socket, tokens["carol"]) as carol:
        assert carol.whoami().user == "carol"
        fresh = carol.user_rotate("carol").token
        with pytest.raises(Unauthorized):
            carol.whoami()
    tokens["carol"] = fresh
    with Client(d.socket, fresh) as carol:
        assert carol.whoami().user == "carol"


def test_the_cli_acts_as_the_user_whose_token_it_reads(people):
    d, tokens = people

    def cli(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return arbiter_cli(d.home, *args, env=extra)

    paths.write_secret(paths.user_token_path(d.home, "default", "bob"), tokens["bob"])
    assert "user bob of tenant default" in cli("--user", "bob", "whoami").stdout
    assert "user bob of tenant default" in cli("whoami", ARBITER_USER="bob").stdout
    assert "user default of tenant default" in cli("whoami").stdout
    # A token file under another user's name acts as the token's user, not the name.
    paths.write_secret(paths.user_token_path(d.home, "default", "carol"), tokens["bob"])
    assert "user bob of tenant default" in cli("--user", "carol", "whoami").stdout
    missing = cli("--user", "nobody", "whoami")
    assert missing.returncode == 1 and "no token for user 'nobody'" in missing.stderr


def test_two_users_of_one_team_through_real_mcp_sessions(people):
    d, tokens = people
    with as_user(people, "alice") as alice:
        root = alice.remember(type="project", title="Pangolin rollout", content="pangolin staged rollout", team="core")
        alice.reply(root.id, "pangolin: stage one done")

    def server(user: str) -> StdioServerParameters:
        paths.write_secret(paths.user_token_path(d.home, "default", user), tokens[user])
        return StdioServerParameters(command=sys.executable, args=["-m", "arbiter", "mcp", "--tools", "all", "--user", user],
                                     env={**isolated_env(d.home)}, cwd=str(REPO))

    async def session(user: str, body):
        with open(os.devnull, "w") as errlog:
            async with stdio_client(server(user), errlog=errlog) as (read, write):
                async with ClientSession(read, write) as s:
                    init = await s.initialize()
                    return await body(s, init)

    async def as_bob(s, init):
        assert f"#{root.id}" in init.instructions and "Pangolin rollout" in init.instructions
        who = tool_text(await s.call_tool("whoami", {}))
        reply = await s.call_tool("reply", {"parent_id": root.id, "content": "pangolin: bob checked stage one"})
        overwrite = await s.call_tool("update", {"id": root.id, "content": "bob was here"})
        return who, reply, overwrite

    who, reply, overwrite = anyio.run(session, "bob", as_bob)
    assert "You are bob" in who and not reply.is_error
    assert overwrite.is_error and "reply to it instead" in tool_text(overwrite)

    async def as_carol(s, init):
        found = await s.call_tool("recall", {"query": "pangolin"})
        return init.instructions, tool_text(found)

    instructions, found = anyio.run(session, "carol", as_carol)
    assert "Pangolin" not in instructions and "Pangolin" not in found


def test_reads_of_the_past_apply_todays_visibility(people):
    with as_user(people, "alice") as alice:
        root = alice.remember(type="project", title="Okapi plan", content="okapi first draft")
        before_share = root.recorded_at
        alice.update(root.id, content="okapi second draft")
    with as_user(people, "bob") as bob:
        with pytest.raises(NotFound):
            bob.get(root.id, known_at=before_share)
    with as_user(people, "alice") as alice:
        alice.share(root.id, "core")
    with as_user(people, "bob") as bob:
        # Shared now, so its past is bob's to read too: the text as first recorded, before the share.
        assert bob.get(root.id, known_at=before_share).content == "okapi first draft"
        assert [h.id for h in bob.recall("okapi first", known_at=before_share).hits] == [root.id]


def test_tenant_wide_maintenance_is_the_first_users(people):
    with as_user(people, "bob") as bob:
        with pytest.raises(Forbidden, match="first user"):
            bob.maintain()
    with as_user(people, "default") as owner:
        assert owner.maintain().trigger == "verb"


def test_a_private_entry_that_supersedes_a_shared_one_is_never_named_to_the_team(people):
    with as_user(people, "alice") as alice:
        shared = alice.remember(type="project", title="Gnu release day", content="gnu ships on Friday")
        alice.share(shared.id, "core")
        before = alice.get(shared.id).recorded_at
    with as_user(people, "bob") as bob:  # no one retires a teammate's memory, not even by remember
        with pytest.raises(Forbidden) as refused:
            bob.remember(type="project", title="Gnu moved", content="gnu ships Monday", supersedes_ids=[shared.id])
        assert refused.value.path == "supersedes_ids[0]"
        assert bob.get(shared.id).valid_to is None
    with as_user(people, "alice") as alice:
        secret = alice.remember(type="project", title="Gnu moved", content="gnu ships Monday",
                                supersedes_ids=[shared.id])
        assert alice.get(shared.id, as_of=before).superseded_by == [secret.id]  # the link's author sees it
        assert f"#{secret.id}" in _missing_message(alice, alice.get, shared.id)
    with as_user(people, "bob") as bob:
        # Bob learns the shared entry retired, never the id of the private entry that retired it.
        said = _missing_message(bob, bob.get, shared.id)
        assert "retired" in said and f"#{secret.id}" not in said
        assert bob.get(shared.id, as_of=before).superseded_by == []
        assert bob.get(shared.id, as_of=before, known_at=time.time()).superseded_by == []
        assert [e.id for e in bob.history(shared.id).entries] == [shared.id]
        assert secret.id not in [h.id for h in bob.list(limit=100)]


def test_history_never_walks_through_an_entry_the_reader_cannot_see(people):
    with as_user(people, "alice") as alice:
        first = alice.remember(type="project", title="Heron plan one", content="heron v1", team="core").id
        hidden = alice.remember(type="project", title="Heron plan two", content="heron v2",
                                supersedes_ids=[first]).id
        last = alice.remember(type="project", title="Heron plan three", content="heron v3", team="core",
                              supersedes_ids=[hidden]).id
        assert [e.id for e in alice.history(first).entries] == [first, hidden, last]
    with as_user(people, "bob") as bob:
        # As if the private middle entry were missing (purged): the two shared ones are not one chain.
        assert [e.id for e in bob.history(first).entries] == [first]
        assert [e.id for e in bob.history(last).entries] == [last]


def test_restore_is_not_blocked_by_a_link_from_an_entry_the_author_no_longer_sees(people):
    with as_user(people, "alice") as alice:
        mine = alice.remember(type="project", title="Ibis budget", content="ibis costs 10", team="core").id
    with as_user(people, "bob") as bob:
        newer = bob.remember(type="project", title="Ibis budget revised", content="ibis costs 12", team="core").id
    with as_user(people, "alice") as alice:
        alice.link(newer, "supersedes", mine)
        with pytest.raises(Conflict):  # while she sees the newer entry, the link is hers to remove first
            alice.restore(mine)
    with as_user(people, "bob") as bob:
        bob.unshare(newer)
    with as_user(people, "alice") as alice:
        # Bob's entry is as missing to her now: the link from it no longer holds her entry retired (nor names it).
        assert alice.restore(mine)
        assert alice.get(mine).valid_to is None
    with as_user(people, "bob") as bob:
        assert bob.history(newer).relations == []
