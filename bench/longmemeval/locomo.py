"""LoCoMo (Maharana et al., ACL 2024) in its own format, as units the harness ingests.

Each sample is one long conversation between two named speakers, in
sessions with a date each, and questions about it whose `evidence` names the
supporting turns by `dia_id` ("D3:5": session 3, turn 5). The harness
ingests each conversation once, as one conversation:

- one `context` entry per turn: content "Speaker: text", plus "[photo: caption]"
  when the turn shared an image; title = its first 200 bytes, as for
  LongMemEval; valid_from = the session's date (read as UTC) + 60 s per turn;
- questions of categories 1-4 (1 multi-hop, 2 temporal, 3 open-domain,
  4 single-hop) are asked in their conversation; category 5 (adversarial,
  no evidence) is not;
- ground truth = the entries of the evidence `dia_id`s; an evidence id that
  names no turn is dropped (LoCoMo has a few; "D8:6; D9:17" counts as two), and a question left with none
  is counted, not scored.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone
from pathlib import Path

import msgspec

from arbiter.model import CONTENT_MAX_BYTES
from bench.longmemeval.dataset import (
    TURN_SPACING_S, Ask, Corpus, DatasetError, TurnEntry, Unit, cut_utf8, make_title, mend_surrogates, one_line, readable,
)

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_SPLIT = re.compile(r"[;,\s]+")
_SESSION = re.compile(r"session_(\d+)")
_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m) on (\d{1,2}) (\w+),? (\d{4})", re.IGNORECASE)


class LocomoTurn(msgspec.Struct, gc=False):
    """One turn: who said it, its id and text, and the caption of a photo shared with it."""

    speaker: str
    dia_id: str
    text: str = ""
    blip_caption: str | None = None


class QA(msgspec.Struct, gc=False):
    """One question; `evidence` holds dia_ids."""

    question: str
    category: int
    evidence: list[str] = []
    answer: str | int | float | None = None


class Sample(msgspec.Struct):
    """One LoCoMo conversation and its questions; `conversation` is kept raw (its keys are numbered)."""

    sample_id: str
    conversation: dict[str, msgspec.Raw]
    qa: list[QA]


def looks_like(data: bytes) -> bool:
    """Whether a decoded file is LoCoMo's (samples with `qa` and `conversation`), not LongMemEval's."""
    head = data[:65536]
    return b'"sample_id"' in head or (b'"qa"' in head and b'"conversation"' in head)


def parse_date(text: str) -> int:
    """'1:56 pm on 8 May, 2023' -> epoch seconds (read as UTC)."""
    m = _DATE.search(text)
    if m is None:
        raise ValueError(f"{text!r} is not a date like '1:56 pm on 8 May, 2023'")
    hour, minute, half, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    try:
        when = datetime.strptime(f"{year} {month} {day} {h} {minute}", "%Y %B %d %H %M")
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}") from None
    return int(when.replace(tzinfo=timezone.utc).timestamp())


def turn_text(turn: LocomoTurn) -> str:
    """What the entry holds: "Speaker: text", and the photo's caption when one was shared."""
    text = f"{turn.speaker}: {turn.text}"
    if turn.blip_caption:
        text += f" [photo: {turn.blip_caption}]"
    return text


def sessions(sample: Sample) -> list[tuple[int, str, list[LocomoTurn]]]:
    """(number, date, turns) for each session, in order."""
    out = []
    for name, raw in sample.conversation.items():
        m = _SESSION.fullmatch(name)
        if m is None:
            continue
        date_raw = sample.conversation.get(f"{name}_date_time")
        if date_raw is None:
            raise DatasetError(f"{sample.sample_id}: {name} has no {name}_date_time", field=name)
        turns = msgspec.json.decode(raw, type=list[LocomoTurn])
        out.append((int(m[1]), msgspec.json.decode(date_raw, type=str), turns))
    return sorted(out, key=lambda s: s[0])


def unit(sample: Sample) -> Unit:
    """One conversation as a unit: its turns, and its questions of categories 1-4."""
    entries: list[TurnEntry] = []
    position: dict[str, int] = {}
    session_of: list[int] = []
    turns = truncated = cleaned = 0
    for number, date, items in sessions(sample):
        try:
            start = parse_date(date)
        except ValueError as e:
            raise DatasetError(f"{sample.sample_id}: session_{number}_date_time: {e}", field=f"session_{number}") from None
        for i, t in enumerate(items):
            turns += 1
            text = turn_text(t)
            cut = cut_utf8(text, CONTENT_MAX_BYTES)
            truncated += cut is not text
            cut, was = readable(cut)
            cleaned += was
            position[t.dia_id] = len(entries)
            session_of.append(number)
            entries.append(
                TurnEntry(
                    session_id=f"session_{number}",
                    turn_index=i,
                    role=one_line(t.speaker),
                    title=make_title(cut),
                    content=cut,
                    key=f"locomo:{sample.sample_id}:{t.dia_id}",
                    valid_from=start + TURN_SPACING_S * i,
                    has_answer=False,
                )
            )
    asks = []
    for n, qa in enumerate(sample.qa):
        if qa.category not in CATEGORIES:
            continue
        cited = {d for item in qa.evidence for d in _SPLIT.split(item) if d}  # one entry reads "D8:6; D9:17"
        truth = sorted({position[d] for d in cited if d in position})
        answer_sessions = {session_of[k] for k in truth}
        asks.append(
            Ask(
                question_id=f"{sample.sample_id}:{n}",
                question_type=CATEGORIES[qa.category],
                question=qa.question,
                abstention=False,
                truth=truth,
                answer_sessions=[k for k, s in enumerate(session_of) if s in answer_sessions],
                truth_from="evidence" if truth else "none",
            )
        )
    return Unit(key=sample.sample_id, entries=entries, asks=asks, turns=turns, skipped_empty=0, truncated=truncated,
                cleaned=cleaned)


def corpus(path: str | Path, data: bytes) -> Corpus:
    """The LoCoMo file's samples as units; DatasetError if it does not fit the format."""
    mended = 0
    try:
        try:
            samples = msgspec.json.decode(data, type=list[Sample])
        except msgspec.DecodeError as e:
            fixed, mended = mend_surrogates(data)
            if isinstance(e, msgspec.ValidationError) or not mended:
                raise
            samples = msgspec.json.decode(fixed, type=list[Sample])
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise DatasetError(f"{path}: not a LoCoMo file: {e}") from None
    units = [unit(s) for s in samples]
    return Corpus(
        path=str(path),
        sha256=hashlib.sha256(data).hexdigest(),
        format="locomo",
        units=units,
        questions_in_file=sum(len(s.qa) for s in samples),
        mended=mended,
    )
