"""Read a LongMemEval file, check it, and turn each question into the entries it writes.

Pure: no daemon, no client. `load` reads and checks a file; `plan` says what
one question writes and which of those entries are its ground truth.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

import msgspec

from arbiter.model import CONTENT_CONTROL, CONTENT_MAX_BYTES, TITLE_MAX_BYTES

#: Seconds between consecutive turns of one session (sessions carry one date).
TURN_SPACING_S = 60
SOURCE_PREFIX = "longmemeval"
# Folding whitespace in this many leading characters almost always yields a
# full title; only a turn that opens with a huge whitespace run needs more.
_TITLE_SCAN = 4 * TITLE_MAX_BYTES
_DATE = re.compile(r"(\d{4})/(\d{2})/(\d{2}) \(\w+\) (\d{2}):(\d{2})")
#: What a title or speaker may not hold (model.ONE_LINE): published LongMemEval-S has turns with `\x02` and
#: others in their first 200 bytes. Whitespace among them (tabs, newlines) is folded anyway.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: A `\uXXXX` escape of half a surrogate pair: Python's json reads it, msgspec (rightly) refuses it.
_LONE_SURROGATE = re.compile(
    rb"(?<!\\)\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})(?<!\\)\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
# msgspec reports where validation failed only inside its message text.
_AT = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_MISSING = re.compile(r"missing required field `(?P<name>[^`]+)`")


class DatasetError(ValueError):
    """The dataset cannot be read or is malformed; names the question and field when one is at fault."""

    def __init__(self, message: str, *, question_id: str | None = None, field: str | None = None):
        super().__init__(message)
        self.question_id = question_id
        self.field = field


class Turn(msgspec.Struct, gc=False):
    """One chat turn of a haystack session."""

    role: str
    content: str
    has_answer: bool | None = None


class Question(msgspec.Struct, gc=False):
    """One LongMemEval question and its haystack (fields as the benchmark names them)."""

    question_id: str
    question_type: str
    question: str
    haystack_session_ids: list[str]
    haystack_dates: list[str]
    haystack_sessions: list[list[Turn]]
    answer_session_ids: list[str]
    answer: str | int | float | None = None
    question_date: str | None = None

    @property
    def abstention(self) -> bool:
        """LongMemEval marks questions that have no answer in the haystack with `_abs`."""
        return self.question_id.endswith("_abs")

    @property
    def turns(self) -> int:
        """How many turns the haystack holds, empty ones included."""
        return sum(len(s) for s in self.haystack_sessions)


class Dataset(msgspec.Struct):
    """A checked dataset; `sha256` is of the uncompressed JSON."""

    path: str
    sha256: str
    questions: list[Question]
    #: Escaped half surrogate pairs read as U+FFFD.
    mended: int = 0

    @property
    def turns(self) -> int:
        """How many turns all haystacks hold."""
        return sum(q.turns for q in self.questions)


class TurnEntry(msgspec.Struct, gc=False):
    """One turn as the harness remembers it (a `context` entry).

    `key` names the turn (`longmemeval:<question_id>:<session_id>:<turn>`) for
    the harness's own bookkeeping only: it never reaches the store, since
    gold session ids start with `answer_` and any searched column holding it
    would tell ranking where the answer is.
    """

    session_id: str
    turn_index: int
    role: str
    title: str
    content: str
    key: str
    valid_from: int
    has_answer: bool


class Plan(msgspec.Struct):
    """What ingesting one question writes, and which of those entries answer it.

    `truth` and `answer_sessions` are positions in `entries`. `truth_from` says
    where the ground truth came from: flagged turns, whole answer sessions, or
    nowhere (the question is then counted, not scored).
    """

    entries: list[TurnEntry]
    truth: list[int]
    answer_sessions: list[int]
    truth_from: Literal["turns", "sessions", "none"]
    skipped_empty: int
    truncated: int
    #: Turns whose text held control characters (other than whitespace), read as spaces.
    cleaned: int = 0


def load(path: str | Path) -> Dataset:
    """Read a LongMemEval JSON file (plain or gzip) and check it; DatasetError otherwise."""
    p = Path(path)
    data = read_bytes(p)
    questions, mended = _decode(data, p)
    _check(questions, p)
    return Dataset(path=str(p), sha256=hashlib.sha256(data).hexdigest(), questions=questions, mended=mended)


def read_bytes(p: Path) -> bytes:
    """A file's bytes, gunzipped when it is gzip; DatasetError if it cannot be read."""
    try:
        data = p.read_bytes()
    except OSError as e:
        raise DatasetError(f"{p}: cannot read: {e.strerror}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise DatasetError(f"{p}: not a readable gzip file: {e}") from None
    return data


def _decode(data: bytes, p: Path, mended: int = 0) -> tuple[list[Question], int]:
    """The questions, and how many half surrogate pairs were mended to read them."""
    try:
        return msgspec.json.decode(data, type=list[Question]), mended
    except msgspec.ValidationError as whole:
        # msgspec's path counts from the top-level list; decoding question by
        # question again lets the message name the question by its id.
        raise _locate(data, p) from whole
    except msgspec.DecodeError as e:
        fixed, lone = mend_surrogates(data)
        if not lone or mended:
            raise DatasetError(f"{p}: not valid JSON: {e}") from None
        return _decode(fixed, p, lone)


def mend_surrogates(data: bytes) -> tuple[bytes, int]:
    """`data` with each escaped half surrogate pair made U+FFFD (how many there were): one odd character in
    one turn must not stop a whole file's run."""
    return _LONE_SURROGATE.subn(rb"\\ufffd", data)


def _locate(data: bytes, p: Path) -> DatasetError:
    try:
        items = msgspec.json.decode(data, type=list[msgspec.Raw])
    except msgspec.ValidationError:
        return DatasetError(f"{p}: expected a JSON list of questions")
    for i, raw in enumerate(items):
        try:
            msgspec.json.decode(raw, type=Question)
        except msgspec.ValidationError as e:
            obj = msgspec.json.decode(raw)
            qid = obj.get("question_id") if isinstance(obj, dict) else None
            qid = qid if isinstance(qid, str) else None
            # Only to word the message: the path in msgspec's text becomes the
            # field name, and the message still reads right if it is absent.
            text = str(e)
            at, missing = _AT.search(text), _MISSING.search(text)
            field = at["path"] if at else ""
            if missing:
                field = f"{field}.{missing['name']}" if field else missing["name"]
            problem = text[: at.start()] if at else text
            name = f"question #{i} ({qid!r})" if qid is not None else f"question #{i} (no question_id)"
            return DatasetError(f"{p}: {name}: {field or '$'}: {problem}", question_id=qid, field=field or None)
    return DatasetError(f"{p}: does not match the LongMemEval format")


def _check(questions: list[Question], p: Path) -> None:
    """What the types cannot say: ids, matching list lengths, dates."""
    seen: set[str] = set()
    for i, q in enumerate(questions):

        def fail(field: str, problem: str) -> DatasetError:
            return DatasetError(
                f"{p}: question #{i} ({q.question_id!r}): {field}: {problem}", question_id=q.question_id, field=field
            )

        if not q.question_id.strip():
            raise fail("question_id", "must not be empty")
        if ":" in q.question_id:
            raise fail("question_id", "must not contain ':' (it is part of each turn's key)")
        if q.question_id in seen:
            raise fail("question_id", "appears twice in the dataset")
        seen.add(q.question_id)
        if not q.question.strip():
            raise fail("question", "must not be empty")
        n = len(q.haystack_sessions)
        for field, items in (("haystack_session_ids", q.haystack_session_ids), ("haystack_dates", q.haystack_dates)):
            if len(items) != n:
                raise fail(field, f"has {len(items)} items but haystack_sessions has {n}")
        for j, (sid, date) in enumerate(zip(q.haystack_session_ids, q.haystack_dates)):
            if not sid or ":" in sid:
                raise fail(f"haystack_session_ids[{j}]", f"{sid!r} must be non-empty and free of ':'")
            try:
                parse_date(date)
            except ValueError as e:
                raise fail(f"haystack_dates[{j}]", str(e)) from None


@functools.lru_cache(maxsize=1 << 16)
def parse_date(text: str) -> int:
    """'2023/05/20 (Sat) 02:21' -> epoch seconds. The dataset has no zone; read as UTC."""
    m = _DATE.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a date like '2023/05/20 (Sat) 02:21'")
    year, month, day, hour, minute = map(int, m.groups())
    try:
        return int(datetime(year, month, day, hour, minute, tzinfo=timezone.utc).timestamp())
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}") from None


