"""Wire types for facts, patch batches, predicates and aspects (msgspec Structs).

Structural limits (non-empty parts, byte lengths, confidence in [0, 1]) are
checked here at decode time, so a malformed proposal is refused whole before
anything is stored. What needs the store (contradictions, duplicates,
thresholds) is the gate's job (`arbiter.facts.gate`).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from msgspec import Meta, Struct

from arbiter.model import Id, Name, Params, Time

SUBJECT_MAX_BYTES = 256
OBJECT_MAX_BYTES = 256
PREDICATE_MAX_BYTES = 64
#: Facts one batch may carry.
BATCH_MAX = 1000

FactStatus = Literal["candidate", "active", "rejected"]
BatchStatus = Literal["proposed", "evaluated", "applied", "rejected"]
BatchOrigin = Literal["agent", "extractor", "import"]
#: What the gate found for one candidate. `accept` and `supersede` pass;
#: `reinforce` merges into an active fact; the rest are rejected.
Finding = Literal["accept", "supersede", "reinforce", "low_confidence", "malformed", "contradiction", "batch_rejected"]
PASSING: frozenset[str] = frozenset({"accept", "supersede"})

Confidence = Annotated[float, Meta(ge=0.0, le=1.0)]

_NON_WORD = re.compile(r"[^0-9a-z]+")
PREDICATE_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def normalize_predicate(name: str) -> str:
    """`Works At` / `works-at` / `WORKS_AT` -> `works_at` (lower snake_case)."""
    return _NON_WORD.sub("_", name.strip().lower()).strip("_")


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _check_part(field: str, value: str, limit: int) -> None:
    if not value.strip():
        raise ValueError(f"{field}: must not be empty")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueError(f"{field}: {size} bytes is over the limit of {limit}")


def check_printable(field: str, value: str) -> None:
    """A fact's part is a line of text: whitespace folds to one space, and nothing else may hide in it (ESC, BEL).

    Checked where a fact comes in (a proposal, an import), not on records built from stored rows, so an export
    of what an older version stored still runs.
    """
    if _CONTROL.search(" ".join(value.split())):
        raise ValueError(f"{field}: a fact's part is one line of text, without control characters")


class FactProposal(Params):
    """One candidate triple. `predicate` is normalised to snake_case; `sources` are the entries it was drawn from."""

    subject: str
    predicate: str
    object: str
    confidence: Confidence = 1.0
    valid_from: Time | None = None
    sources: Annotated[list[Id], Meta(max_length=64)] = []
    #: Aspect slugs suggested by whoever proposed it (unknown ones are dropped, with a note).
    aspects: Annotated[list[Annotated[str, Meta(max_length=64)]], Meta(max_length=14)] = []

    def __post_init__(self) -> None:
        _check_part("subject", self.subject, SUBJECT_MAX_BYTES)
        _check_part("object", self.object, OBJECT_MAX_BYTES)
        _check_part("predicate", self.predicate, PREDICATE_MAX_BYTES)
        check_printable("subject", self.subject)
        check_printable("object", self.object)
        name = normalize_predicate(self.predicate)
        if not PREDICATE_RE.match(name):
            raise ValueError(f"predicate: {self.predicate!r} has no letters to make a snake_case name of")
        self.predicate = name
        self.subject = " ".join(self.subject.split())
        self.object = " ".join(self.object.split())


class ProposeParams(Params):
    """Propose a batch of candidate facts. With `apply`, evaluate and apply it in the same call (through the same gate)."""

    facts: Annotated[list[FactProposal], Meta(min_length=1, max_length=BATCH_MAX)]
    origin: BatchOrigin = "agent"
    apply: bool = False
    #: Candidates below this confidence are rejected at evaluation.
    threshold: Confidence = 0.5
    note: Annotated[str, Meta(max_length=200)] | None = None
    #: Share the batch's facts with this team (one the proposer is in); default private to the proposer.
    team: Name | None = None


class ExtractParams(Params):
    """Ask the advisor for candidate facts drawn from these entries (needs ANTHROPIC_API_KEY on the daemon)."""

    entry_ids: Annotated[list[Id], Meta(min_length=1, max_length=20)]
    apply: bool = False
    threshold: Confidence = 0.5
    #: Share the proposed facts with this team (one the caller is in); default private to the caller.
    team: Name | None = None


class FactsParams(Params):
    """Read facts. Default: the active facts true now. `as_of` is valid time; `known_at` is record time (what we believed then)."""

    subject: Annotated[str, Meta(min_length=1, max_length=SUBJECT_MAX_BYTES)] | None = None
    predicate: Annotated[str, Meta(min_length=1, max_length=PREDICATE_MAX_BYTES)] | None = None
    status: FactStatus = "active"
    as_of: Time | None = None
    known_at: Time | None = None
    limit: Annotated[int, Meta(ge=1, le=1000)] = 100


class BatchIdParams(Params):
    id: Id


class BatchListParams(Params):
    status: BatchStatus | None = None
    limit: Annotated[int, Meta(ge=1, le=1000)] = 50


class PredicateDeclareParams(Params):
    """Declare a predicate once: `functional` means one active object per subject."""

    name: Annotated[str, Meta(min_length=1, max_length=PREDICATE_MAX_BYTES)]
    functional: bool = False


class AspectsParams(Params):
    """Aspect scores. With `subject` or `predicate`, computed on demand over that scope; else the precomputed ones."""

    subject: Annotated[str, Meta(min_length=1, max_length=SUBJECT_MAX_BYTES)] | None = None
    predicate: Annotated[str, Meta(min_length=1, max_length=PREDICATE_MAX_BYTES)] | None = None


# ---- results -------------------------------------------------------------------


class Fact(Struct, kw_only=True):
    """One fact. `status` and `valid_to` are as of now, or as recorded at `known_at` on such a read."""

    id: int
    subject: str
    predicate: str
    object: str
    subject_entity_id: int | None = None
    object_entity_id: int | None = None
    confidence: float
    status: str
    valid_from: str
    valid_to: str | None
    supersedes_fact_id: int | None
    batch_id: int
    sources: list[int]
    aspects: list[str]
    finding: str | None
    reason: str | None
    recorded_at: str


class FactList(Struct, kw_only=True):
    facts: list[Fact]


class FactRevision(Struct, kw_only=True):
    """One recorded state of a fact (record time `recorded_at`)."""

    fact_id: int
    status: str
    valid_to: str | None
    confidence: float
    recorded_at: str


class FactHistory(Struct, kw_only=True):
    """A fact's supersession lineage, oldest first, and every recorded state of those facts."""

    facts: list[Fact]
    revisions: list[FactRevision]


