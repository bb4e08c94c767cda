"""The aspect taxonomy: 14 aspects in 5 categories, hybrid classification and 0-100 scores.

The slugs below are the one set used everywhere (store, wire, advisor
prompt, briefing). Classification is the union of keyword patterns (always
on, free, fuzzy by design) and the advisor's tags validated against the slug
set. Aspects are staged on a candidate fact and materialised as
`fact_aspects` rows only when the fact becomes active.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import apsw

from arbiter.store.users import Viewer


@dataclass(frozen=True)
class Aspect:
    slug: str
    name: str
    category: str
    pattern: re.Pattern


def _words(*stems: str) -> re.Pattern:
    # Word-start matches over text where "_" and punctuation became spaces:
    # "listens_to" -> "listens to" matches "listen".
    return re.compile(r"\b(?:" + "|".join(stems) + r")", re.IGNORECASE)


ASPECTS: tuple[Aspect, ...] = (
    Aspect("film_tv", "Film & TV", "Cultural",
           _words("film", "movie", "cinema", "watch", "tv", "television", "series", "show", "actor", "director",
                  "netflix", "documentar", "anime", "sitcom")),
    Aspect("music", "Music", "Cultural",
           _words("music", "song", "band", "album", "listen", "sing", "guitar", "piano", "concert", "composer",
                  "jazz", "rock", "playlist", "instrument", "drum", "violin")),
    Aspect("books", "Books", "Cultural",
           _words("book", "read", "novel", "author", "writer", "poet", "library", "literature", "kindle",
                  "chapter", "memoir")),
    Aspect("creativity", "Creativity", "Cultural",
           _words("creat", "paint", "draw", "art", "craft", "design", "photograph", "sculpt", "compos", "hobby",
                  "knit", "pottery", "invent", "makes", "build")),
    Aspect("career", "Career", "Identity",
           _words("work", "job", "employ", "career", "company", "office", "role", "title", "manager", "colleague",
                  "profession", "salary", "hired", "promot", "startup", "business", "client", "engineer")),
    Aspect("education", "Education", "Identity",
           _words("stud", "school", "universit", "college", "degree", "graduat", "learn", "course", "teacher",
                  "class", "major", "phd", "master", "bachelor", "exam")),
    Aspect("identity", "Identity", "Identity",
           _words("name", "age", "born", "birthday", "nationalit", "gender", "pronoun", "identif", "lives", "live",
                  "home", "citizen", "language", "speaks", "heritage", "ethnic")),
    Aspect("childhood", "Childhood", "Identity",
           _words("child", "grew up", "grow up", "kid", "hometown", "early years", "teen", "youth",
                  "elementary")),
    Aspect("family", "Family", "Relationships",
           _words("family", "mother", "father", "mom", "dad", "parent", "sister", "brother", "sibling", "son",
                  "daughter", "wife", "husband", "spouse", "married", "grand", "aunt", "uncle", "cousin", "niece",
                  "nephew", "in-law")),
    Aspect("relationships", "Relationships", "Relationships",
           _words("friend", "partner", "dating", "relationship", "knows", "met", "boyfriend", "girlfriend",
                  "neighbo", "mentor", "roommate", "colleague")),
    Aspect("philosophy", "Philosophy", "Worldview",
           _words("think", "thought", "believ", "philosoph", "opinion", "view", "idea", "stoic", "ethic",
                  "meaning", "wonder")),
    Aspect("values", "Values", "Worldview",
           _words("value", "prefer", "care", "priorit", "principle", "important", "cherish", "commit",
                  "dislike", "hate", "avoid", "vegan", "vegetarian")),
    Aspect("spirituality", "Spirituality", "Worldview",
           _words("spiritual", "religio", "faith", "church", "pray", "god", "meditat", "buddh", "christian",
                  "muslim", "jewish", "hindu", "temple", "mosque", "synagogue", "soul")),
    Aspect("health", "Health", "Lifestyle",
           _words("health", "exercis", "run", "gym", "yoga", "diet", "sleep", "allerg", "doctor", "medic",
                  "fitness", "sport", "swim", "cycl", "hike", "illness", "therap", "weight", "eat")),
)

SLUGS: tuple[str, ...] = tuple(a.slug for a in ASPECTS)
BY_SLUG: dict[str, Aspect] = {a.slug: a for a in ASPECTS}
CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(a.category for a in ASPECTS))

# Scoring: weights and saturation points of the four dimensions.
VOLUME_WEIGHT, VOLUME_SATURATION = 40, 25
BREADTH_WEIGHT, BREADTH_SATURATION = 25, 12
DIVERSITY_WEIGHT, DIVERSITY_SATURATION = 20, 8
CONFIDENCE_WEIGHT = 15

_SEPARATORS = re.compile(r"[_\W]+")
_SPANNING_ASPECTS = tuple(a for a in ASPECTS if " " in a.pattern.pattern)
_SPANNING = frozenset(a.slug for a in _SPANNING_ASPECTS)


def classify(predicate: str, subject: str, obj: str, types: tuple[str, ...] = ()) -> list[str]:
    """The aspect slugs whose keyword patterns match the predicate, the parts or their entity types."""
    found: set[str] = set()
    for part in (predicate, subject, obj, *types):
        found.update(_classify_part(part))
    # Only a stem with a space ("grew up") can match across two parts.
    if _SPANNING and not found.issuperset(_SPANNING):
        text = " ".join(_SEPARATORS.sub(" ", part) for part in (predicate, subject, obj, *types))
        found.update(a.slug for a in _SPANNING_ASPECTS if a.slug not in found and a.pattern.search(text))
    return [slug for slug in SLUGS if slug in found]


@functools.lru_cache(maxsize=1024)
def _classify_part(part: str) -> frozenset[str]:
    # Parts repeat across a batch and between batches (predicates, "user", a
    # subject's name): matching them one at a time and remembering the answer
    # costs a set union where 14 searches over the joined text cost ~25 µs a fact.
    text = _SEPARATORS.sub(" ", part)
    return frozenset(a.slug for a in ASPECTS if a.pattern.search(text))


def merge(pattern_slugs: list[str], advisor_slugs: list[str]) -> tuple[list[str], list[str]]:
    """The union (in taxonomy order) of both classifiers, and the advisor's slugs that are not aspects (dropped)."""
    unknown = [s for s in advisor_slugs if s not in BY_SLUG]
    chosen = set(pattern_slugs) | {s for s in advisor_slugs if s in BY_SLUG}
    return [s for s in SLUGS if s in chosen], unknown


