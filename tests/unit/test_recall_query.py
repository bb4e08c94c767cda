"""Recall stages 1-2: query analysis, quoting and FTS5 expressions (the quoting fuzzed against real FTS5)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arbiter.recall import _sql
from arbiter.recall.query import MAX_TERMS, analyze, expression, first_name, quote, tokenizer
from arbiter.store import open_database, tenants

#: The one tenant's index in the module's database.
FTS = "entries_fts_1"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    conn = open_database(tmp_path_factory.mktemp("q") / "arbiter.db")
    with conn:
        assert tenants.create_tenant(conn, "q", now=0)[0] == 1
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def tok(db):
    return tokenizer(db)


def texts(q) -> list[str]:
    return [t.text for t in q.terms]


# ---- quoting ------------------------------------------------------------------


def test_quote_wraps_and_doubles_inner_quotes():
    assert quote("plain") == '"plain"'
    assert quote('de"pl', prefix=True) == '"de""pl"*'
    assert quote('say "hi"') == '"say ""hi"""'
    assert quote("a\x00b") == '"a b"'


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_no_user_text_produces_an_fts5_error(db, tok, text):
    # Every path from user text to MATCH: the scoped and unscoped expressions,
    # with and without the phrase/NEAR branches, and the bare quoted text.
    query = analyze(text, tok)
    candidates = [quote(text)]
    if query.terms:
        for phrase in (False, True):
            body = _sql.text_match(expression(query.terms, phrase=phrase, near=phrase).text)
            candidates += [body, _sql.scoped(body, 1, conversation_id=7), _sql.scoped(body, 1, besides=7)]
    for match in candidates:
        db.execute(f"SELECT count(*) FROM {FTS} WHERE {FTS} MATCH ?", (match,)).fetchall()


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(categories=["Cs", "Lu", "Ll", "Nd", "Po", "Zs"]), max_size=40))
def test_terms_never_carry_lone_surrogates_to_fts5(db, tok, text):
    # The wire rejects them, but a library caller can pass any str.
    query = analyze(text, tok)
    if query.terms:
        match = _sql.text_match(expression(query.terms).text)
        db.execute(f"SELECT count(*) FROM {FTS} WHERE {FTS} MATCH ?", (match,)).fetchall()


@pytest.mark.parametrize(
    "text",
    ['NEAR(" OR "', "a AND", "*", "col:term", '"unbalanced', "^start", "-x +y", "{title}: x", "(((", "x) OR (y"],
)
def test_fts5_syntax_in_a_query_is_just_words(db, tok, text):
    query = analyze(text, tok)
    words = [s for s, _ in tok(text)]
    assert set(texts(query)) <= set(words)  # words of the text, never an operator or a column name
    assert bool(query.terms) == bool(words)
    if not query.terms:
        return
    # Nothing but quoted strings joined by OR reaches FTS5, and the words
    # find a row that holds them as plain text (and only that row).
    expr = expression(query.terms, phrase=False, near=False).text
    assert _QUOTED_OR.fullmatch(expr), expr
    rowid = 900_000 + len(text)
    db.execute(f"INSERT INTO {FTS}(rowid, title, content, tags, source, scope) VALUES (?, '', ?, '', '', '')",
               (rowid, " ".join(words)))
    try:
        found = db.execute(f"SELECT rowid FROM {FTS} WHERE {FTS} MATCH ?",
                           (_sql.text_match(expr),)).fetchall()
    finally:
        db.execute(f"INSERT INTO {FTS}({FTS}, rowid, title, content, tags, source, scope) "
                   "VALUES ('delete', ?, '', ?, '', '', '')", (rowid, " ".join(words)))
    assert found == [(rowid,)]


_QUOTED_OR = re.compile(r'"(?:[^"]|"")*"(?: OR "(?:[^"]|"")*")*')


# ---- analysis -----------------------------------------------------------------


def test_a_trailing_star_makes_a_prefix_term(tok):
    q = analyze("depl* the canary *", tok)
    assert [(t.text, t.stem, t.prefix) for t in q.terms] == [("depl", "depl*", True), ("canary", "canari", False)]
    assert expression(q.terms).text == '"depl"* OR "canary"'
    assert not analyze("*", tok).terms and not analyze("🚀 %", tok).terms


