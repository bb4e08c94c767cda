"""Recall: layered lexical retrieval over the FTS5 index.

    query text -> analysis (stage 1) -> FTS5 expression (2) -> BM25 with column
    weights (3) x boosts (4) x intent (5) x decay (6) x voice x quantity -> conversation
    pass and tenant pass fused by reciprocal rank (7), over the rows visible
    now or `as_of` (8) -> hits with excerpts (9)

Every stage is a small function (`query`, `score`) that `RecallParams.disable`
can switch off, and `explain=true` returns each hit's parts. `Tuning` holds
the numbers, including ideas measured and left off (docs/retrieval.md). `search` stops at
the fused candidate list, best first, so a later layer (LLM expansion, rerank)
can reorder or fuse it before `render` turns it into hits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import apsw
import msgspec

from arbiter._time import now_us, parse_time
from arbiter.model import RecallParams, RecallResult
from arbiter.entities import recall as entity_signals
from arbiter.recall import _rank, _sql, dates, past, score
from arbiter.recall.hits import render, unranked
from arbiter.recall.query import ENGLISH, STOPWORDS, Query, Term, analyze, expression, first_name, quote, tokenizer
from arbiter.store.users import Viewer

__all__ = ["Candidate", "Ranking", "Tuning", "fuse", "quote", "recall", "render", "search"]

_tags = msgspec.json.Decoder(list[str])


@dataclass(frozen=True)
class Tuning:
    """The pipeline's numbers; the defaults are the measured choices (docs/retrieval.md)."""

    weights: tuple[float, ...] = score.BM25_WEIGHTS
    k1: float = _rank.K1
    b: float = _rank.B
    #: Stage 2's phrase and NEAR branches, and their idf multipliers. Off:
    #: measured no gain on the dev split, for +0.5 ms per recall.
    phrase: bool = False
    near: bool = False
    phrase_factor: float = 1.0
    near_factor: float = 1.0
    voice: float = score.VOICE_STRENGTH
    size_exponent: float = score.SIZE_EXPONENT
    #: A question asking for a quantity ("how many", "how long", "total")
    #: favours entries that hold a numeral: x(1 + quantity).
    quantity: float = score.QUANTITY_BOOST
    #: An entry whose speaker the query names: x(1 + speaker).
    speaker: float = score.SPEAKER_BOOST
    #: An entry with no speaker (a note) whose text names whom the query names: x(1 + names).
    names: float = score.NAMES_BOOST
    #: ... only where the note names that person first (False: anywhere in the note, as measured before);
    #: a note naming them later gets x(1 + names_rest) (measured off: docs/retrieval.md).
    names_first: bool = True
    names_rest: float = 0.0
    #: An entry valid from inside a date the query names: x(1 + date).
    date: float = score.DATE_BOOST
    #: A "when" question favours entries that say when: x(1 + when).
    when: float = score.WHEN_BOOST
    #: Episodes: a pass's candidates of one conversation valid within
    #: `episode_gap_us` of each other form an episode, and each is multiplied
    #: by (its episode's mass / the best episode's mass) ** episode_weight.
    episode_weight: float = score.EPISODE_WEIGHT
    episode_gap_us: int = score.EPISODE_GAP_US
    episode_members: int = score.EPISODE_MEMBERS
    #: Notes (entries with no speaker) written within `episode_gap_us` of each other form episodes too.
    note_episodes: bool = True
    #: Replies: the turn after a top candidate that asks a question gets this
    #: share of the question's score (when that is more than its own); the
    #: top `reply_depth` candidates of a pass are looked at.
    reply: float = score.REPLY_SHARE
    #: Follow-ups: when the turn after a top candidate is a short question,
    #: the answer to it gets this share of the candidate's score.
    followup: float = score.FOLLOWUP_SHARE
    #: Antecedents: the turn before a top candidate, said by another speaker,
    #: gets this share of the candidate's match.
    antecedent: float = score.ANTECEDENT_SHARE
    reply_depth: int = 10
    reply_bytes: int = 300
    #: A reply or follow-up answer borrows its lender's match to the query but
    #: is weighed by its own entry factors (who said it, whether it holds a
    #: figure or says when...), not the lender's.
    reply_own_factors: bool = True
    conversation_weight: float = score.CONVERSATION_WEIGHT
    tenant_weight: float = score.TENANT_WEIGHT
    rrf_k: int = score.RRF_K
    #: Candidates each pass ranks (at least the number asked for).
    conversation_depth: int = 50
    tenant_depth: int = 30
    #: Conversation pass: words in more than this share of all documents (and
    #: in more than `common_floor` of them) are left out; the rarest word always
    #: stays. They barely move BM25 and make the pass rank most of the conversation.
    common_share: float = 0.1
    common_floor: int = 1_000
    #: Tenant pass: the same with a tighter share, and the rarest words are kept
    #: while their documents total at most the budget (wider when the tenant
    #: pass is the only pass).
    df_max_share: float = 0.05
    fill_budget: int = 1_000
    tenant_budget: int = 20_000
    #: Entities (arbiter/entities/recall.py): a candidate mentioning an entity
    #: the query names is multiplied by 1 + entity_boost, one mentioning an
    #: entity of the same cluster by 1 + cluster_boost; salience multiplies by
    #: 1 + salience_weight x (2 x salience - 1) (x1 at the default 0.5). Each is
    #: 0 (off) unless measured to help (docs/retrieval.md).
    entity_boost: float = score.ENTITY_BOOST
    cluster_boost: float = score.CLUSTER_BOOST
    salience_weight: float = score.SALIENCE_WEIGHT
    #: Early termination: a pass whose words match more documents than this
    #: (the rarest word is kept whatever its count) ranks only the newest
    #: `rank_budget` of its matches. `arbiter_rank` costs microseconds a
    #: match, and a word in most of a 250K tenant cost half a second.
    rank_budget: int = 10_000


