"""The advisor: the one module that talks to an LLM (Anthropic's Messages API).

Optional everywhere. Every method asks the model for JSON only, parses it
robustly, validates it, and either returns a clean value or raises
`AdvisorError` with a short machine-friendly `reason`; callers turn that into a
`note` and fall back to their lexical result. Each call has a budget: an
absolute `deadline` on the `time.monotonic()` clock, on top of `timeout_s`.

`anthropic` is imported lazily, on the first call that needs it, so a daemon
that never uses the advisor never pays for the import.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    import anthropic

__all__ = ["Advisor", "AdvisorError", "Candidate", "ExtractedFact"]


class AdvisorError(Exception):
    """An advisor call failed; `reason` says why in a few stable words.

    Reasons: "no API key", "deadline passed", "timeout", "connection failed",
    "rate limited (429)", "server error (5xx)", "api error (4xx)",
    "malformed output".
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Candidate(msgspec.Struct, frozen=True):
    """One entry shown to the model: its id, metadata and text (already cut to size by the caller)."""

    id: int
    type: str
    date: str
    superseded: bool
    text: str
    #: Who said it, when the entry records a speaker.
    speaker: str | None = None
    #: The turn it follows in its conversation, "Speaker: text" cut short: a
    #: reply ("These are for running") says what it answers only beside it.
    follows: str | None = None


class ExtractedFact(msgspec.Struct, frozen=True):
    """One triple the model found, with the entry it came from and its (unvalidated) aspect slugs."""

    subject: str
    predicate: str
    object: str
    confidence: float
    source: int
    aspects: list[str] = []


# Prompt-size caps: the advisor runs on interactive paths (recall, remember),
# so prompts stay small enough for a fast model to answer within seconds.
_CONTENT_CHARS = 4000
_VOCABULARY_MAX = 200
_TAGS_MAX = 4
_TAG_RE = re.compile(r"^[^\s\x00-\x1f]{1,64}$")  # the same rule as a stored tag
_NAME_WORDS_MAX = 3
_ENTITIES_MAX = 12
_ENTITY_NAME_MAX = 128  # the same rule as an entity's name
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DESCRIPTION_CHARS = 200
# Backoff before retry n (0-based) is _BACKOFF_S * 2**n, at most one call's
# timeout; a server asking for a longer wait (retry-after) is not worth waiting for.
_BACKOFF_S = 0.25

_JSON_ONLY = "Answer with JSON only: no prose, no code fences."