def test_stopwords_go_and_content_words_stay(tok):
    assert texts(analyze("What is the name of the deploy tool we use?", tok)) == ["name", "deploy", "tool", "use"]


def test_numbers_are_kept_and_flagged(tok):
    q = analyze("How many fish were in the 20 gallon tank in 2023?", tok)
    assert texts(q) == ["fish", "20", "gallon", "tank", "2023"]
    assert [t.number for t in q.terms] == [False, True, False, False, True]


@pytest.mark.parametrize(
    "text",
    ['Where is the "love is in the air" dinner?', "Where is the “love is in the air” dinner?",
     "Where is the 'love is in the air' dinner?"],
)
def test_quoted_phrases_are_kept_whole_with_their_stopwords(tok, text):
    q = analyze(text, tok)
    assert q.terms[0].phrase and q.terms[0].text == "love is in the air"
    assert "dinner" in texts(q) and "love" in texts(q)


def test_apostrophes_are_not_quotes(tok):
    q = analyze("What's my sister's favourite colour?", tok)
    assert not any(t.phrase for t in q.terms)
    assert texts(q) == ["sister", "favourite", "colour"]


def test_one_term_per_stem(tok):
    assert texts(analyze("running runs run", tok)) == ["running"]


def test_a_query_of_only_stopwords_still_searches(tok):
    assert texts(analyze("who am I", tok)) == ["who", "am", "i"]


def test_punctuation_alone_has_no_terms(tok):
    assert analyze("?! ... --", tok).empty


def test_long_queries_keep_their_first_terms(tok):
    q = analyze(" ".join(f"word{i}" for i in range(100)), tok)
    assert len(q.terms) == MAX_TERMS and q.terms[0].text == "word0"


@pytest.mark.parametrize(
    "text, voice",
    [
        ("What did I buy for my sister?", "self"),
        ("Which bottle did you recommend?", "other"),
        ("What did you say about the powwow?", "other"),
        ("You mentioned three companies; which were they?", "other"),
        ("Can you recommend a show for me to watch?", "self"),
        ("What is the capital of Peru?", None),
        # As an agent asks its memory: the same parties, named.
        ("What did the user buy for the user's sister?", "self"),
        ("Which bottle did the assistant recommend?", "other"),
        ("What did the assistant say about the powwow?", "other"),
        ("Can the assistant recommend a show for the user to watch?", "self"),
        ("Which user manual covers the assistant mode?", None),
    ],
)
def test_voice_says_whose_words_hold_the_answer(tok, text, voice):
    assert analyze(text, tok).voice == voice


@pytest.mark.parametrize(
    "text, surfaces",
    [
        # A party is a person: possessed, asked about, or followed by a function word. Voice reads who; the
        # words are not what is asked about.
        ("What did the user buy for the user's sister?", ["buy", "sister"]),
        ("Can the assistant recommend a show for the user to watch?", ["recommend", "show", "watch"]),
        ("How many days ago did the user meet Emma?", ["days", "meet", "emma"]),
        ("the user has been feeling stuck", ["feeling", "stuck"]),
        # A subject stays: "the user table", "user", a party named in the first person's own words.
        ("the user table schema", ["user", "table", "schema"]),
        ("Which user manual covers the assistant mode?", ["user", "manual", "covers", "assistant", "mode"]),
        ("the user", ["user"]),  # a query that is only a party searches for it
        ("did the user* table get an index", ["user", "table", "get", "index"]),  # a starred word is chosen: a term
    ],
)
def test_the_user_and_the_assistant_as_parties_are_not_terms(tok, text, surfaces):
    assert [t.text for t in analyze(text, tok).terms] == surfaces