DEFAULT = Tuning()


@dataclass(slots=True)
class Candidate:
    """One entry in a ranking: what scoring needs, its score and the parts that made it."""

    id: int
    type: str
    conversation_id: int | None
    valid_from: int
    score: float
    parts: dict[str, float] = field(default_factory=dict)


@dataclass
class Ranking:
    """A fused candidate list, best first; `expression` is the main pass's FTS5 query."""

    query: Query
    candidates: list[Candidate]
    expression: str | None = None


def recall(
    conn: apsw.Connection, v: Viewer, p: RecallParams, *, now: int | None = None, tuning: Tuning = DEFAULT
) -> RecallResult:
    """Rank the entries `v` sees for `p.query`; with no query terms, see `hits.unranked`."""
    ranking = search(conn, v, p, now=now, tuning=tuning)
    if ranking is None:
        return unranked(conn, v, p)
    if p.graph:  # intent-weighted graph recall over the association graph (arbiter/associations/walk.py)
        ranking = _with_graph(conn, v, ranking, p)
    return render(conn, v, ranking, p)



def _with_graph(conn: apsw.Connection, v: Viewer, ranking: Ranking, p: RecallParams) -> Ranking:
    """The ranking with what the walk reaches from its top `SEEDS` merged in (a new `Ranking`).

    Reached scores are on the lexical scores' scale, so a reached entry never
    overtakes its seed.
    """
    from arbiter.associations.walk import KIND_WEIGHTS, LIFT, SEEDS, intent, reach

    lexical = ranking.candidates
    if not lexical:
        return ranking
    weights = KIND_WEIGHTS[intent(conn, v, p.query)]
    reached = reach(conn, v, [(c.id, c.score) for c in lexical[:SEEDS]], weights)
    as_of = None if p.as_of is None else parse_time(p.as_of, path="as_of")
    own = {c.id: c for c in lexical}
    # Only what the caller sees: a derived edge may lead to another user's entry.
    rows = _sql.candidates(conn, v, [i for i in reached if i not in own], as_of)
    merged = list(lexical)
    for i, (value, parts) in reached.items():
        if i in own:
            lift = 1.0 + LIFT * value / own[i].score if own[i].score > 0 else 1.0
            own[i].score *= min(lift, 1.0 + LIFT)
            own[i].parts.update(parts, graph_lift=lift)
        elif i in rows:
            etype, conv, valid_from, *_ = rows[i]
            merged.append(Candidate(i, etype, conv, valid_from, value, dict(parts)))
    merged.sort(key=lambda c: (-c.score, c.id))
    return Ranking(query=ranking.query, candidates=merged, expression=ranking.expression)

