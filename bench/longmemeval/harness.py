"""Ingest haystacks and run recall variants through a Client.

The state file beside the daemon's home records, per question, its
conversation and the entry ids of its ground truth, so `query` re-runs skip
ingest and grade by entry id without reading the dataset again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from arbiter.model import RememberParams
from bench.longmemeval.dataset import Corpus, Unit
from bench.longmemeval.metrics import Outcome
from bench.longmemeval.phrasing import phrase
from bench.longmemeval.report import IngestStats

if TYPE_CHECKING:
    from arbiter.client import Client

STATE_NAME = "longmemeval-state.json"
#: `graph`: graduated plus intent-weighted graph recall over the association graph;
#: `expand`: graduated plus LLM query expansion (with the rerank model, the fast one by default).
VARIANTS = ("bm25", "graduated", "graph", "expand", "rerank", "cascade")
LLM_VARIANTS = frozenset({"expand", "rerank", "cascade"})
DEFAULT_BATCH = 2000
#: Bytes of encoded entries per `remember_many`: under the daemon's default
#: 4 MiB frame limit with room for the envelope, whatever the turn lengths.
MAX_BATCH_BYTES = 3 * 1024 * 1024
_encode = msgspec.json.Encoder().encode

Progress = Callable[[int], None]


class HarnessError(RuntimeError):
    """The home, the state file and the dataset disagree."""


class QuestionState(msgspec.Struct, kw_only=True):
    """One ingested question: where it lives and which entry ids answer it."""

    question_id: str
    question_type: str
    question: str
    abstention: bool
    conversation_id: int
    turns: int
    entries: int
    truth_from: str
    truth_ids: list[int]
    answer_session_ids: list[int]
    skipped_empty: int
    truncated: int
    unit: str = ""
    question_date: str | None = None


class UnitState(msgspec.Struct, kw_only=True):
    """One ingested conversation: its key, id, and its entries' ids in the unit's order.

    The ids are the harness's bookkeeping (which turn an entry is), kept here
    rather than in any column the store searches.
    """

    key: str
    conversation_id: int
    entry_ids: list[int]
    turns: int


class State(msgspec.Struct, kw_only=True):
    """What the harness has written into one tenant.

    `tenant_entries` is the tenant's active entry count after the last batch;
    any other count at the next ingest means an interrupted ingest or another
    writer, and the numbers would no longer follow the protocol.
    """

    dataset_sha256: str
    dataset_path: str
    questions_in_file: int
    tenant_entries: int = 0
    questions: list[QuestionState] = []
    units: list[UnitState] = []
    ingest: IngestStats | None = None

    @classmethod
    def load(cls, path: Path) -> State:
        """Read a state file; HarnessError if it is missing or unreadable."""
        try:
            return msgspec.json.decode(path.read_bytes(), type=cls)
        except FileNotFoundError:
            raise HarnessError(f"{path}: no harness state here; run `ingest` first") from None
        except msgspec.DecodeError as e:
            raise HarnessError(f"{path}: not a harness state file: {e}") from None

    def save(self, path: Path) -> None:
        """Write atomically, so an interrupted run leaves the previous state whole."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(msgspec.json.encode(self))
        os.replace(tmp, path)


def open_state(path: Path, dataset: Corpus) -> State:
    """The state in `path` if it was written for this dataset, else a fresh one."""
    if not path.exists():
        return State(
            dataset_sha256=dataset.sha256, dataset_path=dataset.path, questions_in_file=dataset.questions_in_file
        )
    state = State.load(path)
    if state.dataset_sha256 != dataset.sha256:
        raise HarnessError(
            f"{path}: this home holds dataset {state.dataset_path} (sha256 {state.dataset_sha256[:12]}…), "
            f"not {dataset.path} (sha256 {dataset.sha256[:12]}…); use another --home"
        )
    return state


