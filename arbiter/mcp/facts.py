"""MCP tools for facts behind the evaluation gate: propose them, read what is true, see the aspects."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from arbiter.facts.model import OBJECT_MAX_BYTES, PREDICATE_MAX_BYTES, SUBJECT_MAX_BYTES
from arbiter.mcp.tool import Args, AsOf, NoArgs, Session, View, count, tool
from arbiter.model import Name

Subject = Annotated[str, Meta(min_length=1, max_length=SUBJECT_MAX_BYTES, description=(
    'Who or what the fact is about: "user" for the person you are talking with, else a name.'))]
Predicate = Annotated[str, Meta(min_length=1, max_length=PREDICATE_MAX_BYTES, description=(
    "The relation in snake_case: works_at, lives_in, enjoys, knows, prefers_<topic>, ... "
    "(see the briefing's facts line; a new one is fine)."))]
Object = Annotated[str, Meta(min_length=1, max_length=OBJECT_MAX_BYTES, description="The value, short: a name, a place, a thing.")]


class ProposedFact(Struct, kw_only=True, forbid_unknown_fields=True):
    subject: Subject
    predicate: Predicate
    object: Object
    confidence: Annotated[float, Meta(ge=0, le=1, description=(
        "How clearly it was stated: 1.0 said outright, 0.7 strongly implied, below 0.5 a guess (rejected)."))] = 0.9
    source_ids: Annotated[list[Annotated[int, Meta(ge=1)]], Meta(max_length=64, description=(
        "Entry ids it was drawn from (remember the statement first, then cite it)."))] = []
    valid_from: Annotated[str | None, Meta(description=(
        "When it became true (RFC 3339); default now. Never in the future: a plan for later is a fact that holds "
        "now."))] = None


class ProposeArgs(Args):
    facts: Annotated[list[ProposedFact], Meta(min_length=1, max_length=100, description=(
        "The facts, one subject-predicate-object triple each, citing the entries they come from."))]
    apply: Annotated[bool, Meta(description=(
        "Evaluate and apply now (default). false leaves the batch for a human to review."))] = True
    team: Annotated[Name | None, Meta(description=(
        "Share these facts with this team (one you are in) when they hold for the team; default: private to you. "
        "Cite only entries the team sees, or they will not see the sources."))] = None


class FactLine(Struct, kw_only=True):
    id: int
    subject: str
    predicate: str
    object: str
    confidence: float
    status: str
    valid_from: str
    valid_to: str | None
    supersedes_fact_id: int | None
    #: The entries it was drawn from (named as `supersedes_ids` is: entry ids end in `_ids`).
    source_ids: list[int]
    finding: str | None = None
    reason: str | None = None


def line(f) -> FactLine:
    return FactLine(id=f.id, subject=f.subject, predicate=f.predicate, object=f.object, confidence=f.confidence,
                    status=f.status, valid_from=f.valid_from, valid_to=f.valid_to,
                    supersedes_fact_id=f.supersedes_fact_id, source_ids=f.sources, finding=f.finding, reason=f.reason)


def _text(f: FactLine) -> str:
    until = f" until {f.valid_to[:10]}" if f.valid_to else ""
    return f"#{f.id} {f.subject} {f.predicate} {f.object} ({f.confidence:g}, since {f.valid_from[:10]}{until})"


class ProposedView(View):
    batch_id: int
    status: str
    facts: list[FactLine]
    note: str | None = None

    def text(self) -> str:
        lines = [f"Batch #{self.batch_id} {self.status}:"]
        for f in self.facts:
            verdict = f" [{f.finding}: {f.reason}]" if f.finding and f.finding != "accept" else ""
            lines.append(f"- {f.status}: {_text(f)}{verdict}")
        if self.note:
            lines.append(f"note: {self.note}")
        return "\n".join(lines)


@tool(ProposeArgs, ProposedView, writes=True)
def propose_facts(s: Session, a: ProposeArgs) -> ProposedView:
    """Record lasting facts as subject-predicate-object triples. Call it whenever the user states
    something about themselves or the world that will stay true for a while (where they work or
    live, who they know, what they like or prefer, a decision), usually right after `remember`ing
    the statement, citing that entry in `source_ids`.

    Facts pass an evaluation gate: a fact that contradicts the current one for a single-valued
    predicate (works_at, lives_in, prefers_*) replaces it only if it is newer and confident (at least
    0.7), otherwise it is rejected with the reason; a duplicate reinforces the existing fact. Never
    propose guesses, plans or small talk. Each fact's finding says what happened to it.
    """
    facts = [{"subject": f.subject, "predicate": f.predicate, "object": f.object, "confidence": f.confidence,
              "sources": f.source_ids, "valid_from": f.valid_from} for f in a.facts]
    b = s.daemon.facts_propose(facts, apply=a.apply, team=a.team)
    s.listed = False  # facts are no entries: the briefing's facts line moves (held batches too), not the entry list
    return ProposedView(batch_id=b.id, status=b.status, facts=[line(f) for f in b.facts], note=b.note)


class FactsArgs(Args):
    subject: Annotated[Annotated[str, Meta(min_length=1, max_length=SUBJECT_MAX_BYTES)] | None, Meta(description=(
        'Only facts about this subject ("user" for the person you are talking with).'))] = None
    predicate: Annotated[Annotated[str, Meta(min_length=1, max_length=PREDICATE_MAX_BYTES)] | None, Meta(
        description="Only this relation.")] = None
    as_of: AsOf = None
    known_at: Annotated[str | None, Meta(description=(
        "What memory had recorded by this instant (RFC 3339): what we believed then."))] = None
    limit: Annotated[int, Meta(ge=1, le=200, description="At most this many facts.")] = 50


class FactsView(View):
    facts: list[FactLine]

    def text(self) -> str:
        if not self.facts:
            return "No facts match."
        return "\n".join(f"- {_text(f)}" for f in self.facts)


@tool(FactsArgs, FactsView)
def facts(s: Session, a: FactsArgs) -> FactsView:
    """What is true now (or at `as_of`) about a subject: the active facts, one current value per
    single-valued predicate. Prefer this over `recall` for "where does the user work / live", "what
    do they prefer", and any "what is true now" question; use `recall` for what was said and why.
    """
    found = s.daemon.facts(a.subject, predicate=a.predicate, as_of=a.as_of, known_at=a.known_at, limit=a.limit)
    return FactsView(facts=[line(f) for f in found.facts])


class AspectsArgs(Args):
    subject: Annotated[Annotated[str, Meta(min_length=1, max_length=SUBJECT_MAX_BYTES)] | None, Meta(description=(
        "Score only this subject's facts (computed now)."))] = None


class AspectLine(Struct, kw_only=True):
    slug: str
    name: str
    category: str
    score: int
    facts: int


class AspectsView(View):
    aspects: list[AspectLine]

    def text(self) -> str:
        known = [a for a in self.aspects if a.facts]
        gaps = [a.name for a in self.aspects if not a.facts]
        lines = [f"- {a.name} ({a.category}): {a.score}/100, {count(a.facts, 'fact')}" for a in known] or ["No facts yet."]
        if gaps:
            lines.append("Nothing known yet about: " + ", ".join(gaps) + ".")
        return "\n".join(lines)


@tool(AspectsArgs, AspectsView)
def aspects(s: Session, a: AspectsArgs) -> AspectsView:
    """How much memory knows about each of 14 life aspects (career, family, health, music, values, ...),
    scored 0-100, and which are empty. Use it to see where knowledge is thin before asking the user
    about themselves, or to summarise what you know."""
    r = s.daemon.aspects(a.subject)
    return AspectsView(aspects=[AspectLine(slug=x.slug, name=x.name, category=x.category, score=x.score,
                                           facts=x.facts) for x in r.aspects])


class FactIdArgs(Args):
    id: Annotated[int, Meta(ge=1, description="A fact id (the number shown as fact #ID).")]


class FactState(Struct, kw_only=True):
    """One recorded state of a fact: from `recorded_at` it was `status`, held until `valid_to` (null: open)."""

    fact_id: int
    status: str
    valid_to: str | None
    confidence: float
    recorded_at: str


class FactHistoryView(View):
    facts: list[FactLine]
    revisions: list[FactState]

    def text(self) -> str:
        lines = [f"{count(len(self.facts), 'fact')} in the lineage, oldest first:"]
        lines += [f"- {f.status}: {_text(f)}" + (f" (replaces #{f.supersedes_fact_id})" if f.supersedes_fact_id else "")
                  for f in self.facts]
        lines.append("Recorded states, oldest first:")
        lines += [f"- #{r.fact_id} {r.status} at {r.recorded_at}" + (f", held until {r.valid_to}" if r.valid_to else "")
                  + f" ({r.confidence:g})" for r in self.revisions]
        return "\n".join(lines)


@tool(FactIdArgs, FactHistoryView)
def fact_history(s: Session, a: FactIdArgs) -> FactHistoryView:
    """How a fact changed: the facts it replaced and those that replaced it (oldest first: where the
    user worked before, and since when), and every recorded state of each (a candidate, active,
    rejected; when it stopped holding). Use it for "what was X before" or "since when"; `facts` with `as_of`
    answers what held at one instant."""
    h = s.daemon.fact_history(a.id)
    return FactHistoryView(facts=[line(f) for f in h.facts], revisions=[
        FactState(fact_id=r.fact_id, status=r.status, valid_to=r.valid_to, confidence=r.confidence,
                  recorded_at=r.recorded_at) for r in h.revisions])


class PredicateLine(Struct, kw_only=True):
    name: str
    #: One current value per subject (a new fact replaces the old one); false: several may hold at once.
    functional: bool
    builtin: bool
    active_facts: int


class PredicatesView(View):
    predicates: list[PredicateLine]

    def text(self) -> str:
        def names(functional: bool) -> str:
            return ", ".join(p.name + (f" ({p.active_facts})" if p.active_facts else "")
                             for p in self.predicates if p.functional == functional) or "(none)"

        return (f"Single-valued (a new fact replaces the current one): {names(True)}\n"
                f"Multi-valued (facts accumulate): {names(False)}\n"
                "(N): facts holding now.")


@tool(NoArgs, PredicatesView)
def predicates(s: Session, a: NoArgs) -> PredicatesView:
    """The relations facts use, and how each behaves: single-valued (works_at, lives_in: a new fact
    replaces the current one) or multi-valued (knows, enjoys: facts accumulate), with how many facts
    hold now. Check it before `propose_facts` to reuse an existing predicate rather than coin a
    near-synonym; a new predicate is multi-valued."""
    return PredicatesView(predicates=[
        PredicateLine(name=p.name, functional=p.functional, builtin=p.builtin, active_facts=p.active_facts)
        for p in s.daemon.predicates().predicates])