def search(
    conn: apsw.Connection,
    v: Viewer,
    p: RecallParams,
    *,
    text: str | None = None,
    depth: int | None = None,
    now: int | None = None,
    tuning: Tuning = DEFAULT,
) -> Ranking | None:
    """Stages 1-8: the fused candidates for `text` (default `p.query`); None if it has no terms.

    `depth` is how many fused candidates the caller needs (default `p.limit`);
    a reranker asks for more.
    """
    off = frozenset(p.disable)
    need = max(p.limit, depth or 0)
    stopwords = frozenset() if "stopwords" in off else ENGLISH if "framing" in off else STOPWORDS
    query = analyze(p.query if text is None else text, tokenizer(conn), stopwords=stopwords, parties="parties" not in off)
    if query.empty:
        return None
    as_of = None if p.as_of is None else parse_time(p.as_of, path="as_of")
    known_at = None if p.known_at is None else parse_time(p.known_at, path="known_at")
    reference = as_of if as_of is not None else (now_us() if now is None else now)
    suggested = frozenset() if "intent" in off or p.intent == "off" else score.intent_types(query.cues, p.types)
    # Statistics of the scopes `v` sees whole: BM25 over exactly what they may read.
    rows, tokens, df = _rank.FREQUENCIES.get(conn, v.scopes, [s for t in query.terms for s in t.stem.split(" ")])
    n = max(rows, 1)
    idf = {stem: _rank.idf(d, n) for stem, d in df.items()}
    avgdl = tokens / n or 1.0  # one average length, whatever index a pass reads
    factor = {"phrase": tuning.phrase_factor, "near": tuning.near_factor, "bag": 1.0}
    weights = (1.0, 1.0, 1.0, 1.0) if "weights" in off else tuning.weights

    def run(terms, pass_depth: int, **scope: int) -> tuple[str, list[Candidate]]:
        expr = expression(terms, phrase=tuning.phrase, near=tuning.near)
        spec = _rank.Spec(
            idf=[factor[branch] * sum(idf[s] for s in stems) for branch, stems in expr.slots],
            weights=weights,
            k1=tuning.k1,
            b=tuning.b,
            avgdl=avgdl,
        )
        match = _sql.scoped(_sql.text_match(expr.text), v.tenant_id, **scope)
        if known_at is None:
            budget = None
            # Only a pass over the whole tenant: a fill pass is cut by `fill_budget` already.
            wide = not scope and "budget" not in off
            if wide and sum(df[s] for t in terms for s in t.stem.split(" ")) > tuning.rank_budget:
                budget = tuning.rank_budget
            rows = _sql.ranked_visible(conn, v, match, spec, max(pass_depth, need), as_of, budget=budget)
        else:
            rows = past.ranked_visible(conn, v, match, spec, max(pass_depth, need), as_of, known_at=known_at)
        # Replies and thread roots read the entries as they are now: a
        # `known_at` read must not see a turn recorded after it.
        replying = known_at is None and "replies" not in off
        # Read once for the pass: the speaker factor and the replies' test of who said which turn both use them.
        speaking = "speaker" not in off and tuning.speaker
        naming = bool(tuning.names and "names" not in off and query.names)
        grouping = bool(tuning.episode_weight and "episodes" not in off)  # turns and notes form episodes apart
        speakers = (_sql.at(conn, v.tenant_id, [r[0] for r in rows], "speaker", known_at=known_at)
                    if speaking or replying or naming or grouping else {})
        ranked = _score(conn, rows, query, p, off, suggested, reference, tuning, speakers, tenant_id=v.tenant_id,
                        known_at=known_at)
        ranked = _entity_signals(conn, v.tenant_id, ranked, named, off, reference, tuning)
        if replying:
            ranked = _replies(
                conn, v, ranked, speakers, as_of, tuning, followups="followups" not in off,
                antecedents="antecedents" not in off,
                own=lambda rows, said: _score(
                    conn, rows, query, p, off, suggested, reference, tuning, said, tenant_id=v.tenant_id, episodes=False
                ),
            )
        if known_at is None and "threads" not in off:
            ranked = _threads(conn, v.tenant_id, ranked, query)
        return match, ranked

    named = entity_signals.NONE
    if (tuning.entity_boost and "entities" not in off) or (tuning.cluster_boost and "clusters" not in off):
        named = entity_signals.query_entities(conn, v, p.query if text is None else text, stopwords=STOPWORDS)

    if p.conversation_id is None:
        terms = query.terms if "select" in off else select_terms(
            query.terms, df, n, tuning.df_max_share, tuning.tenant_budget, floor=tuning.common_floor
        )
        if not terms:
            return Ranking(query=query, candidates=[])
        match, ranked = run(terms, tuning.tenant_depth)
        return Ranking(query=query, candidates=ranked, expression=match)

    terms = query.terms
    if tuning.common_share < 1.0 and "common" not in off:
        terms = select_terms(terms, df, n, tuning.common_share, n * len(terms), floor=tuning.common_floor)
    main, local = run(terms, tuning.conversation_depth, conversation_id=p.conversation_id)
    passes = [("conversation", tuning.conversation_weight, local)]
    if "tenant_fill" not in off and not _settled(len(local), need, tuning):
        terms = query.terms if "select" in off else select_terms(
            query.terms, df, n, tuning.df_max_share, tuning.fill_budget, floor=tuning.common_floor
        )
        if terms:
            _, ranked = run(terms, tuning.tenant_depth, besides=p.conversation_id)
            passes.append(("tenant", tuning.tenant_weight, ranked))
    return Ranking(query=query, candidates=fuse(passes, k=tuning.rrf_k), expression=main)


