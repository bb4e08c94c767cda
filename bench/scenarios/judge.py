"""The judge: a strong model grades one run on its scenario's rubric, in strict JSON.

The reply is decoded into `Verdict` with msgspec. A reply that does not
decode is repaired in two steps: first the JSON object is cut out of the
text around it (a code fence, a sentence before it), then, if that fails
too, the judge is asked once more with the decoding error. A verdict that
still does not decode is recorded as a judge failure, never guessed.
"""

from __future__ import annotations

from typing import Annotated, Literal

import anthropic
import msgspec

from bench.scenarios.driver import Transcript, Usage
from bench.scenarios.scenarios import Scenario

SYSTEM = (
    "You grade how an AI assistant used a long-term memory during one task. You are given the task, the memory "
    "briefing the assistant saw, and everything it did: its messages, tool calls and the tool results. Answer "
    "each rubric question and give an overall score from 0 (harmful to the memory) to 10 (exactly what a careful "
    "teammate would do). Reply with one JSON object and nothing else, of this shape:\n"
    '{"answers": [{"question": "<the question>", "verdict": "yes" | "partly" | "no", "why": "<one sentence>"}], '
    '"score": <number 0-10>}'
)
MAX_TOKENS = 1500
#: Characters of one tool result shown to the judge: enough to see what came back, not a whole page.
RESULT_CHARS = 1200


class Answer(msgspec.Struct, forbid_unknown_fields=True):
    question: str
    verdict: Literal["yes", "partly", "no"]
    why: str = ""


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    answers: list[Answer]
    score: Annotated[float, msgspec.Meta(ge=0, le=10)]


class Judged(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The judge's outcome for one run: a verdict, or why there is none."""

    verdict: Verdict | None = None
    #: "clean", "extracted" (cut out of surrounding text) or "asked again".
    repair: str = "clean"
    error: str | None = None
    usage: Usage = msgspec.field(default_factory=Usage)


def render(t: Transcript) -> str:
    """The transcript as the judge reads it."""
    lines = []
    for e in t.events:
        if e.kind == "tool_call":
            lines.append(f"[tool call] {e.tool} {msgspec.json.encode(e.args).decode()}")
        elif e.kind == "tool_result":
            text = e.text if len(e.text) <= RESULT_CHARS else e.text[:RESULT_CHARS] + " …(cut)"
            lines.append(f"[tool result{' ERROR' if e.is_error else ''}] {text}")
        else:
            lines.append(f"[{e.kind}] {e.text}")
    return "\n\n".join(lines)


def prompt(scenario: Scenario, t: Transcript) -> str:
    questions = "\n".join(f"{i}. {q}" for i, q in enumerate(scenario.rubric, 1))
    return (f"Task under test: {scenario.tests_for}.\n\nRubric questions:\n{questions}\n\n"
            f"The run:\n\n{render(t)}")


def decode(text: str, questions: int) -> Verdict:
    """`text` as a Verdict answering `questions` questions; msgspec.ValidationError or DecodeError if not."""
    verdict = msgspec.json.decode(text.strip(), type=Verdict)
    if len(verdict.answers) != questions:
        raise msgspec.ValidationError(f"{len(verdict.answers)} answers for {questions} questions")
    return verdict


def _cut_object(text: str) -> str:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise msgspec.DecodeError("no JSON object in the reply")
    return text[start : end + 1]


async def judge(client: anthropic.AsyncAnthropic, model: str, scenario: Scenario, t: Transcript) -> Judged:
    """Grade run `t` of `scenario` with `model`."""
    out = Judged()
    messages = [{"role": "user", "content": prompt(scenario, t)}]
    text = await _ask(client, model, messages, out)
    if text is None:
        return out
    n = len(scenario.rubric)
    try:
        out.verdict = decode(text, n)
        return out
    except msgspec.MsgspecError as first:
        error = first
    try:
        out.verdict, out.repair = decode(_cut_object(text), n), "extracted"
        return out
    except msgspec.MsgspecError:
        pass
    messages += [{"role": "assistant", "content": text},
                 {"role": "user", "content": f"That reply could not be read ({error}). Reply again with the "
                                             "JSON object only, answering every question."}]
    again = await _ask(client, model, messages, out)
    if again is None:
        return out
    out.repair = "asked again"
    try:
        out.verdict = decode(_cut_object(again), n)
    except msgspec.MsgspecError as e:
        out.error = f"the judge's reply did not decode twice: {e}"
    return out


async def _ask(client: anthropic.AsyncAnthropic, model: str, messages: list, out: Judged) -> str | None:
    request = {"model": model, "max_tokens": MAX_TOKENS, "system": SYSTEM, "messages": messages}
    out.usage.requests += 1
    out.usage.request_chars += len(msgspec.json.encode(request))
    try:
        reply = await client.messages.create(**request)
    except anthropic.APIError as e:
        out.error = f"messages API: {type(e).__name__}: {e}"
        return None
    out.usage.count(reply.usage)
    return "".join(b.text for b in reply.content if b.type == "text")