class Advisor:
    """Calls the LLM for query expansions, reranking, tags, contradictions, names, facts, entities and links.

    `fast_model` serves cheap, latency-bound calls (expansions, tags, names, entities);
    `strong_model` serves judgement calls (rerank, contradictions); its default
    is not "claude-sonnet-4-5", which the SDK flags as deprecated. Every
    method takes a `model` override and a `deadline` (absolute
    `time.monotonic()` seconds): each HTTP attempt gets
    `min(timeout_s, time left)`, and no attempt starts once the deadline has
    passed. Failed attempts are retried at most `max_retries` times, only for
    timeouts, connection errors, 429 and 5xx. Thread-safe.
    """

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None = None,
        fast_model: str = "claude-haiku-4-5",
        strong_model: str = "claude-sonnet-4-6",
        timeout_s: float = 10.0,
        max_retries: int = 1,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.api_key = api_key or None
        self.base_url = base_url
        self.fast_model = fast_model
        self.strong_model = strong_model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._client: anthropic.Anthropic | None = None
        self._client_lock = threading.Lock()

    def close(self) -> None:
        """Release the HTTP connection pool (a later call opens a new one)."""
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> Advisor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the five questions --------------------------------------------------

    def expansions(
        self, query: str, *, model: str | None = None, deadline: float | None = None
    ) -> list[str]:
        """Texts to search beside a memory-search query: a rephrasing, and a guess at how an answer would be worded.

        The guess is query2doc's pseudo-document (Wang et al., 2023) and
        HyDE's hypothetical answer: a lexical index finds the note that
        answers "What activities has Melanie done with her family?" by the
        words such a note uses ("took the kids camping", "the museum"), which
        neither the question nor a synonym of it holds. Its details may be
        invented; only its words are searched, beside the query's own
        ranking. Stripped, deduplicated (an echo of the query is dropped), at
        least one.
        """
        self._check_ready(deadline)
        prompt = (
            "A keyword search over someone's stored memory notes must find what answers this query. "
            "Write two texts to search with. First, the query rephrased with synonyms and other "
            "wordings. Second, one or two sentences worded as a stored note that answers it would "
            "likely be worded, using the words such a note would use; guess details if you must, "
            "since only its words are searched. Keep every specific name, number and identifier.\n"
            f"Query: {query.strip()}\n\n"
            'Reply as {"rephrased": "...", "answer": "..."}. ' + _JSON_ONLY
        )
        value = _parse_json(self._ask(prompt, model or self.fast_model, 300, deadline))
        # The query itself counts as seen: echoing it back adds nothing.
        seen = {" ".join(query.split()).casefold()}
        out: list[str] = []
        for key in ("rephrased", "answer"):
            item = value.get(key) if isinstance(value, dict) else None
            if not isinstance(item, str):
                continue
            text = " ".join(item.split())
            if text and text.casefold() not in seen:
                seen.add(text.casefold())
                out.append(text)
        if not out:
            raise AdvisorError("malformed output")
        return out

    def rerank(
        self,
        query: str,
        candidates: list[Candidate],
        *,
        model: str | None = None,
        deadline: float | None = None,
    ) -> list[int]:
        """Candidate ids, most relevant to `query` first: always a permutation of them.

        Ids the model invents are dropped, repeats keep their first place, and
        ids it leaves out follow in their original order.
        """
        self._check_ready(deadline)
        ids = list(dict.fromkeys(c.id for c in candidates))
        if len(ids) <= 1:
            return ids
        prompt = (
            "Rank these stored memory entries by how well they answer the query, "
            "most relevant first. Prefer current entries over superseded ones "
            "when they say the same thing. A turn of a conversation is shown "
            "after the turn it follows, which may say what it answers.\n"
            f"Query: {query.strip()}\n\n"
            f"Entries:\n{_format_candidates(candidates)}\n\n"
            'Reply as {"ids": [most relevant id, ...]} listing every entry id. ' + _JSON_ONLY
        )
        value = _parse_json(self._ask(prompt, model or self.strong_model, 400, deadline))
        ranked = _known_ids(_list_field(value, "ids"), ids)
        placed = set(ranked)
        return ranked + [i for i in ids if i not in placed]

    def tags(
        self,
        title: str,
        content: str,
        existing: list[str],
        vocabulary: list[str],
        *,
        model: str | None = None,
        deadline: float | None = None,
    ) -> list[str]:
        """Up to four new lowercase tags for an entry, reusing `vocabulary` where it fits.

        `existing` are the entry's current tags: they are never suggested again.
        Each tag is 1-64 characters without whitespace (inner spaces become "-").
        """
        self._check_ready(deadline)
        vocab = ", ".join(vocabulary[:_VOCABULARY_MAX]) or "(none yet)"
        prompt = (
            "Suggest 2 to 4 short lowercase tags for this memory entry. Reuse tags "
            "from the vocabulary whenever one fits; invent a new one only when "
            "none does. Do not repeat the entry's current tags. One or two words "
            "per tag, joined with '-'.\n"
            f"Vocabulary: {vocab}\n"
            f"Current tags: {', '.join(existing) or '(none)'}\n"
            f"Title: {title.strip()}\n"
            f"Content:\n{_clip(content, _CONTENT_CHARS)}\n\n"
            'Reply as {"tags": ["...", "..."]}. ' + _JSON_ONLY
        )
        value = _parse_json(self._ask(prompt, model or self.fast_model, 120, deadline))
        seen = {t.casefold() for t in existing}
        out: list[str] = []
        for item in _list_field(value, "tags"):
            if not isinstance(item, str):
                continue
            tag = "-".join(item.lower().split())
            if _TAG_RE.match(tag) and tag not in seen:
                seen.add(tag)
                out.append(tag)
        if not out:
            raise AdvisorError("malformed output")
        return out[:_TAGS_MAX]

    def contradictions(
        self,
        new: Candidate,
        olds: list[Candidate],
        *,
        model: str | None = None,
        deadline: float | None = None,
    ) -> list[int]:
        """Ids among `olds` that `new` directly contradicts or makes obsolete (often none)."""
        self._check_ready(deadline)
        ids = [c.id for c in olds if c.id != new.id]
        if not ids:
            return []
        prompt = (
            "A NEW memory entry was just stored. Which OLD entries does it directly "
            "contradict or make obsolete, so that they are no longer true? Only "
            "count a direct conflict about the same subject (a changed value, "
            "decision or fact). Related, overlapping, more detailed or merely "
            "different entries are NOT contradictions. When in doubt, leave it "
            "out; the usual answer is an empty list.\n\n"
            f"NEW:\n{_format_candidates([new])}\n\n"
            f"OLD:\n{_format_candidates([c for c in olds if c.id != new.id])}\n\n"
            'Reply as {"ids": [...]} (ids of OLD entries, or []). ' + _JSON_ONLY
        )
        value = _parse_json(self._ask(prompt, model or self.strong_model, 200, deadline))
        return _known_ids(_list_field(value, "ids"), ids)

    def name_cluster(
        self,
        tags: list[str],
        titles: list[str],
        *,
        model: str | None = None,
        deadline: float | None = None,
    ) -> tuple[str, str]:
        """A 1-3 word Title Case name and a one-line description for a cluster of entries."""
        self._check_ready(deadline)
        listed = "\n".join(f"- {_clip(t, 200)}" for t in titles[:30])
        prompt = (
            "These memory entries form one topic. Name it in 1 to 3 words, Title "
            "Case, and describe it in one short sentence.\n"
            f"Tags: {', '.join(tags[:50])}\n"
            f"Entry titles:\n{listed}\n\n"
            'Reply as {"name": "...", "description": "..."}. ' + _JSON_ONLY
        )
        value = _parse_json(self._ask(prompt, model or self.fast_model, 150, deadline))
        if not isinstance(value, dict):
            raise AdvisorError("malformed output")
        name, description = value.get("name"), value.get("description")
        if not isinstance(name, str) or not isinstance(description, str):
            raise AdvisorError("malformed output")
        words = name.strip().strip("\"'.").split()
        description = description.strip()
        if not 1 <= len(words) <= _NAME_WORDS_MAX or not description:
            raise AdvisorError("malformed output")
        if "\n" in description or len(description) > _DESCRIPTION_CHARS:
            raise AdvisorError("malformed output")
        # Upper-case only first letters, so acronyms ("API") survive.
        return " ".join(w[:1].upper() + w[1:] for w in words), description

    def extract_facts(
        self,
        entries: list[Candidate],
        predicates: list[str],
        aspects: list[str],
        *,
        model: str | None = None,
        deadline: float | None = None,
    ) -> list[ExtractedFact]:
        """Candidate subject-predicate-object facts stated in `entries` (often none).

        Items that are not well-typed, or cite an entry that was not shown,
        are dropped; a fully unusable answer is "malformed output". Aspect
        slugs come back as the model wrote them: the caller validates them.
        """
        self._check_ready(deadline)
        ids = {c.id for c in entries}
        prompt = (
            "Extract the lasting facts these memory entries state about the user or the world, as "
            "subject-predicate-object triples. Use \"user\" as the subject for the user. An entry \"said by\" "
            "someone speaks for them: its \"I\" is that person. \"(follows: ...)\" shows the turn an entry "
            "answers, only to make sense of it: take facts from the entries themselves, never from that "
            "line (\"Two, yes\" after \"Do you have cats?\" states the cats). Prefer these "
            f"predicates when one fits: {', '.join(predicates[:_VOCABULARY_MAX])}; otherwise invent a short "
            "snake_case one. Give each a confidence from 0 to 1 (how clearly the entry states it), the id of "
            f"the entry it comes from, and the aspects it belongs to among: {', '.join(aspects)}. Skip "
            "small talk, plans and anything uncertain; the usual answer is a few facts or none.\n\n"
            f"Entries:\n{_format_candidates(entries)}\n\n"
            'Reply as {"facts": [{"subject": "...", "predicate": "...", "object": "...", "confidence": 0.9, '
            '"source": <entry id>, "aspects": ["..."]}]}. ' + _JSON_ONLY
        )
        value = _parse_json(self._ask(prompt, model or self.strong_model, 1500, deadline))
        out: list[ExtractedFact] = []
        for item in _list_field(value, "facts"):
            try:
                fact = msgspec.convert(item, ExtractedFact)
            except msgspec.ValidationError:
                continue
            if fact.source in ids:
                out.append(fact)
        if not out and _list_field(value, "facts"):
            raise AdvisorError("malformed output")
        return out

    def entities(
        self,
        title: str,
        content: str,
        found: list[str],
        types: tuple[str, ...],
        *,
        model: str | None = None,
        deadline: float | None = None,
    ) -> list[tuple[str, str]]:
        """Named things an entry mentions that the lexical `found` names miss, as (name, type); often none.

        Names are 1-128 characters on one line; a type outside `types` becomes
        "other"; a name already in `found` (any case) or given twice is dropped.
        """
        self._check_ready(deadline)
        prompt = (
            "List the named things this memory entry mentions that the list of names already found "
            "misses: people, organisations, projects, places, tools, events and named concepts. "
            "Use each name as the entry writes it. Skip generic words, pronouns and anything already "
            "found; the usual answer is a few names or none.\n"
            f"Types: {', '.join(types)}\n"
            f"Already found: {', '.join(found) or '(none)'}\n"
            f"Title: {title.strip()}\n"
            f"Content:\n{_clip(content, _CONTENT_CHARS)}\n\n"
            'Reply as {"entities": [{"name": "...", "type": "..."}]}. ' + _JSON_ONLY
        )
        value = _parse_json(self._ask(prompt, model or self.fast_model, 400, deadline))
        items = _list_field(value, "entities")
        seen = {" ".join(n.split()).casefold() for n in found}
        out: list[tuple[str, str]] = []
        named = 0  # items that carry a name at all: none of several is malformed, a known one is not
        for item in items:
            name, etype = (item.get("name"), item.get("type")) if isinstance(item, dict) else (item, None)
            if not isinstance(name, str):
                continue
            named += 1
            name = " ".join(name.split())
            if not 1 <= len(name) <= _ENTITY_NAME_MAX or _CONTROL.search(name) or name.casefold() in seen:
                continue
            seen.add(name.casefold())
            out.append((name, etype if etype in types else "other"))
        if items and not named:
            raise AdvisorError("malformed output")
        return out[:_ENTITIES_MAX]

    def links(
        self,
        new: Candidate,
        olds: list[tuple[Candidate, str]],
        relations: dict[str, str],
        *,
        model: str | None = None,
        deadline: float | None = None,
    ) -> list[tuple[int, str, int]]:
        """Which suggested links hold, as (source id, relation, target id); often none.

        `olds` are the entries suggested for linking with `new`, each with why
        it was suggested; `relations` maps each relation the model may use to
        its meaning. A link must join `new` and one of `olds` (either way
        round) with one of `relations`: anything else is dropped, and an
        answer with links but none of them usable is "malformed output".
        """
        self._check_ready(deadline)
        ids = {c.id for c, _ in olds if c.id != new.id}
        if not ids:
            return []
        vocabulary = "\n".join(f"- {name}: {meaning}" for name, meaning in relations.items())
        suggested = "\n\n".join(
            f"{_format_candidates([c])}\nSuggested because: {_clip(why, _DESCRIPTION_CHARS)}"
            for c, why in olds if c.id in ids
        )
        prompt = (
            "A NEW memory entry was just stored, and a cheap lexical pass suggested linking it with the OLD "
            "entries below. Judge each suggestion: link only when one of the relations truly holds between "
            "the two entries, in the direction you give (source relation target). Sharing words or a topic is "
            "not enough for anything but relates_to; a causal link needs one to be a reason for the other. "
            "When in doubt, leave it out; an empty list is a fine answer.\n"
            f"Relations:\n{vocabulary}\n\n"
            f"NEW:\n{_format_candidates([new])}\n\n"
            f"OLD:\n{suggested}\n\n"
            'Reply as {"links": [{"source": <id>, "relation": "...", "target": <id>}]} (one end is the NEW '
            "entry's id, the other an OLD entry's id), or {\"links\": []}. " + _JSON_ONLY
        )
        value = _parse_json(self._ask(prompt, model or self.strong_model, 300, deadline))
        items = _list_field(value, "links")
        out: list[tuple[int, str, int]] = []
        for item in items:
            if not isinstance(item, dict):
                continue
            source, relation, target = _as_id(item.get("source")), item.get("relation"), _as_id(item.get("target"))
            if not isinstance(relation, str) or relation not in relations:
                continue
            # One end is the new entry, the other an entry that was shown as a suggestion.
            other = target if source == new.id else source if target == new.id else None
            if other is None or other not in ids:
                continue
            if (source, relation, target) not in out:
                out.append((source, relation, target))
        if items and not out:
            raise AdvisorError("malformed output")
        return out

    # -- transport -----------------------------------------------------------

    def _check_ready(self, deadline: float | None) -> None:
        if self.api_key is None:
            raise AdvisorError("no API key")
        if deadline is not None and deadline - time.monotonic() <= 0:
            raise AdvisorError("deadline passed")

    def _get_client(self) -> anthropic.Anthropic:
        with self._client_lock:
            if self._client is None:
                import anthropic

                # Retries are ours (below), not the SDK's: the SDK would retry
                # with the full timeout each time and overrun the deadline. An
                # explicit base_url keeps the SDK from reading ANTHROPIC_BASE_URL
                # itself: config is read at the edges only.
                self._client = anthropic.Anthropic(
                    api_key=self.api_key,
                    base_url=self.base_url or "https://api.anthropic.com",
                    max_retries=0,
                )
            return self._client

    def _ask(self, prompt: str, model: str, max_tokens: int, deadline: float | None) -> str:
        """One question, one text answer, within the budget; retries are bounded."""
        import anthropic

        client = self._get_client()
        attempt = 0
        while True:
            try:
                message = client.messages.create(
                    model=model,
                    max_tokens=max_tokens,
                    system="You help a memory store for AI agents. " + _JSON_ONLY,
                    messages=[{"role": "user", "content": prompt}],
                    timeout=self._timeout_for(deadline),
                )
            except (anthropic.APIConnectionError, anthropic.APIStatusError) as exc:
                error, retryable = _failure(exc)
                if (
                    not retryable
                    or attempt >= self.max_retries
                    or not self._sleep_before_retry(attempt, _retry_after(exc), deadline)
                ):
                    raise error from exc
                attempt += 1
                continue
            return "".join(b.text for b in message.content if b.type == "text")

    def _timeout_for(self, deadline: float | None) -> float:
        if deadline is None:
            return self.timeout_s
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AdvisorError("deadline passed")
        return min(self.timeout_s, remaining)

    def _sleep_before_retry(
        self, attempt: int, retry_after: float | None, deadline: float | None
    ) -> bool:
        """Wait before retry `attempt`; False when the wait would not fit the budget."""
        wait = min(_BACKOFF_S * 2**attempt, self.timeout_s)
        if retry_after is not None:
            if retry_after > self.timeout_s:
                return False
            wait = max(wait, retry_after)
        if deadline is not None and time.monotonic() + wait >= deadline:
            return False
        time.sleep(wait)
        return True