def _settled(local: int, need: int, tuning: Tuning) -> bool:
    """True when no tenant hit could enter the top `need`, so the tenant pass can be skipped.

    The tenant pass ranks only entries the conversation pass cannot see, so
    each entry is in one list: a tenant hit scores at most w_t / (k + 1), and
    the conversation's `need`-th hit scores w_c / (k + need).
    """
    if local < need:
        return False
    k = tuning.rrf_k
    return score.rrf(need, tuning.conversation_weight, k=k) > score.rrf(1, tuning.tenant_weight, k=k)


def select_terms(
    terms: tuple[Term, ...], df: dict[str, int], n: int, max_share: float, budget: int, *, floor: int = 0
) -> list[Term]:
    """Query term selection: the rarest words, within a share of the documents and a postings budget.

    Ranking every match of a word that half the tenant uses costs tens of
    milliseconds and moves the top of the ranking little (its idf is near
    zero), so a pass keeps the rare words that decide it. A word is dropped
    only if it is in more than `max_share` of the `n` documents and in more
    than `floor` documents, or if its documents would take the total past
    `budget`; the rarest word always stays. Phrases are kept, and so are
    words no document held when their frequency was read (they cost nothing,
    and a cached zero may be stale).
    """
    keep: set[str] = set()
    total = 0
    for t in sorted((t for t in terms if not t.phrase), key=lambda t: df.get(t.stem, 0)):
        count = df.get(t.stem, 0)
        if keep and ((count > max_share * n and count > floor) or total + count > budget):
            break
        keep.add(t.stem)
        total += count
    return [t for t in terms if t.phrase or t.stem in keep]