class Batch(Struct, kw_only=True):
    """A patch batch and its facts with the gate's findings. `note` says what a call did (or did not) change."""

    id: int
    origin: str
    status: str
    threshold: float
    created_at: str
    evaluated_at: str | None
    decided_at: str | None
    facts: list[Fact]
    counts: dict[str, int]
    note: str | None = None
    changed: bool = True
    #: Who proposed it, and the team its facts are shared with (null: private to the proposer).
    author: str | None = None
    team: str | None = None


class BatchSummary(Struct, kw_only=True):
    id: int
    origin: str
    status: str
    created_at: str
    facts: int
    counts: dict[str, int]
    author: str | None = None
    team: str | None = None


class BatchList(Struct, kw_only=True):
    batches: list[BatchSummary]


class Predicate(Struct, kw_only=True):
    """A predicate in the registry: `builtin` ones ship with Arbiter; others were declared or first applied."""

    name: str
    functional: bool
    builtin: bool
    active_facts: int


class PredicateList(Struct, kw_only=True):
    predicates: list[Predicate]


class AspectScore(Struct, kw_only=True):
    """One aspect's 0-100 score and the four dimensions it is made of."""

    slug: str
    name: str
    category: str
    score: int
    facts: int
    entities: int
    predicates: int
    confidence: float


class AspectList(Struct, kw_only=True):
    """Scores for all 14 aspects; `scope` is "all" (precomputed at apply) or the filter they were computed on."""

    aspects: list[AspectScore]
    scope: str


class ExtractResult(Struct, kw_only=True):
    """The batch the advisor's triples were proposed in (None when nothing was proposed; `note` says why)."""

    batch: Batch | None
    note: str | None = None
