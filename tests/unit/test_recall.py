"""The recall pipeline on a real SQLite file: stages together, validity, scoping, marking, index sync."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.both_engines

from arbiter._time import US, format_time
from arbiter.model import RecallParams, RememberParams, UpdateParams
from arbiter.recall import Tuning, _rank, dates, maintain, recall, search
from arbiter.recall.hits import NO_WORDS
from arbiter.store import entries, tenants, users

T0 = 1795168800 * US  # 2026-11-20T10:00:00Z
DAY = 86_400 * US


def conversation(db, tenant_id: int) -> int:
    with db:
        return tenants.create_conversation(db, users.first_viewer(db, tenant_id), "chat", now=T0).id


def remember(db, tenant_id, title, content=None, *, now=T0, **kw) -> int:
    with db:
        return entries.remember(db, users.first_viewer(db, tenant_id),
            RememberParams(type=kw.pop("type", "project"), title=title, content=content or title, **kw),
            now=now,
        )


def exchange(db, tenant_id, *turns: tuple[str | None, str]) -> tuple[int, list[int]]:
    """A new conversation of (speaker, text) turns a minute apart, ending two minutes before T0; its id and theirs."""
    chat = conversation(db, tenant_id)
    return chat, [remember(db, tenant_id, text[:20], text, conversation_id=chat, speaker=speaker,
                           valid_from=format_time(T0 - (len(turns) - i + 1) * 60 * US))
                  for i, (speaker, text) in enumerate(turns)]


def ask(db, tenant_id, query="", *, now=T0 + DAY, **kw):
    with db:
        return recall(db, users.first_viewer(db, tenant_id), RecallParams(query=query, **kw), now=now)


def explained(db, tenant_id, query, **kw) -> dict:
    """`ask` with `explain`: hit id -> hit (its `parts`)."""
    return {h.id: h for h in ask(db, tenant_id, query, explain=True, **kw).hits}


def ids(result) -> list[int]:
    return [h.id for h in result.hits]


# ---- search ------------------------------------------------------------------------


def test_the_matching_entry_comes_first_with_its_parts(db, tenant):
    remember(db, tenant, "Lunch menu", "Soup and bread on Fridays")
    want = remember(db, tenant, "Deploy checklist", "Run the canary, then watch the error budget")
    remember(db, tenant, "Deploy freeze", "No deploys in December")
    res = ask(db, tenant, "how do I watch the canary during a deploy?", explain=True)
    assert ids(res)[0] == want
    parts = res.hits[0].parts
    assert parts["bm25"] > 0 and "decay" not in parts and "voice" in parts  # decay is opt-in
    assert res.hits[0].score == pytest.approx(parts["bm25"] * parts["voice"] * parts.get("intent", 1))
    assert res.expression and '"canary"' in res.expression
    assert ask(db, tenant, "canary").hits[0].parts is None  # only with explain


def test_no_match_is_an_empty_list_not_a_browse(db, tenant):
    remember(db, tenant, "Deploy checklist")
    assert ask(db, tenant, "zeppelin").hits == []


@pytest.mark.parametrize("query", ["🚀", "*", "%", " ?! "])
def test_a_query_with_no_searchable_word_finds_nothing_and_says_so(db, tenant, query):
    remember(db, tenant, "Deploy checklist")
    res = ask(db, tenant, query)
    assert res.hits == [] and res.note == NO_WORDS
    assert ids(ask(db, tenant, "")) and ask(db, tenant, "").note is None  # an empty query still browses


def test_a_trailing_star_is_a_prefix_search(db, tenant):
    deployment = remember(db, tenant, "Plan", "the deployment ships Friday")
    deploy = remember(db, tenant, "Checklist", "deploy the canary first")
    remember(db, tenant, "Depot", "boxes")
    res = ask(db, tenant, "depl*", explain=True)
    assert set(ids(res)) == {deployment, deploy}
    assert res.expression == '{title content tags source} : ("depl"*)'
    assert {h.excerpt for h in res.hits} == {"the **deployment** ships Friday", "**deploy** the canary first"}
    assert ids(ask(db, tenant, "depl")) == []  # without the star, a whole word
    assert ask(db, tenant, 'depl*" OR x*').hits is not None  # FTS5 syntax around a prefix is only words


def test_a_pass_over_budget_ranks_only_its_newest_matches(db, tenant):
    written = [remember(db, tenant, f"Canary {i}", "canary " * (10 - i)) for i in range(10)]
    tight = Tuning(rank_budget=3)
    with db:
        capped = recall(db, users.first_viewer(db, tenant), RecallParams(query="canary", limit=10), now=T0 + DAY, tuning=tight)
        full = recall(db, users.first_viewer(db, tenant), RecallParams(query="canary", limit=10, disable=["budget"]), now=T0 + DAY, tuning=tight)
        scoped = recall(db, users.first_viewer(db, tenant), RecallParams(query="canary", limit=10), now=T0 + DAY)
    assert sorted(ids(capped)) == written[-3:]
    assert sorted(ids(full)) == sorted(ids(scoped)) == written
    assert ids(full)[0] == written[0]  # with every match ranked, the densest wins


def test_queries_made_of_syntax_or_stopwords_still_search(db, tenant):
    who = remember(db, tenant, "Who am I", "who am I, asked the agent")
    for query in ['NEAR("deploy" OR', "who am i", '"unbalanced', "*"]:
        ask(db, tenant, query)
    assert ids(ask(db, tenant, "who am I")) == [who]


def test_the_top_three_carry_excerpts_with_matches_in_bold(db, tenant):
    for i in range(5):
        remember(db, tenant, f"Note {i}", f"filler words here and there, then the canary number {i} flew away")
    hits = ask(db, tenant, "canary").hits
    assert len(hits) == 5
    assert all("**canary**" in h.excerpt for h in hits[:3])
    assert all(h.excerpt is None for h in hits[3:])


def test_a_word_counts_most_in_the_title_then_tags_content_and_source(db, tenant):
    # The same length, one match each; written worst first, so equal scores would list them the other way round.
    source = remember(db, tenant, "alpha beta", "gamma delta", tags=["epsilon"], source="zephyr")
    content = remember(db, tenant, "alpha beta", "zephyr delta", tags=["epsilon"], source="eta")
    tags = remember(db, tenant, "alpha beta", "gamma delta", tags=["zephyr"], source="eta")
    title = remember(db, tenant, "zephyr beta", "gamma delta", tags=["epsilon"], source="eta")
    assert ids(ask(db, tenant, "zephyr")) == [title, tags, content, source]
    assert ids(ask(db, tenant, "zephyr", disable=["weights"])) == sorted([title, tags, content, source])


def test_type_and_tag_boosts_are_soft_in_search_mode(db, tenant):
    plain = remember(db, tenant, "Canary deploys", type="project")
    typed = remember(db, tenant, "Canary deploys", type="reference")
    tagged = remember(db, tenant, "Canary deploys", type="project", tags=["ops"])
    assert set(ids(ask(db, tenant, "canary deploys", types=["reference"]))) == {plain, typed, tagged}
    assert ids(ask(db, tenant, "canary deploys", types=["reference"]))[0] == typed
    res = ask(db, tenant, "canary deploys", tag="ops", explain=True)
    assert ids(res)[0] == tagged and res.hits[0].parts["boost"] == pytest.approx(1.2)


def test_the_tag_boost_at_known_at_reads_the_tags_recorded_then(db, tenant):
    plain = remember(db, tenant, "Canary deploys")
    later = remember(db, tenant, "Canary deploys")
    with db:  # later, the second entry is tagged
        entries.update(db, users.first_viewer(db, tenant), UpdateParams(id=later, tags=["ops"]), now=T0 + DAY)
    now = ask(db, tenant, "canary deploys", tag="ops", explain=True, now=T0 + 2 * DAY)
    assert ids(now)[0] == later and now.hits[0].parts["boost"] > 1
    then = ask(db, tenant, "canary deploys", tag="ops", explain=True, known_at=format_time(T0 + DAY // 2),
               now=T0 + 2 * DAY)
    assert {h.id: h.parts["boost"] for h in then.hits} == {plain: 1.0, later: 1.0}


def test_filters_are_hard_in_browse_mode(db, tenant):
    conv = conversation(db, tenant)
    a = remember(db, tenant, "A", type="reference", tags=["ops"])
    b = remember(db, tenant, "B", type="project", tags=["ops"], conversation_id=conv)
    c = remember(db, tenant, "C", type="reference")
    assert ids(ask(db, tenant)) == [c, b, a]  # newest first
    assert ids(ask(db, tenant, types=["reference"])) == [c, a]
    assert ids(ask(db, tenant, tag="ops")) == [b, a]
    assert ids(ask(db, tenant, conversation_id=conv)) == [b]
    assert ask(db, tenant).hits[0].excerpt == "C"


def test_intent_cues_favour_types_unless_the_caller_names_some(db, tenant):
    fact = remember(db, tenant, "Rollback", "rollback steps for the api", type="project")
    how = remember(db, tenant, "Rollback", "rollback steps for the api", type="learning")
    assert ids(ask(db, tenant, "how to rollback the api")) == [how, fact]  # same text: the cue decides
    assert ids(ask(db, tenant, "how to rollback the api", intent="off")) == [fact, how]  # tie: by id
    assert ids(ask(db, tenant, "how to rollback the api", disable=["intent"])) == [fact, how]
    assert ids(ask(db, tenant, "how to rollback the api", types=["project"]))[0] == fact


def test_intent_is_a_soft_boost(db, tenant):
    how = remember(db, tenant, "Notes", "rollback steps, among other things", type="learning")
    strong = remember(db, tenant, "API rollback", "rollback the api: the api rollback script", type="project")
    # A much better match of a type the cue does not suggest still comes first: intent never filters.
    assert ids(ask(db, tenant, "how to rollback the api")) == [strong, how]


def test_decay_is_asked_for_and_then_prefers_recent_entries(db, tenant):
    old = remember(db, tenant, "Release plan", now=T0 - 400 * DAY, valid_from=format_time(T0 - 400 * DAY))
    new = remember(db, tenant, "Release plan", now=T0, valid_from=format_time(T0))
    # Off by default: an old note is as true as a new one until it is superseded (ties go to the lower id).
    assert ids(ask(db, tenant, "release plan")) == [old, new]
    assert ids(ask(db, tenant, "release plan", decay=True)) == [new, old]
    assert ids(ask(db, tenant, "release plan", decay=True, disable=["decay"])) == [old, new]
    res = ask(db, tenant, "release plan", explain=True, decay=True, floor=0.1)
    assert [h.parts["decay"] for h in res.hits] == [1.0, 0.1]


def test_decay_counts_age_at_as_of(db, tenant):
    old = remember(db, tenant, "Ship date", "ship on Friday", valid_from=format_time(T0 - 400 * DAY))
    new = remember(db, tenant, "Ship date", "ship on Monday", valid_from=format_time(T0 - 200 * DAY))
    then = {h.id: h.parts["decay"] for h in ask(db, tenant, "ship", as_of=format_time(T0 - 199 * DAY),
                                                explain=True, decay=True).hits}
    assert then == {new: 1.0, old: 0.6}  # 1 and 201 days old at as_of (half-life 90 days)
    now = {h.id: h.parts["decay"] for h in ask(db, tenant, "ship", explain=True, decay=True).hits}
    assert now == {new: 0.6, old: 0.5}  # 201 and 401 days old now


def test_voice_prefers_the_askers_own_words(db, tenant):
    told = remember(db, tenant, "Gift", "You could buy your sister a scarf, you know")
    mine = remember(db, tenant, "Gift", "I want to buy my sister a scarf for her birthday")
    assert ids(ask(db, tenant, "what did I buy my sister?"))[0] == mine
    assert ids(ask(db, tenant, "what did you say I should buy my sister?"))[0] == told
    res = ask(db, tenant, "what did I buy my sister?", disable=["voice"], explain=True)
    assert "voice" not in res.hits[0].parts


def test_voice_reads_the_user_and_the_assistant_as_i_and_you(db, tenant):
    told = remember(db, tenant, "Gift", "You could buy your sister a scarf, you know")
    mine = remember(db, tenant, "Gift", "I want to buy my sister a scarf for her birthday")
    assert ids(ask(db, tenant, "what did the user buy the user's sister?"))[0] == mine
    assert ids(ask(db, tenant, "what did the assistant say the user should buy for a sister?"))[0] == told


def test_the_user_asked_about_ranks_as_i_do(db, tenant):
    # "user" as a term would match the pasted query's user_id; the agent's question names a person.
    remember(db, tenant, "SQL", "SELECT user_id FROM payments WHERE user_id IN (SELECT user_id FROM users)")
    met = remember(db, tenant, "Meetup", "I met Emma at the marketing workshop")
    first, third = ask(db, tenant, "when did I meet Emma?"), ask(db, tenant, "when did the user meet Emma?")
    assert ids(third) == ids(first) == [met]
    # The term, back (with names off: the note naming Emma would otherwise stay first on her name).
    assert met in ids(ask(db, tenant, "when did the user meet Emma?", disable=["parties", "names"]))[1:]


def test_the_reply_to_a_matching_question_is_found(db, tenant):
    chat = conversation(db, tenant)
    other = conversation(db, tenant)
    asked = remember(db, tenant, "q", "Anything you're excited about in the adoption process?", conversation_id=chat,
                     valid_from=format_time(T0 - 180 * US), speaker="Ann")
    answer = remember(db, tenant, "a", "I'm thrilled to make a family for kids who need one.", conversation_id=chat,
                      valid_from=format_time(T0 - 120 * US), speaker="Bo")
    remember(db, tenant, "later", "Then we talked about the weather.", conversation_id=chat,
             valid_from=format_time(T0 - 60 * US), speaker="Ann")
    # The same question in another conversation lends nothing across conversations.
    remember(db, tenant, "q2", "What about the adoption process?", conversation_id=other,
             valid_from=format_time(T0 - 180 * US), speaker="Ann")
    res = ask(db, tenant, "What is Caroline excited about in the adoption process?", conversation_id=chat,
              explain=True)
    order = ids(res)
    assert order[:2] == [asked, answer]
    assert res.hits[1].parts["reply_to"] == asked and res.hits[1].score == pytest.approx(res.hits[0].score, rel=0.2)
    assert answer not in ids(ask(db, tenant, "excited about the adoption process", conversation_id=chat,
                                  disable=["replies"]))


def test_the_answer_to_a_follow_up_question_is_found(db, tenant):
    chat = conversation(db, tenant)
    told = remember(db, tenant, "s", "Melanie: We celebrated my daughter's birthday with a concert last night!",
                    conversation_id=chat, speaker="Melanie", valid_from=format_time(T0 - 240 * US))
    remember(db, tenant, "q", "Caroline: Wow! Who was on stage?", conversation_id=chat, speaker="Caroline",
             valid_from=format_time(T0 - 180 * US))
    answer = remember(db, tenant, "a", "Melanie: It was Matt Patterson, he is so talented!", conversation_id=chat,
                      speaker="Melanie", valid_from=format_time(T0 - 120 * US))
    remember(db, tenant, "later", "Caroline: Then we talked about the weather.", conversation_id=chat,
             speaker="Caroline", valid_from=format_time(T0 - 60 * US))
    question = "Who played at the concert for the daughter's birthday?"
    res = ask(db, tenant, question, conversation_id=chat, explain=True)
    assert ids(res)[:2] == [told, answer]
    assert res.hits[1].parts["followup_of"] == told
    assert answer not in ids(ask(db, tenant, question, conversation_id=chat, disable=["followups"]))


def test_a_reply_takes_the_questions_score_unless_its_own_is_higher(db, tenant):
    # Without a conversation the hits' scores are the pass's own, so the lent score can be read exactly.
    chat = conversation(db, tenant)
    asked = remember(db, tenant, "q", "Anything you're excited about in the adoption process?", conversation_id=chat,
                     valid_from=format_time(T0 - 180 * US), speaker="Ann")
    answer = remember(db, tenant, "a", "I'm thrilled to make a family for kids who need one.", conversation_id=chat,
                      valid_from=format_time(T0 - 120 * US), speaker="Bo")
    question = "excited about the adoption process"
    res = explained(db, tenant, question)
    assert res[answer].parts["reply_to"] == asked and res[answer].parts["bm25"] == 0.0
    assert res[answer].score == pytest.approx(res[asked].score)  # the question's whole score
    # A reply that matches better on its own keeps its own score.
    again = remember(db, tenant, "q", "Anything new in the adoption process?", conversation_id=chat,
                     valid_from=format_time(T0 - 60 * US), speaker="Ann")
    strong = remember(db, tenant, "a", "The adoption process excites me: every adoption process step excited me.",
                      conversation_id=chat, valid_from=format_time(T0 - 30 * US), speaker="Bo")
    res = explained(db, tenant, question)
    assert res[strong].score > res[again].score and "reply_to" not in res[strong].parts
    assert res[strong].score == pytest.approx(res[strong].parts["bm25"])


def test_a_reply_borrows_the_questions_match_but_is_weighed_by_its_own_speaker(db, tenant):
    # Melanie asks; Caroline answers. The question is about Caroline, so her
    # answer is weighed x1.5 as hers, not x1 as the asker's turn is.
    chat, (asked, answer) = exchange(
        db, tenant, ("Melanie", "Melanie: Anything you're excited about in the adoption process?"),
        ("Caroline", "Caroline: I'm thrilled to make a family for kids who need one."))
    question = "What is Caroline excited about in the adoption process?"
    res = explained(db, tenant, question)
    assert res[asked].parts["speaker"] == 1.0 and res[answer].parts["speaker"] == pytest.approx(1.5)
    assert res[answer].parts["reply_to"] == asked
    assert res[answer].score == pytest.approx(res[asked].score * 1.5)
    assert ids(ask(db, tenant, question, conversation_id=chat))[:2] == [answer, asked]
    # Weighed by the lender's factors instead (as before), the answer only ties the question it follows.
    with db:
        old = {h.id: h for h in recall(db, users.first_viewer(db, tenant), RecallParams(query=question, explain=True),
                                       now=T0 + DAY, tuning=Tuning(reply_own_factors=False)).hits}
    assert old[answer].score == pytest.approx(old[asked].score)


def test_every_matching_question_near_the_top_lends_to_its_answer(db, tenant):
    chat = conversation(db, tenant)
    said = {}
    for i, (q, a) in enumerate([("Anything new in the adoption process?", "We met the agency on Monday."),
                                ("How is the adoption process going?", "Slowly, the paperwork is endless."),
                                ("Any adoption process news?", "Not yet, still waiting.")]):
        said[remember(db, tenant, "q", q, conversation_id=chat, valid_from=format_time(T0 - (300 - 60 * i) * US),
                      speaker="Ann")] = remember(db, tenant, "a", a, conversation_id=chat, speaker="Bo",
                                                 valid_from=format_time(T0 - (270 - 60 * i) * US))
    hits = explained(db, tenant, "adoption process")
    assert {a: hits[a].parts["reply_to"] for a in said.values()} == {a: q for q, a in said.items()}


def test_notes_are_not_an_exchange_they_do_not_lend(db, tenant):
    # An agent's notes in one conversation, with no speaker: a note ending in "?" is not a question the next
    # note answers. The same texts as turns are.
    chat = conversation(db, tenant)
    asked = remember(db, tenant, "q", "Open question: is the adoption process excited about?", conversation_id=chat,
                     valid_from=format_time(T0 - 180 * US))
    after = remember(db, tenant, "a", "Deployed v2 of the billing service to staging.", conversation_id=chat,
                     valid_from=format_time(T0 - 120 * US))
    hits = explained(db, tenant, "excited about the adoption process")
    assert after not in hits
    _, (q, a) = exchange(db, tenant, ("Ann", "Open question: is the adoption process excited about?"),
                         ("Bo", "Deployed v2 of the billing service to staging."))
    hits = explained(db, tenant, "excited about the adoption process")
    assert hits[a].parts["reply_to"] == q and "episode" in hits[q].parts


def test_notes_written_together_are_an_episode(db, tenant):
    # Three notes written within minutes of each other record one deploy; a note days later says "paused" and
    # "deploy" about another team. On its words alone it outranks the note that says why the billing deploy
    # was paused; as one of a lone episode, it stays below the notes of the episode the question is about.
    for i, text in enumerate(("Lunch menus for the week", "The team offsite is in March",
                              "The hiring plan needs a second reviewer")):
        remember(db, tenant, text[:20], text, type="learning", valid_from=format_time(T0 - (9 - i) * DAY))
    session = [remember(db, tenant, text[:20], text, type="learning", valid_from=format_time(T0 - 3 * DAY + i * 60 * US))
               for i, text in enumerate(("The billing deploy failed on the schema migration",
                                         "The migration was rolled back and the deploy paused",
                                         "Billing customers were told of the failed deploy"))]
    why = session[1]
    other = remember(db, tenant, "The search team", "The search team paused a deploy", type="learning",
                     valid_from=format_time(T0 - DAY))
    question = "Why was the billing deploy paused?"
    res = ask(db, tenant, question, explain=True, now=T0)
    order = ids(res)
    episode = {h.id: h.parts["episode"] for h in res.hits}
    assert order.index(why) < order.index(other)
    assert episode[why] == 1.0 > episode[other]
    with db:
        apart = recall(db, users.first_viewer(db, tenant), RecallParams(query=question), now=T0,
                       tuning=Tuning(note_episodes=False))
    assert ids(apart).index(other) < ids(apart).index(why)


def test_a_follow_up_answer_gets_seven_tenths_of_the_turn_it_follows(db, tenant):
    chat = conversation(db, tenant)
    told = remember(db, tenant, "s", "We celebrated my daughter's birthday with a concert last night!",
                    conversation_id=chat, valid_from=format_time(T0 - 240 * US), speaker="Bo")
    remember(db, tenant, "q", "Wow! Who was on stage?", conversation_id=chat, valid_from=format_time(T0 - 180 * US),
             speaker="Ann")
    answer = remember(db, tenant, "a", "It was Matt Patterson, so talented!", conversation_id=chat,
                      valid_from=format_time(T0 - 120 * US), speaker="Bo")
    res = explained(db, tenant, "concert for the daughter's birthday")
    assert res[answer].parts["followup_of"] == told
    assert res[answer].score == pytest.approx(0.7 * res[told].score)


def test_the_turn_a_matching_reply_answers_borrows_its_match_weighed_as_the_askers(db, tenant):
    # The assistant's answer repeats the words; the user's turn before it holds what the user said.
    chat, (said, echo) = exchange(
        db, tenant, ("user", "I found that turbinado sugar adds a richer flavor. What else pairs with it?"),
        ("assistant", "Turbinado is great for your chocolate chip cookies: you could add brown butter."))
    question = "my chocolate chip cookies need something extra"
    res = explained(db, tenant, question)
    assert res[said].parts["antecedent_of"] == echo and res[said].parts["bm25"] == 0.0
    # 0.7 of the answer's match, weighed by the user's own voice rather than the assistant's.
    match = res[echo].score / res[echo].parts["voice"]
    assert res[said].score == pytest.approx(0.7 * match * res[said].parts["voice"])
    assert res[said].parts["voice"] > 1 > res[echo].parts["voice"]
    assert ids(ask(db, tenant, question, conversation_id=chat)) == [said, echo]
    assert ids(ask(db, tenant, question, conversation_id=chat, disable=["antecedents"])) == [echo]


def test_only_another_speakers_turn_before_borrows(db, tenant):
    chat = conversation(db, tenant)
    for speaker in ("user", None):  # the same speaker, then none recorded: not known to be the other party
        before = remember(db, tenant, "u", "Some unrelated words first.", conversation_id=chat, speaker=speaker,
                          valid_from=format_time(T0 - (300 if speaker else 100) * US))
        remember(db, tenant, "a", "Chocolate chip cookies love brown butter.", conversation_id=chat,
                 speaker="user" if speaker else None, valid_from=format_time(T0 - (240 if speaker else 50) * US))
        assert before not in ids(ask(db, tenant, "chocolate chip cookies", conversation_id=chat))


def test_replies_read_who_said_each_turn_with_the_speaker_factor_off(db, tenant):
    # One read of the pass's speakers serves the speaker factor and the replies: each works without the other.
    _, (asked, answer) = exchange(
        db, tenant, ("Melanie", "Anything you're excited about in the adoption process?"),
        ("Caroline", "I'm thrilled to make a family for kids who need one."))
    _, (own, again) = exchange(
        db, tenant, ("Caroline", "Anything new in the adoption process?"), ("Caroline", "We met the agency on Monday."))
    _, (said, echo) = exchange(
        db, tenant, ("user", "I found that turbinado sugar adds a richer flavor."),
        ("assistant", "Turbinado is great for your chocolate chip cookies."))
    res = explained(db, tenant, "What is Caroline excited about in the adoption process?", disable=["speaker"])
    assert res[answer].parts["reply_to"] == asked and own in res and again not in res
    assert not [h.id for h in res.values() if "speaker" in h.parts]
    res = explained(db, tenant, "my chocolate chip cookies need something extra", disable=["speaker"])
    assert res[said].parts["antecedent_of"] == echo


@pytest.fixture
def teammates(db, tenant):
    """(ann, ben, say): viewers of two users of team `core`, and `say(v, content, seconds_before_T0, speaker=None,
    team="core")`, which writes a turn of their one conversation (`team=None`: private to its writer)."""
    with db:
        ids_ = {n: users.create_user(db, tenant, n, now=T0)[0] for n in ("ann", "ben")}
        core = users.create_team(db, tenant, "core", now=T0)
        for uid in ids_.values():
            users.join(db, core, uid, now=T0)
        ann, ben = (users.viewer(db, tenant, i, n) for n, i in ids_.items())
        chat = tenants.create_conversation(db, ann, "chat", now=T0).id

    def say(v, content, seconds, speaker=None, team="core"):
        with db:
            return entries.remember(db, v, RememberParams(
                type="context", title="t", content=content, conversation_id=chat, team=team, speaker=speaker,
                valid_from=format_time(T0 - seconds * US)), now=T0)

    return ann, ben, say


@pytest.mark.parametrize(("part", "first", "second", "query"), [
    # replies: the question lends to the next turn the reader sees
    ("reply_to", ("Ann", "Anything you're excited about in the adoption process?"),
     ("Bo", "I'm thrilled to make a family for kids who need one."), "excited about the adoption process"),
    # antecedents: the answer lends to the turn before it that the reader sees
    ("antecedent_of", ("user", "I found that turbinado sugar adds a richer flavor."),
     ("assistant", "Turbinado is great for your chocolate chip cookies."),
     "my chocolate chip cookies need something extra"),
])
def test_a_turn_lends_across_the_turns_the_reader_sees(db, teammates, part, first, second, query):
    # A teammate's private turn between two shared turns is missing for the reader, so the
    # shared turns lend to each other; for the teammate, their own turn is the neighbour.
    ann, ben, say = teammates
    one = say(ann, first[1], 180, first[0])
    # The aside is said by whoever would then lend or borrow: a turn lends only to another speaker's.
    aside = say(ben, "Note to self: buy milk.", 150, second[0] if part == "reply_to" else first[0], team=None)
    two = say(ann, second[1], 120, second[0])
    lender, borrower = (one, two) if part == "reply_to" else (two, one)
    p = RecallParams(query=query, explain=True)
    with db:
        for_ann = {h.id: h for h in recall(db, ann, p, now=T0 + DAY).hits}
        for_ben = {h.id: h for h in recall(db, ben, p, now=T0 + DAY).hits}
    assert for_ann[borrower].parts[part] == lender and aside not in for_ann
    assert for_ben[aside].parts[part] == lender and borrower not in for_ben


def test_the_turn_before_is_the_one_valid_at_as_of(db, tenant):
    _, (older, said, echo) = exchange(
        db, tenant, ("user", "We bake every Sunday."), ("user", "I found that turbinado sugar adds a richer flavor."),
        ("assistant", "Turbinado is great for your chocolate chip cookies."))
    with db:
        entries.forget(db, users.first_viewer(db, tenant), said, now=T0 - 60 * US)
    question = "my chocolate chip cookies need something extra"
    then = explained(db, tenant, question, as_of=format_time(T0 - 90 * US))
    now = explained(db, tenant, question)
    assert then[said].parts["antecedent_of"] == echo and older not in then
    assert now[older].parts["antecedent_of"] == echo and said not in now


def test_a_known_at_read_does_not_move_with_turns_recorded_later(db, tenant):
    chat = conversation(db, tenant)
    remember(db, tenant, "q", "Anything you're excited about in the adoption process?", conversation_id=chat,
             valid_from=format_time(T0 - 180 * US))
    remember(db, tenant, "a", "I'm thrilled to make a family for kids who need one.", conversation_id=chat,
             valid_from=format_time(T0 - 120 * US))
    question = dict(query="excited about the adoption process", known_at=format_time(T0 + DAY // 2))
    before = ask(db, tenant, **question, explain=True, now=T0 + DAY)
    # Recorded later, placed between the two in valid time: the past as it was known must not change.
    remember(db, tenant, "late", "Sorry, one more thing first.", conversation_id=chat,
             valid_from=format_time(T0 - 150 * US), now=T0 + 2 * DAY)
    after = ask(db, tenant, **question, explain=True, now=T0 + 3 * DAY)
    # (Scores may move: the idf and average length are the index's now, docs/retrieval.md.)
    assert [(h.id, sorted(h.parts)) for h in after.hits] == [(h.id, sorted(h.parts)) for h in before.hits]


def test_any_word_of_a_speakers_name_names_them(db, tenant):
    other = remember(db, tenant, "t", "the support group was loud", speaker="Melanie Jones")
    said = remember(db, tenant, "t", "the support group was quiet", speaker="Caroline Smith")
    res = explained(db, tenant, "How was the support group for Caroline?")
    assert res[said].parts["speaker"] == pytest.approx(1.5) and res[other].parts["speaker"] == 1.0


def test_a_when_question_favours_the_turn_that_says_when(db, tenant):
    # The talk about the group says more about it; the turn that answers "when" says when it happened.
    talk = remember(db, tenant, "t", "The support group was so powerful, the support group stories moved me")
    went = remember(db, tenant, "w", "I went to the support group yesterday")
    question = "When did Caroline go to the support group?"
    res = ask(db, tenant, question, explain=True)
    assert ids(res) == [went, talk]
    assert [h.parts["when"] for h in res.hits] == [1.5, 1.0]
    assert ids(ask(db, tenant, question, disable=["when"])) == [talk, went]
    # Not a "when" question: the stage stays out of it.
    assert "when" not in ask(db, tenant, "support group", explain=True).hits[0].parts


def test_a_turn_of_an_exchange_about_the_query_outranks_a_lone_mention(db, tenant):
    # Both weak turns say "starter" once; the one said a minute after a turn about the
    # sourdough starter is about it, the one a day later is about a car.
    chat = conversation(db, tenant)
    said = remember(db, tenant, "t", "My sourdough starter bubbled overnight, the sourdough smells great",
                    conversation_id=chat, now=T0, speaker="Ann")
    after = remember(db, tenant, "t", "Keep the starter warm and it rises again", conversation_id=chat, now=T0 + 60 * US,
                     speaker="Bo")
    lone = remember(db, tenant, "t", "The starter of the old car failed", conversation_id=chat, now=T0 + DAY,
                    speaker="Ann")
    question = "How is the sourdough starter?"
    res = ask(db, tenant, question, conversation_id=chat, explain=True, now=T0 + 2 * DAY)
    assert ids(res) == [said, after, lone]
    episode = {h.id: h.parts["episode"] for h in res.hits}
    assert episode[said] == episode[after] == 1.0 > episode[lone]
    off = ask(db, tenant, question, conversation_id=chat, explain=True, now=T0 + 2 * DAY, disable=["episodes"])
    assert ids(off) == [said, lone, after]  # on its own words the lone mention is the better match
    assert all("episode" not in h.parts for h in off.hits)


def test_a_when_question_at_known_at_reads_the_text_recorded_then(db, tenant):
    went = remember(db, tenant, "w", "I went to the support group")
    with db:  # later, the entry comes to say when
        entries.update(db, users.first_viewer(db, tenant),
                       UpdateParams(id=went, content="I went to the support group yesterday"), now=T0 + DAY)
    question = "When did I go to the support group?"
    assert ask(db, tenant, question, explain=True, now=T0 + 2 * DAY).hits[0].parts["when"] == 1.5
    then = ask(db, tenant, question, explain=True, known_at=format_time(T0 + DAY // 2), now=T0 + 2 * DAY)
    assert ids(then) == [went] and then.hits[0].parts["when"] == 1.0


@pytest.mark.parametrize("text, says", [
    ("I went there yesterday", True), ("We met last weekend", True), ("two weeks ago", True),
    ("on Friday we hiked", True), ("back in June", True), ("since 2019", True),
    ("I may go", False), ("they march on", False), ("I've known them for four years", False),
    ("a weekly meeting", False), ("the cache takes 2048 MB", False), ("we swim on Mondays", False),
    # any case, in ASCII text (lowercased, then matched) and in other text (matched ignoring case)
    ("LAST WEEKEND", True), ("Café on Friday", True), ("İN 2019 we moved", True), ("a CAFÉ on Mondays", False),
])
def test_what_counts_as_saying_when(text, says):
    assert dates.says_when(text) is says


def test_a_turn_does_not_answer_its_own_speakers_question(db, tenant):
    chat = conversation(db, tenant)
    remember(db, tenant, "q", "Anything new about the adoption process?", conversation_id=chat, speaker="Mel",
             valid_from=format_time(T0 - 180 * US))
    same = remember(db, tenant, "s", "Also, the kids loved camping.", conversation_id=chat, speaker="Mel",
                    valid_from=format_time(T0 - 120 * US))
    assert same not in ids(ask(db, tenant, "adoption process", conversation_id=chat))


def test_a_long_turn_ending_in_a_courtesy_question_lends_nothing(db, tenant):
    chat = conversation(db, tenant)
    remember(db, tenant, "q", "Adoption agencies differ a lot. " * 12 + "Anything else about adoption?",
             conversation_id=chat, valid_from=format_time(T0 - 180 * US))
    after = remember(db, tenant, "a", "Thanks, that is all.", conversation_id=chat, valid_from=format_time(T0 - 120 * US))
    assert after not in ids(ask(db, tenant, "adoption", conversation_id=chat))


def test_a_thread_root_is_not_outranked_by_replies_on_its_own_title(db, tenant):
    # Issue 9: `recall deploy` put two short "Re: Deploy runbook" replies above the runbook.
    root = remember(db, tenant, "Deploy runbook", "Step 1: freeze merges. Step 2: tag the release and run the canary "
                    "for an hour. Step 3: watch the error budget; roll back to the previous tag if it burns.")
    migrations = remember(db, tenant, "Re: Deploy runbook", "Add a step for the database migrations.", parent_id=root)
    page = remember(db, tenant, "Re: Deploy runbook", "Agreed, and page on-call first.", parent_id=root)
    assert ids(ask(db, tenant, "deploy"))[0] == root
    assert ids(ask(db, tenant, "runbook"))[0] == root
    # Without the rule the short replies win on length normalization.
    assert ids(ask(db, tenant, "deploy", disable=["threads"]))[0] in (migrations, page)
    # A reply that says something of its own about the query still wins on it.
    assert ids(ask(db, tenant, "deploy database migrations"))[0] == migrations


def test_a_speaker_named_in_the_query_is_favoured(db, tenant):
    mentions = remember(db, tenant, "t", "Melanie: Caroline, how was the support group yesterday?", speaker="Melanie")
    said = remember(db, tenant, "t", "Caroline: The support group was powerful, I went with friends.",
                    speaker="Caroline")
    res = ask(db, tenant, "How was the support group for Caroline?", explain=True)
    by_id = {h.id: h for h in res.hits}
    assert ids(res)[0] == said and by_id[said].parts["speaker"] == pytest.approx(1.5)
    assert by_id[mentions].parts["speaker"] == 1.0
    assert ids(ask(db, tenant, "How was the support group for Caroline?", disable=["speaker"]))[0] == mentions
    # "user" and "assistant" are roles voice reads; naming them is not naming a speaker.
    user = remember(db, tenant, "t", "the support group met on Friday", speaker="user")
    hits = explained(db, tenant, "when did the user's support group meet?")
    assert hits[user].parts["speaker"] == 1.0


def test_the_speaker_signal_at_known_at_reads_the_speaker_recorded_then(db, tenant):
    mentions = remember(db, tenant, "t", "Melanie: Caroline, how was the support group?", speaker="Melanie")
    said = remember(db, tenant, "t", "The support group was powerful, I went with friends.", speaker="Melanie")
    with db:  # later, the second turn's speaker is corrected
        entries.update(db, users.first_viewer(db, tenant), UpdateParams(id=said, speaker="Caroline"), now=T0 + DAY)
    question = "How was the support group for Caroline?"
    now = {h.id: h.parts["speaker"] for h in ask(db, tenant, question, explain=True, now=T0 + 2 * DAY).hits}
    assert now == {said: pytest.approx(1.5), mentions: 1.0}
    then = ask(db, tenant, question, explain=True, known_at=format_time(T0 + DAY // 2), now=T0 + 2 * DAY)
    assert {h.id: h.parts["speaker"] for h in then.hits} == {said: 1.0, mentions: 1.0}


def test_memory_framing_words_can_be_kept_as_terms(db, tenant):
    remember(db, tenant, "Lisbon", "the conversation about Lisbon trams")
    shipped = ask(db, tenant, "remind me of our conversation about Lisbon", explain=True)
    kept = ask(db, tenant, "remind me of our conversation about Lisbon", disable=["framing"], explain=True)
    assert '"conversation"' not in shipped.expression and '"remind"' not in shipped.expression
    assert '"conversation"' in kept.expression and '"remind"' in kept.expression
    assert '"our"' not in kept.expression  # English stopwords still go


def test_a_question_for_an_amount_prefers_the_entry_with_a_figure(db, tenant):
    vague = remember(db, tenant, "Commute", "my commute: the train to the office")
    figure = remember(db, tenant, "Commute", "my commute: the 8:15 train to the office")
    assert ids(ask(db, tenant, "how long is my commute by train to the office?", disable=["quantity"]))[0] == vague
    res = ask(db, tenant, "how long is my commute by train to the office?", explain=True)
    assert ids(res)[0] == figure
    assert [h.parts["quantity"] for h in res.hits] == [1.2, 1.0]
    assert "quantity" not in ask(db, tenant, "my commute by train", explain=True).hits[0].parts


def test_a_figure_written_in_words_counts_and_can_be_switched_off(db, tenant):
    vague = remember(db, tenant, "Japan", "my trip to Japan was a great time")
    worded = remember(db, tenant, "Japan", "my trip to Japan lasted two weeks, a great time")
    question = "how long was my trip to Japan?"
    res = ask(db, tenant, question, explain=True)
    assert ids(res)[0] == worded
    assert res.hits[0].parts["quantity"] == 1.2 and res.hits[0].parts["number_words"] == 1.0
    res = ask(db, tenant, question, disable=["number_words"], explain=True)
    assert [h.parts["quantity"] for h in res.hits] == [1.0, 1.0]
    assert "number_words" not in res.hits[0].parts
    assert ids(res)[0] == vague


@pytest.mark.parametrize(
    ("content", "numerals"),
    [
        ("I stayed 9 nights", 1),
        ("I stayed two weeks", 2),
        ("Twenty-five titles on my list", 2),
        ("a (dozen) eggs", 2),
        ("three, then four, then 5", 1),
        ("the one I bought", 0),
        ("network of twoway links, tenfold", 0),
    ],
)
def test_numerals_signal_counts_digits_then_number_words(db, tenant, content, numerals):
    eid = remember(db, tenant, "Note", content)
    assert db.execute("SELECT numerals FROM recall_entries WHERE entry_id = ?", (eid,)).fetchone() == (numerals,)


# ---- validity, as_of, supersession --------------------------------------------------


def test_as_of_ranks_the_set_as_it_stood_then(db, tenant):
    first = remember(db, tenant, "Ship date", "we ship on Friday", now=T0)
    with db:
        entries.forget(db, users.first_viewer(db, tenant), first, now=T0 + 2 * DAY)
    later = remember(db, tenant, "Ship date", "we ship on Monday", now=T0 + 3 * DAY)
    assert ids(ask(db, tenant, "ship date", now=T0 + 4 * DAY)) == [later]
    assert ids(ask(db, tenant, "ship date", as_of=format_time(T0 + DAY))) == [first]
    assert ids(ask(db, tenant, "ship date", as_of=format_time(T0 + 2 * DAY))) == []  # half-open: gone at valid_to
    assert ids(ask(db, tenant, "ship date", as_of=format_time(T0 + 2 * DAY - 1))) == [first]
    assert ids(ask(db, tenant, "ship date", as_of=format_time(T0 - 1))) == []


def test_superseded_hits_are_marked(db, tenant):
    old = remember(db, tenant, "Ship date", "we ship on Friday", now=T0)
    new = remember(db, tenant, "Ship date", "we ship on Monday", now=T0 + 2 * DAY, supersedes_ids=[old],
                   valid_from=format_time(T0 + 2 * DAY))
    now = ask(db, tenant, "ship date", now=T0 + 3 * DAY)
    assert ids(now) == [new] and not now.hits[0].superseded
    then = ask(db, tenant, "ship date", as_of=format_time(T0 + DAY))
    assert ids(then) == [old] and then.hits[0].superseded


def test_as_of_reads_deeper_when_newer_rows_fill_the_top(db, tenant):
    early = remember(db, tenant, "canary", "canary", now=T0)
    for i in range(60):  # stronger matches that did not exist yet at as_of
        remember(db, tenant, "canary canary", f"canary canary canary {i}", now=T0 + DAY,
                 valid_from=format_time(T0 + DAY))
    assert ids(ask(db, tenant, "canary", as_of=format_time(T0 + 1))) == [early]


# ---- graduated scoping ---------------------------------------------------------------


def test_conversation_entries_are_pinned_and_unscoped_ones_are_searched_with_them(db, tenant):
    conv = conversation(db, tenant)
    other = conversation(db, tenant)
    local = remember(db, tenant, "Canary plan", "canary canary", conversation_id=conv)
    shared = remember(db, tenant, "Canary basics", "canary", conversation_id=None)
    elsewhere = remember(db, tenant, "Canary elsewhere", "canary", conversation_id=other)
    res = ask(db, tenant, "canary", conversation_id=conv, explain=True)
    scope = {h.id: h.scope for h in res.hits}
    assert scope == {local: "conversation", shared: "tenant", elsewhere: "tenant"}
    assert ids(res)[-1] == elsewhere  # the tenant pass fills after the conversation pass
    assert res.hits[-1].parts["tenant_rank"] == 1.0 and "conversation_rank" not in res.hits[-1].parts
    assert "conversation_rank" in res.hits[0].parts


def test_a_strong_tenant_wide_hit_can_outrank_a_weak_local_one(db, tenant):
    conv = conversation(db, tenant)
    other = conversation(db, tenant)
    weak = [remember(db, tenant, f"Note {i}", f"aurora mentioned in passing {i}", conversation_id=conv)
            for i in range(40)]
    strong = remember(db, tenant, "Aurora borealis photography", "aurora borealis photography aurora borealis",
                      conversation_id=other)
    res = ask(db, tenant, "aurora borealis photography", conversation_id=conv, limit=45)
    order = ids(res)
    assert strong in order and set(weak) <= set(order)
    assert order.index(strong) < order.index(weak[-1])
    assert order.index(strong) > 0  # but not above the conversation's best


def test_a_conversation_without_matches_is_filled_from_the_tenant(db, tenant):
    conv = conversation(db, tenant)
    other = conversation(db, tenant)
    remember(db, tenant, "Unrelated", "lunch menu", conversation_id=conv)
    hit = remember(db, tenant, "Canary plan", "canary", conversation_id=other)
    res = ask(db, tenant, "canary", conversation_id=conv)
    assert ids(res) == [hit] and res.hits[0].scope == "tenant"
    assert ask(db, tenant, "canary", conversation_id=conv, disable=["tenant_fill"]).hits == []


def test_the_conversation_pass_leaves_out_words_most_of_the_tenant_uses(db, tenant):
    # A floor of 0 so a small tenant shows the rule: "project" is in every document, "canary" in one of 20.
    conv = conversation(db, tenant)
    for i in range(19):
        remember(db, tenant, f"Note {i}", f"project note {i}", conversation_id=conv)
    canary = remember(db, tenant, "Canary", "project canary", conversation_id=conv)
    wide, common = Tuning(common_floor=0), Tuning(common_floor=0, common_share=1.0)

    def ask_(query, tuning):
        with db:
            params = RecallParams(query=query, conversation_id=conv, limit=30, explain=True)
            return recall(db, users.first_viewer(db, tenant), params, now=T0, tuning=tuning)

    dropped, kept, alone = ask_("project canary", wide), ask_("project canary", common), ask_("project", wide)
    assert '"canary"' in dropped.expression and '"project"' not in dropped.expression
    assert ids(dropped)[0] == canary
    assert '"project"' in kept.expression and len(kept.hits) == 20
    assert '"project"' in alone.expression and alone.hits  # the rarest word always stays


def test_a_teams_strong_match_is_not_crowded_out_by_many_private_ones(db, tenant):
    # Each index the reader searches gives its best; the best of all of them are kept.
    with db:
        uid = users.create_user(db, tenant, "ann", now=T0)[0]
        users.join(db, users.create_team(db, tenant, "core", now=T0), uid, now=T0)
        ann = users.viewer(db, tenant, uid, "ann")
        for i in range(40):
            entries.remember(db, ann, RememberParams(type="project", title=f"Note {i}",
                                                     content=f"a long note on many things, aurora among them {i}"), now=T0)
        strong = entries.remember(db, ann, RememberParams(type="project", title="Aurora", content="aurora",
                                                          team="core"), now=T0)
    with db:
        assert [h.id for h in recall(db, ann, RecallParams(query="aurora"), now=T0).hits][0] == strong


def test_other_tenants_are_never_searched(db, tenant):
    with db:
        mallory = tenants.create_tenant(db, "mallory", now=T0)[0]
        theirs = tenants.create_conversation(db, users.first_viewer(db, mallory), "x", now=T0).id
    remember(db, mallory, "Canary secret", "canary", conversation_id=theirs)
    remember(db, mallory, "Canary secret", "canary")
    mine = remember(db, tenant, "Canary plan", "canary")
    conv = conversation(db, tenant)
    assert ids(ask(db, tenant, "canary")) == [mine]
    assert ids(ask(db, tenant, "canary", conversation_id=conv)) == [mine]
    # Another tenant's conversation id scopes nothing of theirs into our results.
    assert ids(ask(db, tenant, "canary", conversation_id=theirs)) == [mine]


# ---- the index follows the entries ----------------------------------------------------


def test_index_and_signals_follow_update_forget_and_purge(db, tenant):
    eid = remember(db, tenant, "Plan", "the canary plan")
    with db:
        entries.update(db, users.first_viewer(db, tenant), UpdateParams(id=eid, content="I moved my plan to the zeppelin"), now=T0 + US)
    assert ask(db, tenant, "canary").hits == []
    assert ids(ask(db, tenant, "zeppelin")) == [eid]
    signals = db.execute(
        "SELECT self_refs, other_refs, numerals FROM recall_entries WHERE entry_id = ?", (eid,)
    ).fetchone()
    assert signals == (2, 0, 0)
    with db:
        entries.update(db, users.first_viewer(db, tenant), UpdateParams(id=eid, content="I moved my plan to the zeppelin at 9"), now=T0 + US)
    assert db.execute("SELECT numerals FROM recall_entries WHERE entry_id = ?", (eid,)).fetchone() == (1,)
    with db:
        entries.forget(db, users.first_viewer(db, tenant), eid, now=T0 + DAY)
    assert ask(db, tenant, "zeppelin", now=T0 + 2 * DAY).hits == []
    assert ids(ask(db, tenant, "zeppelin", as_of=format_time(T0 + 1))) == [eid]
    with db:
        entries.purge(db, users.first_viewer(db, tenant), eid)
    assert ask(db, tenant, "zeppelin", as_of=format_time(T0 + 1)).hits == []
    assert db.execute("SELECT count(*) FROM recall_entries").fetchone()[0] == 0


def test_compaction_merges_segments_and_keeps_results(db, tenant):
    for batch in range(6):
        with db:
            for i in range(20):
                entries.remember(db, users.first_viewer(db, tenant), RememberParams(type="project", title=f"canary {batch} {i}",
                                                            content="canary flight log"), now=T0)
    before = ids(ask(db, tenant, "canary flight", limit=200))
    assert maintain.segments(db) > 1
    while maintain.compact(db, pages=50):
        pass
    assert maintain.segments(db) == 1
    assert ids(ask(db, tenant, "canary flight", limit=200)) == before


@pytest.mark.sqlite_only("FTS5's segments and the file's free pages are SQLite's")
def test_compaction_leaves_a_large_segment_alone_for_a_few_small_writes(db, tenant):
    with db:
        for i in range(300):
            remember(db, tenant, f"canary {i}", "canary flight log " + " ".join(f"w{i}x{j}" for j in range(40)))
    while maintain.compact(db, pages=50):
        pass
    table = "entries_fts_" + str(users.first_viewer(db, tenant).private_scope)
    large = db.execute(f"SELECT segid, max(pgno) >> 1 FROM {table}_idx GROUP BY segid").fetchall()
    assert len(large) == 1 and large[0][1] >= 25  # three one-page segments are less than an eighth of it
    small = [remember(db, tenant, f"canary late {i}", "canary flight late") for i in range(3)]  # a segment each
    while maintain.compact(db, pages=50):
        pass
    # The large segment was not rewritten (same id, same pages); the small ones are still found.
    assert large[0] in db.execute(f"SELECT segid, max(pgno) >> 1 FROM {table}_idx GROUP BY segid").fetchall()
    assert maintain.segments(db) == 4
    assert set(small) <= set(ids(ask(db, tenant, "canary late", limit=10)))
    # Once the small ones add up to an eighth of the large one, everything is merged into one.
    with db:
        for i in range(50):
            remember(db, tenant, f"canary batch {i}", "canary batch log " + " ".join(f"b{i}x{j}" for j in range(40)))
    while maintain.compact(db, pages=50):
        pass
    assert maintain.segments(db) == 1
    assert set(small) <= set(ids(ask(db, tenant, "canary late", limit=10)))


@pytest.mark.sqlite_only("FTS5's segments and the file's free pages are SQLite's")
def test_a_compaction_pass_reads_each_scope_once_not_once_a_step(db, tenant):
    """Passing each step's answer on as the next `start`, a pass over many scopes stays linear in them."""
    scopes = [tenant] + [tenants.create_tenant(db, f"t{n}", now=T0)[0] for n in range(7)]
    for tid in scopes:
        for n in range(2):  # two transactions: two segments in every scope's index
            remember(db, tid, f"canary {tid} {n}", "canary flight log")
    reads = []

    def tracer(cursor, sql, bindings):
        if "GROUP BY segid" in sql:
            reads.append(sql)
        return True

    db.exec_trace = tracer
    step = 1
    while step := maintain.compact(db, pages=50, start=step):
        pass
    db.exec_trace = None
    assert maintain.segments(db) == len(scopes)  # every index merged into one segment
    # Each scope read when it is merged and once more when the next step goes on from it; read from
    # the first scope at every step, the pass would read 8 + 8 + 7 + ... + 1 = 44.
    assert len(reads) == 2 * len(scopes)
    assert len(set(reads)) == len(scopes)