def _score(
    conn: apsw.Connection,
    rows: list[tuple[int, float, tuple]],
    query: Query,
    p: RecallParams,
    off: frozenset[str],
    suggested: frozenset[str],
    reference: int,
    tuning: Tuning,
    speakers: dict[int, str],
    *,
    tenant_id: int,
    known_at: int | None = None,
    episodes: bool = True,
) -> list[Candidate]:
    """Stages 4-6 plus voice, quantity, dates, when, speaker and episodes (and the measured-off size), best first.

    `speakers` holds the rows' speakers (as recorded at `known_at`), where
    one is. With `known_at`, `rows` rank the texts recorded then, and so do
    "when" and the tag boost.
    """
    boosting = "boosts" not in off and (p.types or p.tag is not None)
    tags = _sql.at(conn, tenant_id, [r[0] for r in rows], "tags", known_at=known_at) if boosting and p.tag is not None else {}
    decaying = p.decay and "decay" not in off
    voicing = "voice" not in off and tuning.voice and query.voice is not None
    sizing = bool(tuning.size_exponent)
    quantifying = "quantity" not in off and tuning.quantity and "quantity" in query.cues
    wording = "number_words" not in off
    dating = "dates" not in off and tuning.date and query.when
    asking_when = "when" not in off and tuning.when and "when" in query.cues
    # Who a note is about is whom it names first; a turn's is its speaker (the speaker signal): only notes are read for it.
    notes = [r[0] for r in rows if r[0] not in speakers] if "names" not in off and tuning.names and query.names else []
    reading = [r[0] for r in rows] if dating or asking_when else notes
    texts = _sql.at(conn, tenant_id, reading, "content", known_at=known_at) if reading else {}
    says_when = {eid for eid, text in texts.items() if dates.says_when(text)} if asking_when else set()
    named = query.words if "speaker" not in off and tuning.speaker else frozenset()
    if notes:
        tokenize = tokenizer(conn)
        naming = {}
        for eid in notes:
            if eid not in texts:
                continue
            if tuning.names_first and first_name(texts[eid], tokenize) in query.names:
                naming[eid] = 1.0 + tuning.names
            elif (not tuning.names_first or tuning.names_rest) and query.names & {st for _, st in tokenize(texts[eid])}:
                naming[eid] = 1.0 + (tuning.names_rest if tuning.names_first else tuning.names)
    out = []
    for eid, relevance, (etype, conv, valid_from, nbytes, self_refs, other_refs, numerals) in rows:
        parts = {"bm25": relevance}
        value = relevance
        if boosting:
            entry_tags = _tags.decode(tags[eid]) if eid in tags else ()
            parts["boost"] = f = score.boost(etype, entry_tags, types=p.types, tag=p.tag)
            value *= f
        if suggested:
            parts["intent"] = f = score.intent(etype, suggested)
            value *= f
        if decaying:
            parts["decay"] = f = score.decay(valid_from, reference, half_life_days=p.half_life_days, floor=p.floor)
            value *= f
        if voicing:
            parts["voice"] = f = score.voice(self_refs, other_refs, query.voice, strength=tuning.voice)
            value *= f
        if quantifying:
            parts["quantity"] = f = score.quantity(numerals, strength=tuning.quantity, words=wording)
            if wording and numerals == score.NUMBER_WORD:
                parts["number_words"] = 1.0  # the figure is written in words only
            value *= f
        if dating:
            told = dates.referenced(texts[eid], valid_from) if eid in texts else ()
            parts["date"] = f = score.dated(valid_from, query.when, strength=tuning.date, told=told)
            value *= f
        if asking_when:
            parts["when"] = f = score.when(eid in says_when, strength=tuning.when)
            value *= f
        if named and eid in speakers:
            parts["speaker"] = f = score.speaker(speakers[eid], named, strength=tuning.speaker)
            value *= f
        elif notes and eid not in speakers:
            parts["names"] = f = naming.get(eid, 1.0)
            value *= f
        if sizing:
            parts["size"] = f = score.size(nbytes, exponent=tuning.size_exponent)
            value *= f
        out.append(Candidate(eid, etype, conv, valid_from, value, parts))
    if episodes and tuning.episode_weight and "episodes" not in off:
        # An episode is what was said or written together: a conversation's turns (entries with a speaker), or
        # notes written within minutes of each other; a note and a turn are never of one episode.
        streams = [([c for c in out if c.id in speakers], score.by_conversation)]
        if tuning.note_episodes:
            streams.append(([c for c in out if c.id not in speakers], score.by_writing))
        for members, stream in streams:
            factors = score.episodes(members, weight=tuning.episode_weight, gap_us=tuning.episode_gap_us,
                                     members=tuning.episode_members, stream=stream)
            for c, f in zip(members, factors):
                c.parts["episode"] = f
                c.score *= f
    out.sort(key=lambda c: (-c.score, c.id))
    return out