def score(facts: int, entities: int, predicates: int, confidence: float) -> int:
    """0-100: 40% volume (saturates at 25 facts), 25% breadth (12 entities), 20% diversity (8 predicates), 15% confidence."""
    value = (
        VOLUME_WEIGHT * min(facts / VOLUME_SATURATION, 1.0)
        + BREADTH_WEIGHT * min(entities / BREADTH_SATURATION, 1.0)
        + DIVERSITY_WEIGHT * min(predicates / DIVERSITY_SATURATION, 1.0)
        + CONFIDENCE_WEIGHT * min(max(confidence, 0.0), 1.0)
    )
    return round(value) if facts else 0


# The dimensions over the active facts of one aspect. An entity is a distinct
# resolved entity, else a distinct part text (subject or object key).
_DIMENSIONS = """
    SELECT count(*), avg(f.confidence),
        (SELECT count(*) FROM (
            SELECT coalesce('e' || f2.subject_entity_id, 't' || f2.subject_key)
                FROM fact_aspects a2 JOIN facts f2 ON f2.tenant_id = a2.tenant_id AND f2.id = a2.fact_id
                WHERE a2.tenant_id = :t AND a2.aspect = :a AND f2.status = 'active' AND f2.valid_to IS NULL {scope2}
            UNION
            SELECT coalesce('e' || f2.object_entity_id, 't' || f2.object_key)
                FROM fact_aspects a2 JOIN facts f2 ON f2.tenant_id = a2.tenant_id AND f2.id = a2.fact_id
                WHERE a2.tenant_id = :t AND a2.aspect = :a AND f2.status = 'active' AND f2.valid_to IS NULL {scope2}
            LIMIT {breadth}) m),
        (SELECT count(*) FROM (
            SELECT DISTINCT f2.predicate
                FROM fact_aspects a2 JOIN facts f2 ON f2.tenant_id = a2.tenant_id AND f2.id = a2.fact_id
                WHERE a2.tenant_id = :t AND a2.aspect = :a AND f2.status = 'active' AND f2.valid_to IS NULL {scope2}
            LIMIT {diversity}) m)
    FROM fact_aspects a JOIN facts f ON f.tenant_id = a.tenant_id AND f.id = a.fact_id
    WHERE a.tenant_id = :t AND a.aspect = :a AND f.status = 'active' AND f.valid_to IS NULL {scope}
"""


def whole(v: Viewer) -> bool:
    """Whether `v` sees every fact of the tenant, so the stored (tenant-wide) scores are theirs."""
    return v.solo or v.everyone