@pytest.mark.sqlite_only("FTS5's segments and the file's free pages are SQLite's")
def test_idle_upkeep_gives_freed_pages_back(db, tenant):
    assert (db.pragma("page_size"), db.pragma("auto_vacuum")) == (8192, 2)  # a new file: 8 KiB, incremental
    for batch in range(6):
        with db:
            for i in range(50):
                remember(db, tenant, f"canary {batch} {i}", "canary flight log " * 20)
    with db:
        db.execute("DELETE FROM entries WHERE id % 2 = 0")
    assert db.pragma("freelist_count") > 0
    pages = db.pragma("page_count")
    while maintain.compact(db, pages=50):
        pass
    assert db.pragma("freelist_count") == 0 and db.pragma("page_count") < pages
    assert maintain.segments(db) == 1


def test_search_returns_the_fused_candidates_for_a_reranker(db, tenant):
    conv = conversation(db, tenant)
    for i in range(30):
        remember(db, tenant, f"Canary {i}", "canary", conversation_id=conv)
    with db:
        ranking = search(db, users.first_viewer(db, tenant), RecallParams(query="canary", conversation_id=conv, limit=5), depth=25, now=T0)
    assert len(ranking.candidates) == 30  # at least `depth`, and the pass's own depth
    scores = [c.score for c in ranking.candidates]
    assert scores == sorted(scores, reverse=True)
    with db:
        assert search(db, users.first_viewer(db, tenant), RecallParams(query="?!"), now=T0) is None  # no terms: the caller browses


