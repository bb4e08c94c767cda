"""What the advisor is shown of candidates (`recall.llm.shown`): who said each, and the turn it follows."""

from __future__ import annotations

import pytest

from arbiter._time import US, format_time
from arbiter.model import RememberParams
from arbiter.recall.llm import CONTEXT_EXCERPT, shown
from arbiter.store import entries, open_database, tenants, users

T0 = 1_800_000_000 * US
MINUTE = 60 * US


@pytest.fixture
def team(tmp_path):
    """alice and bob in team `core`, one conversation; viewers by name."""
    conn = open_database(tmp_path / "t.db")
    with conn:
        tid, _ = tenants.create_tenant(conn, "t", now=T0)
        ids = {n: users.create_user(conn, tid, n, now=T0)[0] for n in ("alice", "bob")}
        core = users.create_team(conn, tid, "core", now=T0)
        for n in ids.values():
            users.join(conn, core, n, now=T0)
        vs = {n: users.viewer(conn, tid, i, n) for n, i in ids.items()}
        conv = tenants.create_conversation(conn, vs["alice"], "chat", now=T0).id
    yield conn, vs, conv
    conn.close()


def say(conn, v, conv, minute: int, speaker: str, content: str, *, team: str | None = "core") -> int:
    with conn:
        return entries.remember(conn, v, RememberParams(
            type="context", title=content[:40], content=content, speaker=speaker, conversation_id=conv,
            valid_from=format_time(T0 + minute * MINUTE), team=team), now=T0 + minute * MINUTE)


def test_a_turn_is_shown_with_its_speaker_and_the_turn_it_follows(team):
    conn, vs, conv = team
    ask = say(conn, vs["alice"], conv, 1, "Melanie", "Anything   you're excited about\nin the adoption process?")
    answer = say(conn, vs["alice"], conv, 2, "Caroline", "I'm thrilled to make a family for kids who need one.")
    first, second = shown(conn, vs["alice"], [ask, answer], 400, context=True)
    assert (first.speaker, first.follows) == ("Melanie", None)  # the conversation's first turn follows nothing
    assert second.speaker == "Caroline"
    assert second.follows == "Melanie: Anything you're excited about in the adoption process?"  # one line
    assert [s.follows for s in shown(conn, vs["alice"], [answer], 400)] == [None]  # only when asked for


def test_the_turn_followed_is_cut_short(team):
    conn, vs, conv = team
    say(conn, vs["alice"], conv, 1, "Melanie", "word " * 200)
    answer = say(conn, vs["alice"], conv, 2, "Caroline", "Yes.")
    (view,) = shown(conn, vs["alice"], [answer], 400, context=True)
    assert view.follows.startswith("Melanie: word word") and view.follows.endswith("…")
    assert len(view.follows.encode()) <= CONTEXT_EXCERPT + len("…".encode())


def test_a_turn_another_user_keeps_private_is_never_shown_as_context(team):
    conn, vs, conv = team
    say(conn, vs["alice"], conv, 1, "Melanie", "Shall we plan the trip?")
    say(conn, vs["alice"], conv, 2, "Melanie", "Alice's private aside about the budget", team=None)
    answer = say(conn, vs["bob"], conv, 3, "Caroline", "Yes, let's go in June.")
    (bobs,) = shown(conn, vs["bob"], [answer], 400, context=True)
    assert bobs.follows == "Melanie: Shall we plan the trip?"  # the turn bob sees before it, not alice's aside
    (alices,) = shown(conn, vs["alice"], [answer], 400, context=True)
    assert alices.follows == "Melanie: Alice's private aside about the budget"


def test_a_past_view_shows_no_turn_before(team):
    conn, vs, conv = team
    say(conn, vs["alice"], conv, 1, "Melanie", "Shall we plan the trip?")
    answer = say(conn, vs["alice"], conv, 2, "Caroline", "Yes, let's go in June.")
    # The turn before may have been recorded after the moment a `known_at` recall reads.
    (view,) = shown(conn, vs["alice"], [answer], 400, context=True, known_at=T0 + 10 * MINUTE)
    assert (view.speaker, view.follows) == ("Caroline", None)