# -- parsing helpers ---------------------------------------------------------


def _parse_json(text: str) -> Any:
    """The first JSON object or array in `text` (prose and code fences around it are skipped)."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        return value
    raise AdvisorError("malformed output")


def _list_field(value: Any, key: str) -> list[Any]:
    """`value[key]` when it is a list; a bare list is accepted too (models drop the wrapper)."""
    if isinstance(value, dict):
        value = value.get(key)
    if not isinstance(value, list):
        raise AdvisorError("malformed output")
    return value


def _known_ids(items: list[Any], allowed: list[int]) -> list[int]:
    """Items that are ids in `allowed`, first occurrence only, in the model's order."""
    allowed_set = set(allowed)
    out: list[int] = []
    for item in items:
        if isinstance(item, str) and item.strip().isdigit():
            item = int(item.strip())
        # bool is an int subclass; `true` is not an id.
        if isinstance(item, int) and not isinstance(item, bool):
            if item in allowed_set and item not in out:
                out.append(item)
    return out


def _as_id(item: Any) -> int | None:
    """An entry id as the model wrote it (a number, or a string of digits); None otherwise."""
    if isinstance(item, str) and item.strip().lstrip("#").isdigit():
        return int(item.strip().lstrip("#"))
    return item if isinstance(item, int) and not isinstance(item, bool) else None