def _entity_signals(
    conn: apsw.Connection,
    tenant_id: int,
    ranked: list[Candidate],
    named: entity_signals.QueryEntities,
    off: frozenset[str],
    reference: int,
    tuning: Tuning,
) -> list[Candidate]:
    """The entity, cluster and salience factors on a pass's candidates, re-sorted if any applied."""
    ids = [c.id for c in ranked]
    changed = False
    if tuning.entity_boost and "entities" not in off and named.ids:
        hit = entity_signals.linked(conn, tenant_id, named.ids, ids)
        for c in ranked:
            c.parts["entities"] = f = score.entity(c.id in hit, tuning.entity_boost)
            c.score *= f
        changed = True
    if tuning.cluster_boost and "clusters" not in off and named.clusters:
        near = entity_signals.in_clusters(conn, tenant_id, named.clusters, ids)
        for c in ranked:
            c.parts["clusters"] = f = score.entity(c.id in near, tuning.cluster_boost)
            c.score *= f
        changed = True
    if tuning.salience_weight and "salience" not in off:
        values = entity_signals.saliences(conn, tenant_id, ids, now=reference)
        for c in ranked:
            c.parts["salience"] = f = score.salience(values.get(c.id, 0.5), tuning.salience_weight)
            c.score *= f
        changed = True
    if changed:
        ranked.sort(key=lambda c: (-c.score, c.id))
    return ranked


#: The factors of a candidate's score that describe the entry itself rather than its match to the query.
ENTRY_FACTORS = ("boost", "intent", "decay", "voice", "quantity", "date", "when", "speaker", "names", "size")


def _entry_factor(c: Candidate) -> float:
    f = 1.0
    for part in ENTRY_FACTORS:
        f *= c.parts.get(part, 1.0)
    return f


def _replies(
    conn: apsw.Connection, v: Viewer, ranked: list[Candidate], speakers: dict[int, str], as_of: int | None,
    tuning: Tuning, *, followups: bool, antecedents: bool,
    own: Callable[[list[tuple[int, float, tuple]], dict[int, str]], list[Candidate]],
) -> list[Candidate]:
    """Replies, follow-ups and antecedents: a turn of an exchange inherits the match of the turn it answers or that answers it.

    Replies: "Anything you're excited about in the adoption process?"
    matches the query; the reply "I'm thrilled to make a family for kids
    who need one" holds the answer and shares no word with it. Each top
    candidate that is a short question lends its reply `tuning.reply` of
    its score.

    Follow-ups: "We celebrated my daughter's birthday with a concert"
    matches; the next turn asks "Who performed?" and the one after says
    "It was Matt Patterson". When the turn after a top candidate is a short
    question, its reply gets `tuning.followup` of the candidate's score.

    Antecedents: "Turbinado sugar is a great choice! ... in your cookies"
    matches "my chocolate chip cookies need something extra"; the user's
    turn before it, "I found that turbinado sugar adds a richer flavor",
    holds what the user said and not the query's words. The turn before a
    top candidate, when another speaker said it, gets `tuning.antecedent`
    of the candidate's match: a reply repeats the words of what it answers.

    What is lent is the lender's match: its score with its own entry
    factors (`ENTRY_FACTORS`) divided out, times the answer's, which `own`
    scores for answers the pass did not rank (`tuning.reply_own_factors`;
    off, the lender's whole score is lent). A turn keeps its own score when
    that is higher.

    A turn answers a short question (at most `tuning.reply_bytes`, ending in
    "?") when both have a speaker and they differ; a turn before is lent to
    on the same terms. Entries with no speaker are notes, not turns of an
    exchange, and neither lend nor borrow. `speakers` holds
    those of `ranked` (read with the pass); the neighbours' are read once,
    with the short turns' texts.
    """
    top = ranked[: tuning.reply_depth]
    if all(c.conversation_id is None for c in top):  # no turn among them: nothing to lend or borrow, no read
        return ranked
    scores = {c.id: c.score for c in top}
    by_id = {c.id: c for c in ranked}
    following = bool(followups and tuning.followup)
    around = _sql.neighbours(
        conn, v, list(scores), as_of, before=bool(antecedents and tuning.antecedent),
        after=bool(tuning.reply or following),
    )
    nxt = {c: a for c, (_, a, _) in around.items() if a is not None}
    before = {c: b for c, (b, _, _) in around.items() if b is not None}
    later = _sql.neighbours(conn, v, list(set(nxt.values())), as_of, before=False) if following else {}
    # The turns that may ask (the top's and, for follow-ups, their next turns) -> the turn after each.
    short = {
        q: a for q, (_, a, size) in [*around.items(), *later.items()] if a is not None and size <= tuning.reply_bytes
    }
    turns = {*nxt.values(), *before.values(), *(a for _, a, _ in later.values())}
    read, asks = _sql.speakers(conn, v.tenant_id, [t for t in turns if t not in by_id], asking=list(short))
    said = {**speakers, **read}
    # Only a transcript's turns answer one another: two notes that follow each other are not an exchange.
    answers = {q: a for q, a in short.items() if q in asks and q in said and a in said and said[q] != said[a]}
    offers: list[tuple[int, float, int, str]] = []  # (answer, lent score, lender, part)
    if tuning.reply:
        offers += [(answers[q], tuning.reply * scores[q], q, "reply_to") for q in nxt if q in answers]
    if following:
        offers += [(answers[q], tuning.followup * scores[c], c, "followup_of") for c, q in nxt.items() if q in answers]
    offers += [
        (b, tuning.antecedent * scores[c], c, "antecedent_of")
        for c, b in before.items() if c in said and b in said and said[c] != said[b]
    ]
    if not offers:
        return ranked
    rows = _sql.candidates(conn, v, [a for a, *_ in offers if a not in by_id], as_of)
    fresh = {}
    if tuning.reply_own_factors and rows:
        fresh = {c.id: c for c in own([(a, 0.0, row) for a, row in rows.items()], said)}
    for a, share, lender, part in offers:
        c = by_id.get(a)
        if c is None:
            if a not in rows:
                continue
            etype, conv, valid_from = rows[a][:3]
            c = by_id[a] = fresh.get(a) or Candidate(a, etype, conv, valid_from, 0.0, {"bm25": 0.0})
        if tuning.reply_own_factors:
            lenders = _entry_factor(by_id[lender])
            share = share / lenders * _entry_factor(c) if lenders > 0 else share
        if share > c.score:
            c.parts[part] = float(lender)
            c.score = share
    return sorted(by_id.values(), key=lambda c: (-c.score, c.id))