def dimensions(
    conn: apsw.Connection, v: Viewer, slug: str, *, subject_key: str | None = None, predicate: str | None = None
) -> tuple[int, int, int, float]:
    """(facts, entities, predicates, average confidence) of an aspect's active facts that `v` sees, optionally scoped.

    Entities and predicates are counted only up to their saturation points:
    past them the score no longer moves, so the count can stop early.
    """
    scope, scope2, binds = "", "", {"t": v.tenant_id, "a": slug}
    if not whole(v):
        scope += f" AND {v.sees('f')}"
        scope2 += f" AND {v.sees('f2')}"
    if subject_key is not None:
        scope += " AND f.subject_key = :s"
        scope2 += " AND f2.subject_key = :s"
        binds["s"] = subject_key
    if predicate is not None:
        scope += " AND f.predicate = :p"
        scope2 += " AND f2.predicate = :p"
        binds["p"] = predicate
    sql = _DIMENSIONS.format(scope=scope, scope2=scope2, breadth=BREADTH_SATURATION, diversity=DIVERSITY_SATURATION)
    n, conf, ents, preds = conn.execute(sql, binds).fetchone()
    return n, ents, preds, conf or 0.0


def _members(conn: apsw.Connection, tenant_id: int, slug: str, kind: str, cap: int) -> int:
    return conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM aspect_members WHERE tenant_id = ? AND aspect = ? AND kind = ? LIMIT ?) m",
        (tenant_id, slug, kind, cap),
    ).fetchone()[0]


def refresh(conn: apsw.Connection, tenant_id: int, slugs: set[str], *, now: int) -> None:
    """Recompute the stored scores of `slugs` from the trigger-kept counts (at apply, in its transaction)."""
    for slug in slugs:
        row = conn.execute(
            "SELECT facts, confidence_sum FROM aspect_scores WHERE tenant_id = ? AND aspect = ?", (tenant_id, slug)
        ).fetchone()
        n, total = row if row else (0, 0.0)
        ents = _members(conn, tenant_id, slug, "entity", BREADTH_SATURATION)
        preds = _members(conn, tenant_id, slug, "predicate", DIVERSITY_SATURATION)
        conf = total / n if n else 0.0
        conn.execute(
            "INSERT INTO aspect_scores(tenant_id, aspect, score, facts, confidence_sum, entities, predicates, "
            "computed_at) VALUES (?, ?, ?, 0, 0, ?, ?, ?) ON CONFLICT (tenant_id, aspect) DO UPDATE SET score = excluded.score, "
            "entities = excluded.entities, predicates = excluded.predicates, computed_at = excluded.computed_at",
            (tenant_id, slug, score(n, ents, preds, conf), ents, preds, now),
        )


def stored(conn: apsw.Connection, tenant_id: int) -> dict[str, tuple[int, int, int, int, float]]:
    """The precomputed (score, facts, entities, predicates, average confidence) of each scored aspect."""
    return {
        slug: (sc, n, ents, preds, total / n if n else 0.0)
        for slug, sc, n, ents, preds, total in conn.execute(
            "SELECT aspect, score, facts, entities, predicates, confidence_sum FROM aspect_scores WHERE tenant_id = ?",
            (tenant_id,),
        )
    }


def seen(conn: apsw.Connection, v: Viewer) -> dict[str, tuple[int, int, int, int, float]]:
    """`stored` for `v`: the stored scores if `v` sees the whole tenant, else computed over the facts `v` sees."""
    if whole(v):
        return stored(conn, v.tenant_id)
    out = {}
    for slug in SLUGS:
        n, ents, preds, conf = dimensions(conn, v, slug)
        if n:
            out[slug] = (score(n, ents, preds, conf), n, ents, preds, conf)
    return out


def briefing_lines(conn: apsw.Connection, v: Viewer) -> list[str]:
    """The briefing's facts summary over what `v` sees: totals, then one line per aspect that holds facts (best first)."""
    tenant_id = v.tenant_id
    active = conn.execute(
        f"SELECT count(*) FROM facts f WHERE f.tenant_id = ? AND f.status = 'active' AND f.valid_to IS NULL "
        f"AND {v.sees('f')}",
        (tenant_id,),
    ).fetchone()[0]
    waiting = conn.execute(
        f"SELECT count(*) FROM patch_batches b WHERE b.tenant_id = ? AND b.status IN ('proposed', 'evaluated') "
        f"AND {v.sees('b')}",
        (tenant_id,),
    ).fetchone()[0]
    if not active and not waiting:
        return ["- Facts: none yet (propose them with `propose_facts` when the user states something lasting)."]
    head = f"- Facts: {active} active" + (f", {waiting} batch{'es' if waiting > 1 else ''} awaiting review" if waiting else "")
    scored = sorted(
        ((s, n, ents, BY_SLUG[slug]) for slug, (s, n, ents, _, _) in seen(conn, v).items() if n and slug in BY_SLUG),
        key=lambda x: (-x[0], x[3].slug),
    )
    lines = [head + (". By aspect (score 0-100):" if scored else ".")]
    lines += [f"  - {a.name} ({a.category}): {s} · {n} fact{'s' * (n != 1)}, {ents} entit{'y' if ents == 1 else 'ies'}"
              for s, n, ents, a in scored]
    return lines