def source(question_id: str, session_id: str, turn_index: int) -> str:
    """The key naming one turn: `longmemeval:<question_id>:<session_id>:<turn_index>` (bookkeeping, never stored)."""
    return f"{SOURCE_PREFIX}:{question_id}:{session_id}:{turn_index}"


def parse_source(text: str) -> tuple[str, str, int] | None:
    """Inverse of `source`; None for a source this harness did not write."""
    parts = text.split(":")
    if len(parts) != 4 or parts[0] != SOURCE_PREFIX or not parts[3].isdigit():
        return None
    return parts[1], parts[2], int(parts[3])


def cut_utf8(text: str, limit: int) -> str:
    """The longest prefix of `text` that fits in `limit` UTF-8 bytes (never half a character)."""
    if len(text) * 4 <= limit:  # no character is wider than 4 bytes
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    end = limit
    while end > 0 and data[end] & 0xC0 == 0x80:  # a continuation byte: back up to the lead byte
        end -= 1
    return data[:end].decode("utf-8", "surrogatepass")


def one_line(text: str) -> str:
    """`text` with control characters read as spaces and whitespace folded: what a title or speaker may hold."""
    return " ".join(_CONTROL.sub(" ", text).split())


def make_title(text: str) -> str:
    """The turn's first TITLE_MAX_BYTES bytes with whitespace folded and control characters read as spaces, cut
    on a character boundary."""
    # Folding a prefix gives a prefix of the folded whole, so the scan window is
    # exact whenever it already yields a full title.
    head = one_line(text[:_TITLE_SCAN])
    if len(text) > _TITLE_SCAN and len(head.encode("utf-8", "surrogatepass")) < TITLE_MAX_BYTES:
        head = one_line(text)
    return cut_utf8(head, TITLE_MAX_BYTES).rstrip()