@pytest.mark.parametrize(
    "text, cues",
    [
        ("Which editor do I prefer?", {"preference", "fact"}),
        ("How many tickets are open?", {"fact", "quantity"}),
        ("How long did the migration take", {"quantity"}),
        ("the total number of open tickets", {"quantity"}),
        ("the average commute per week", {"quantity"}),  # an amount asked without "how" or "number of"
        ("total spent on groceries", {"quantity"}),
        ("How to roll back a deploy", {"howto"}),
        ("Why did the build fail?", {"howto"}),
        ("When did we ship the release?", {"time", "when"}),
        ("What year did we move to Berlin?", {"fact", "when"}),
        ("How long ago did the user adopt the cat?", {"quantity", "time", "when"}),
        ("What happens when the deploy fails?", {"fact", "time"}),  # a condition, not a question about time
        ("deploy checklist", set()),
    ],
)
def test_intent_cues(tok, text, cues):
    assert analyze(text, tok).cues == cues


# ---- expression ---------------------------------------------------------------


def test_one_term_is_a_bag(tok):
    e = expression(analyze("deploy", tok).terms)
    assert e.text == '"deploy"' and e.slots == (("bag", ("deploi",)),)


def test_two_to_six_words_get_phrase_near_and_bag(tok):
    e = expression(analyze("deploy canary rollback", tok).terms)
    assert e.text == (
        '"deploy canary rollback" OR NEAR("deploy" "canary" "rollback", 8) OR ("deploy" OR "canary" OR "rollback")'
    )
    assert [branch for branch, _ in e.slots] == ["phrase", "near", "near", "near", "bag", "bag", "bag"]


def test_seven_words_are_a_bag(tok):
    e = expression(analyze("one two three four five six seven", tok).terms)
    assert "NEAR" not in e.text and len(e.slots) == 7


def test_branches_can_be_switched_off(tok):
    terms = analyze("deploy canary", tok).terms
    assert expression(terms, phrase=False, near=False).text == '"deploy" OR "canary"'
    assert expression(terms, phrase=True, near=False).text == '"deploy canary" OR ("deploy" OR "canary")'


def test_slots_number_the_phrases_as_fts5_does(db, tok):
    # The ranking reads phrase i's hits by position: the slots must match FTS5's numbering.
    seen = []

    def count(api, *args):
        seen.append(api.phrase_count)
        return 0.0

    db.register_fts5_function("count_phrases", count)
    with db:
        db.execute(
            "INSERT INTO entries(tenant_id, author_id, scope_id, type, title, content_z, recorded_at, valid_from) "
            "VALUES (1, 1, 1, 'project', 'deploy canary', "
            "arbiter_pack('the deploy canary \"quoted thing\" rollback'), 0, 0)"
        )
    for text in ['deploy canary rollback "quoted thing"', "deploy", "one two three four five six seven deploy"]:
        e = expression(analyze(text, tok).terms)
        seen.clear()
        db.execute(
            f"SELECT count_phrases({FTS}) FROM {FTS} WHERE {FTS} MATCH ?",
            (_sql.scoped(_sql.text_match(e.text), 1, conversation_id=5),),
        ).fetchall()
        assert seen and seen[0] == len(e.slots) + 2  # + the scope tokens c5 and u1


def test_tokenizer_matches_the_index(db):
    row = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (FTS,)).fetchone()[0]
    assert "tokenize='porter unicode61 remove_diacritics 2'" in row


@pytest.mark.parametrize(
    "text, names",
    [
        ("When did Maria meet Jean?", {"maria", "jean"}),
        ("What is Caroline's favourite book?", {"carolin"}),  # the possessive is not part of the name
        ("What did I tell the User about it?", set()),  # "I" is a stopword, "User" a party
        ("what did caroline research", set()),  # a name in lower case is only a word
        ("Which Postgres version did we upgrade to?", {"postgr"}),
    ],
)
def test_names_are_the_capitalised_words_that_are_not_stopwords(tok, text, names):
    assert analyze(text, tok).names == names


@pytest.mark.parametrize(
    "text, first",
    [
        ("Melanie finds LGBTQ events like the conference Caroline attended inspiring", "melani"),
        ("Melanie's son got into an accident during the road trip.", "melani"),
        ("The yoga studio John attends offers kickboxing", "john"),  # "The" is a stopword
        ("I told the User that Maria called", "maria"),  # "I" a stopword, "User" a party
        ("deployed v2 to staging", None),
    ],
)
def test_the_first_name_a_note_holds(tok, text, first):
    assert first_name(text, tok) == first