def _threads(conn: apsw.Connection, tenant_id: int, ranked: list[Candidate], query: Query) -> list[Candidate]:
    """A thread's root is not outranked by its replies on the words of its own title.

    A reply titled "Re: <root title>" repeats the root's title; when the
    reply's own text holds none of the query's words, its match is the
    title's, which belongs to the root: it is placed just below the root
    (short replies would otherwise win on length normalization).
    """
    by_id = {c.id: c for c in ranked}
    echoes = _sql.echoes(conn, tenant_id, [c.id for c in ranked])
    moved = False
    stems = {s for t in query.terms for s in t.stem.split(" ")}
    tokenize = None
    for reply, (parent, content) in echoes.items():
        root, c = by_id.get(parent), by_id[reply]
        if root is None or c.score < root.score:
            continue
        tokenize = tokenize or tokenizer(conn)
        if stems & {stem for _, stem in tokenize(content)}:
            continue  # the reply says something of its own about the query
        c.parts["thread_root"] = float(parent)
        c.score = root.score * (1 - 1e-6)
        moved = True
    if not moved:
        return ranked
    return sorted(ranked, key=lambda c: (-c.score, c.id))


def fuse(passes: list[tuple[str, float, list[Candidate]]], *, k: int = score.RRF_K) -> list[Candidate]:
    """Stage 7: weighted reciprocal-rank fusion of ranked lists, best first.

    Each list is (name, weight, candidates best first); an entry's fused score
    sums `weight / (k + rank)` over the lists that hold it, and its parts gain
    `<name>_rank` and `rrf`. Parts come from the first list that holds it. The
    candidates are taken over (their scores become fused scores).
    """
    fused: dict[int, Candidate] = {}
    for name, weight, ranked in passes:
        for rank, c in enumerate(ranked, 1):
            f = fused.get(c.id)
            if f is None:
                f = fused[c.id] = c
                f.score = 0.0
            f.parts[f"{name}_rank"] = float(rank)
            f.score += score.rrf(rank, weight, k=k)
    out = sorted(fused.values(), key=lambda c: (-c.score, c.id))
    for c in out:
        c.parts["rrf"] = c.score
    return out