def ingest(
    client: Client,
    units: Sequence[Unit],
    state: State,
    state_path: Path,
    *,
    batch_size: int = DEFAULT_BATCH,
    progress: Progress = lambda n: None,
) -> IngestStats:
    """Write the units the state does not hold yet, `batch_size` entries per `remember_many`.

    Whole units are buffered until a batch is due, so the state, saved after
    each flush, only ever names units whose entries all landed. Entries carry
    no source: nothing that says where an answer is reaches a searched column.
    """
    active = client.status().entries_active
    if active != state.tenant_entries:
        raise HarnessError(
            f"the tenant holds {active} entries but the harness state accounts for {state.tenant_entries}: "
            "an ingest was interrupted or something else writes here; use a fresh --home"
        )
    done = {u.key for u in state.units} | {q.unit or q.question_id for q in state.questions}
    todo = [u for u in units if u.key not in done]
    if not todo:
        if state.ingest is None:
            raise HarnessError("nothing to ingest and no record of an earlier ingest")
        return msgspec.structs.replace(state.ingest, reused=True)

    started = time.perf_counter()
    written = skipped = truncated = cleaned = 0
    pending: list[tuple[Unit, int]] = []
    buffer: list[RememberParams] = []

    def flush() -> None:
        nonlocal written
        ids: list[int] = []
        for chunk in _chunks(buffer, batch_size, MAX_BATCH_BYTES):
            ids += client.remember_many(chunk)
            progress(len(chunk))
        if len(ids) != len(buffer):
            raise HarnessError(f"remember_many returned {len(ids)} ids for {len(buffer)} entries")
        at = 0
        for u, conversation_id in pending:
            record(state, u, conversation_id, ids[at : at + len(u.entries)])
            at += len(u.entries)
        written += len(buffer)
        state.tenant_entries = client.status().entries_active
        state.save(state_path)
        pending.clear()
        buffer.clear()

    for u in todo:
        skipped += u.skipped_empty
        truncated += u.truncated
        cleaned += u.cleaned
        conversation = client.conversation_create(title=u.key)
        pending.append((u, conversation.id))
        buffer.extend(remember_params(u, conversation.id))
        if len(buffer) >= batch_size:
            flush()
    flush()
    seconds = time.perf_counter() - started
    state.ingest = IngestStats(
        entries=written,
        seconds=round(seconds, 3),
        entries_per_s=round(written / seconds, 1),
        conversations=len(todo),
        batch_size=batch_size,
        skipped_empty=skipped,
        truncated=truncated,
        cleaned=cleaned,
    )
    state.save(state_path)
    return state.ingest


def remember_params(u: Unit, conversation_id: int) -> list[RememberParams]:
    """What the harness writes for a unit: one `context` entry per turn, with its speaker and no source."""
    return [
        RememberParams(
            type="context",
            title=e.title,
            content=e.content,
            conversation_id=conversation_id,
            valid_from=e.valid_from,
            speaker=e.role or None,
            allow_duplicate=True,  # every turn is one entry, as the gold labels are per turn
        )
        for e in u.entries
    ]


def record(state: State, u: Unit, conversation_id: int, ids: list[int]) -> None:
    """Note in the state that unit `u` landed in `conversation_id` as `ids` (its entries, in order)."""
    state.units.append(UnitState(key=u.key, conversation_id=conversation_id, entry_ids=ids, turns=u.turns))
    state.questions.extend(
        QuestionState(
            question_id=a.question_id,
            question_type=a.question_type,
            question=a.question,
            abstention=a.abstention,
            conversation_id=conversation_id,
            turns=u.turns,
            entries=len(ids),
            truth_from=a.truth_from,
            truth_ids=[ids[k] for k in a.truth],
            answer_session_ids=[ids[k] for k in a.answer_sessions],
            skipped_empty=u.skipped_empty,
            truncated=u.truncated,
            unit=u.key,
            question_date=a.question_date,
        )
        for a in u.asks
    )


def _chunks(params: list[RememberParams], count: int, size: int) -> Iterator[list[RememberParams]]:
    """Consecutive runs of at most `count` entries and (but for a lone huge entry) `size` encoded bytes."""
    chunk: list[RememberParams] = []
    used = 0
    for p in params:
        n = len(_encode(p)) + 1  # the separating comma
        if chunk and (len(chunk) == count or used + n > size):
            yield chunk
            chunk, used = [], 0
        chunk.append(p)
        used += n
    if chunk:
        yield chunk


def recall_kwargs(
    variant: str, q: QuestionState, *, k: int, rerank_model: str, fine_model: str, phrasing: str = "as-written"
) -> dict[str, object]:
    """The `Client.recall` arguments that make up one variant."""
    if variant not in VARIANTS:
        raise HarnessError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    question = phrase(q.question, phrasing)
    if variant == "bm25":
        return {"query": question, "limit": k}
    kwargs: dict[str, object] = {"query": question, "conversation_id": q.conversation_id, "limit": k}
    if variant == "expand":
        kwargs["expand"] = rerank_model
    elif variant in LLM_VARIANTS:
        kwargs["rerank"] = rerank_model
    if variant == "cascade":
        kwargs["rerank_fine"] = fine_model
    if variant == "graph":
        kwargs["graph"] = True
    return kwargs


def run_variant(
    client: Client,
    questions: Sequence[QuestionState],
    variant: str,
    *,
    k: int,
    rerank_model: str,
    fine_model: str,
    phrasing: str = "as-written",
    progress: Progress = lambda n: None,
) -> list[Outcome]:
    """One recall per question, timed around the socket round trip, in order (no concurrency skews latency)."""
    outcomes = []
    for q in questions:
        kwargs = recall_kwargs(variant, q, k=k, rerank_model=rerank_model, fine_model=fine_model, phrasing=phrasing)
        started = time.perf_counter()
        result = client.recall(**kwargs)
        latency_ms = (time.perf_counter() - started) * 1000
        outcomes.append(
            Outcome(
                question_id=q.question_id,
                question_type=q.question_type,
                ranked=[h.id for h in result.hits],
                truth=q.truth_ids,
                answer_sessions=q.answer_session_ids,
                latency_ms=round(latency_ms, 3),
                note=result.note,
                abstention=q.abstention,
                truth_from=q.truth_from,
            )
        )
        progress(1)
    return outcomes