def test_words_new_to_the_index_are_found_once_written(db, tenant):
    # Document frequencies are cached; a word first seen with none must not stay unsearchable.
    assert ask(db, tenant, "zeppelin hangar").hits == []
    eid = remember(db, tenant, "Airship", "the zeppelin is in the hangar")
    assert ids(ask(db, tenant, "zeppelin hangar")) == [eid]
    conv = conversation(db, tenant)
    assert ids(ask(db, tenant, "zeppelin hangar", conversation_id=conv)) == [eid]



def test_idf_is_never_negative_and_falls_as_more_documents_hold_the_word():
    """A document count above the row total (read mid-transaction) must not rank the best match last."""
    for n in (1, 3, 50):
        values = [_rank.idf(df, n) for df in range(0, 2 * n + 2)]
        assert all(v >= 0 for v in values)
        assert values == sorted(values, reverse=True)
        assert values[0] > values[n]  # a rare word outweighs one every document holds


def test_a_note_naming_whom_the_question_names_is_about_them(db, tenant):
    # Notes have no speaker: who a note is about is whom it names. Caroline is in most notes (her name
    # weighs little), so on words alone Melanie's short note on research wins; naming Caroline, hers does.
    for text in ("Caroline paints on weekends", "Caroline likes hiking", "Caroline moved to Boston",
                 "Caroline adopted a dog", "Caroline plays the violin"):
        remember(db, tenant, text[:20], text, type="learning")
    hers = remember(db, tenant, "Caroline", "Caroline has been researching adoption agencies near her home town",
                    type="learning")
    other = remember(db, tenant, "Melanie", "Melanie researched research grants", type="learning")
    res = explained(db, tenant, "What did Caroline research?")
    assert ids(ask(db, tenant, "What did Caroline research?"))[:2] == [hers, other]
    assert (res[hers].parts["names"], res[other].parts["names"]) == (2.0, 1.0)
    assert ids(ask(db, tenant, "What did Caroline research?", disable=["names"]))[:2] == [other, hers]
    # A turn is about its speaker (the speaker signal), not whom it names.
    _, (turn,) = exchange(db, tenant, ("Melanie", "Caroline researched adoption agencies, Melanie said"))
    assert "names" not in explained(db, tenant, "What did Caroline research?")[turn].parts


def test_a_note_is_about_whom_it_names_first(db, tenant):
    # Melanie's note mentions Caroline in passing and holds more of the question's words; Caroline's own note,
    # naming her first, is the one about her. Named anywhere, both notes would get the factor and Melanie's win.
    for text in ("Caroline paints on weekends", "Caroline likes hiking", "Caroline moved to Boston",
                 "Caroline adopted a dog", "Melanie plays the violin", "Melanie runs every morning"):
        remember(db, tenant, text[:20], text, type="learning")
    other = remember(db, tenant, "Melanie enjoyed", "Melanie enjoyed the LGBTQ events Caroline attended", type="learning")
    hers = remember(db, tenant, "Caroline attended", "Caroline attended a pride parade with her LGBTQ group",
                    type="learning")
    question = "Which LGBTQ events has Caroline attended?"
    res = explained(db, tenant, question)
    assert (res[hers].parts["names"], res[other].parts["names"]) == (2.0, 1.0)
    assert ids(ask(db, tenant, question))[:2] == [hers, other]
    with db:
        anywhere = recall(db, users.first_viewer(db, tenant), RecallParams(query=question), now=T0 + DAY,
                          tuning=Tuning(names_first=False))
    assert ids(anywhere)[:2] == [other, hers]