def unprintable(text: str) -> bool:
    """Whether `text` holds a control character other than whitespace (its title is cleaned)."""
    return any(c not in " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f" for c in _CONTROL.findall(text[:_TITLE_SCAN]))


def readable(text: str) -> tuple[str, bool]:
    """`text` with the control characters the daemon refuses in an entry (all but whitespace) read as spaces, and
    whether it held any (in its text, or in what its title is made of)."""
    kept = CONTENT_CONTROL.sub(" ", text)
    return kept, unprintable(text) or kept != text


def plan(q: Question) -> Plan:
    """The entries one question writes, in dataset order, and its ground truth."""
    entries: list[TurnEntry] = []
    skipped = truncated = cleaned = 0
    for sid, date, turns in zip(q.haystack_session_ids, q.haystack_dates, q.haystack_sessions):
        start = parse_date(date)
        for i, turn in enumerate(turns):
            content = turn.content
            title = make_title(content) if content.strip() else ""
            if not title:  # nothing but whitespace and control characters
                skipped += 1
                continue
            cut = cut_utf8(content, CONTENT_MAX_BYTES)
            if cut is not content:
                truncated += 1
            cut, was = readable(cut)
            cleaned += was
            entries.append(
                TurnEntry(
                    session_id=sid,
                    turn_index=i,
                    role=one_line(turn.role),
                    title=make_title(cut),
                    content=cut,
                    key=source(q.question_id, sid, i),
                    valid_from=start + TURN_SPACING_S * i,
                    has_answer=bool(turn.has_answer),
                )
            )
    flagged = [k for k, e in enumerate(entries) if e.has_answer]
    # Sessions holding a flagged turn count as answer sessions too, so session
    # R@5 can never be below turn R@5 when the two lists disagree.
    answer_ids = set(q.answer_session_ids) | {entries[k].session_id for k in flagged}
    in_answer = [k for k, e in enumerate(entries) if e.session_id in answer_ids]
    if flagged:
        truth, truth_from = flagged, "turns"
    elif in_answer:
        truth, truth_from = in_answer, "sessions"
    else:
        truth, truth_from = [], "none"
    return Plan(
        entries=entries,
        truth=truth,
        answer_sessions=in_answer,
        truth_from=truth_from,
        skipped_empty=skipped,
        truncated=truncated,
        cleaned=cleaned,
    )


class Ask(msgspec.Struct, kw_only=True):
    """One question asked of a unit's conversation; `truth` and `answer_sessions` are positions in its entries."""

    question_id: str
    question_type: str
    question: str
    abstention: bool
    truth: list[int]
    answer_sessions: list[int]
    truth_from: str
    question_date: str | None = None


class Unit(msgspec.Struct, kw_only=True):
    """What one conversation holds and the questions asked of it.

    LongMemEval has one unit per question (its own haystack); LoCoMo one per
    conversation, with many questions. `key` titles the conversation.
    """

    key: str
    entries: list[TurnEntry]
    asks: list[Ask]
    turns: int
    skipped_empty: int
    truncated: int
    #: Entries whose text held control characters (other than whitespace), read as spaces.
    cleaned: int = 0


class Corpus(msgspec.Struct, kw_only=True):
    """A checked benchmark file in any format the harness reads, as units."""

    path: str
    sha256: str
    format: Literal["longmemeval", "locomo"]
    units: list[Unit]
    questions_in_file: int
    #: Escaped half surrogate pairs read as U+FFFD.
    mended: int = 0


def unit(q: Question) -> Unit:
    """One LongMemEval question as a unit: its haystack, asked once."""
    p = plan(q)
    ask = Ask(
        question_id=q.question_id,
        question_type=q.question_type,
        question=q.question,
        abstention=q.abstention,
        truth=p.truth,
        answer_sessions=p.answer_sessions,
        truth_from=p.truth_from,
        question_date=q.question_date,
    )
    return Unit(
        key=q.question_id,
        entries=p.entries,
        asks=[ask],
        turns=q.turns,
        skipped_empty=p.skipped_empty,
        truncated=p.truncated,
        cleaned=p.cleaned,
    )


def load_corpus(path: str | Path) -> Corpus:
    """Read a LongMemEval or LoCoMo file (plain or gzip) as units; DatasetError otherwise."""
    from bench.longmemeval import locomo  # the two formats share everything after this point

    data = read_bytes(Path(path))
    if locomo.looks_like(data):
        return locomo.corpus(path, data)
    d = load(path)
    return Corpus(
        path=d.path, sha256=d.sha256, format="longmemeval", units=[unit(q) for q in d.questions],
        questions_in_file=len(d.questions), mended=d.mended,
    )