def _format_candidates(candidates: list[Candidate]) -> str:
    """One block per candidate: its id, `(type · date · superseded|current · said by …)`, the turn it follows, its text."""
    lines = []
    for c in candidates:
        meta = [c.type, c.date, "superseded" if c.superseded else "current"]
        if c.speaker:
            meta.append(f"said by {c.speaker}")
        block = f"[id {c.id}] ({' · '.join(meta)})\n"
        if c.follows:
            block += f"(follows: {c.follows.strip()})\n"
        lines.append(block + c.text.strip())
    return "\n\n".join(lines)


def _clip(text: str, limit: int) -> str:
    """`text` stripped and cut to `limit` characters (an ellipsis marks the cut)."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _failure(exc: Exception) -> tuple[AdvisorError, bool]:
    """The AdvisorError for an SDK exception, and whether a retry may help."""
    import anthropic

    # Order matters: APITimeoutError is an APIConnectionError, and
    # RateLimitError / InternalServerError are APIStatusErrors.
    if isinstance(exc, anthropic.APITimeoutError):
        return AdvisorError("timeout"), True
    if isinstance(exc, anthropic.APIConnectionError):
        return AdvisorError("connection failed"), True
    if isinstance(exc, anthropic.RateLimitError):
        return AdvisorError("rate limited (429)"), True
    if isinstance(exc, anthropic.InternalServerError):
        return AdvisorError(f"server error ({exc.status_code})"), True
    if isinstance(exc, anthropic.APIStatusError):
        # Other 4xx (bad key, unknown model, bad request): a retry cannot help.
        return AdvisorError(f"api error ({exc.status_code})"), False
    raise TypeError(f"not an SDK request error: {exc!r}")


def _retry_after(exc: Exception) -> float | None:
    """Seconds from the response's `retry-after` header; None when absent or not a number."""
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
