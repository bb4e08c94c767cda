"""Lexicon expansion (measured, off by default): a category word in the query also searches its members."""

from __future__ import annotations

from arbiter._time import US
from arbiter.model import RecallParams, RememberParams
from arbiter.recall import DEFAULT, Tuning, recall
from arbiter.recall.lexicon import Lexicon, asked, names
from arbiter.recall.query import STOPWORDS, tokenizer
from arbiter.store import entries, users

T0 = 1795168800 * US
LEXICON = Lexicon({
    "sibling": (("sib", 0), ("sister", 1), ("brother", 1)),
    "activity": (("hike", 1),),
    "box": (("crate", 1),),
    "john": (("toilet", 1),),
})
ON = Tuning(expand=0.3, lexicon=LEXICON)


def remember(db, tenant, content):
    with db:
        return entries.remember(
            db, users.first_viewer(db, tenant), RememberParams(type="context", title=content, content=content), now=T0
        )


def ask(db, tenant, query, tuning=DEFAULT):
    with db:
        params = RecallParams(query=query, explain=True)
        return recall(db, users.first_viewer(db, tenant), params, now=T0, tuning=tuning)


def test_a_word_is_looked_up_by_its_lemma():
    assert LEXICON.lookup("siblings")[1] == ("sister", 1)
    assert LEXICON.lookup("activities") == (("hike", 1),)
    assert LEXICON.lookup("boxes") == (("crate", 1),)
    assert LEXICON.lookup("lexicon") == ()


def test_capitalized_words_inside_a_sentence_are_names():
    assert names("When did John call? Boxes came. Ask Mary") == {"john", "mary"}


def test_the_asked_words_follow_what_which_and_how_many(db):
    tokenize = tokenizer(db)

    def words(q):
        return asked(tokenize(q), STOPWORDS)

    assert words("What is the total number of siblings I have?") == {"siblings"}
    assert words("Which outdoor spot did Joanna visit?") == {"outdoor", "spot"}
    assert words("What kind of art does Caroline make?") == {"art"}
    assert words("How many dogs has Maria adopted?") == {"dogs"}
    assert words("How long did I wait for the visa?") == set()
    assert words("I'm going to the music store. Any tips?") == set()


def test_only_the_asked_words_expand(db, tenant):
    remember(db, tenant, "my older sister hiked the ridge")
    tuning = Tuning(expand=0.3, lexicon=LEXICON, expand_asked=True)
    assert '"hike"' not in ask(db, tenant, "Did my sibling enjoy the activities?", tuning).expression
    res = ask(db, tenant, "Which activities did my sibling enjoy?", tuning)
    assert '"hike"' in res.expression and '"sister"' not in res.expression


def test_a_category_question_finds_a_member_word_entry(db, tenant):
    member = remember(db, tenant, "my older sister called about the holiday plans for next year")
    other = remember(db, tenant, "the plumber called")
    plain = ask(db, tenant, "which sibling called?")
    assert [h.id for h in plain.hits] == [other, member]  # "called" alone: the short entry wins
    expanded = ask(db, tenant, "which sibling called?", ON)
    assert [h.id for h in expanded.hits] == [member, other]
    assert '"sister"' in expanded.expression and '"crate"' not in expanded.expression
    assert '"brother"' not in expanded.expression  # no entry holds it: not searched


def test_names_and_numbers_are_not_expanded(db, tenant):
    remember(db, tenant, "John fixed the toilet")
    res = ask(db, tenant, "What did John fix?", ON)
    assert '"toilet"' not in res.expression


def test_off_without_a_lexicon(db, tenant):
    remember(db, tenant, "my sister called")
    assert ask(db, tenant, "which sibling called?", Tuning(expand=0.3)).expression == ask(
        db, tenant, "which sibling called?"
    ).expression
