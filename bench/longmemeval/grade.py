"""Answer accuracy: a generator answers from the recalled turns, a judge grades it.

The judge prompts follow LongMemEval's `evaluate_qa` (one per question type,
plus abstention). The paper's judge is GPT-4o; ours is a Claude model, so
accuracy here is close to, not identical with, published accuracy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec

from bench.longmemeval.dataset import Dataset, Question, parse_date, parse_source, plan
from bench.longmemeval.harness import QuestionState, UnitState

if TYPE_CHECKING:
    import anthropic

    from arbiter.client import Client

GENERATE = (
    "I will give you several history chats between you and a user. "
    "Please answer the question based on the relevant chat history.\n\n\n"
    "History Chats:\n\n{history}\n\nCurrent Date: {date}\nQuestion: {question}\nAnswer:"
)
_CORRECT = (
    "I will give you a question, a correct answer, and a response from a model. "
    "Please answer yes if the response contains the correct answer. Otherwise, answer no. "
    "If the response is equivalent to the correct answer or contains all the intermediate steps "
    "to get the correct answer, you should also answer yes. If the response only contains a subset "
    "of the information required by the answer, answer no. {extra}\n\n"
    "Question: {question}\n\nCorrect Answer: {answer}\n\nModel Response: {response}\n\n"
    "Is the model response correct? Answer yes or no only."
)
_EXTRA = {
    "temporal-reasoning": (
        "In addition, do not penalize off-by-one errors for the number of days. If the question asks "
        "for the number of days/weeks/months, etc., and the model makes off-by-one errors (e.g., "
        "predicting 19 days when the answer is 18), the model's response is still correct."
    ),
    "knowledge-update": (
        "If the response contains some previous information along with an updated answer, the response "
        "should be considered as correct as long as the updated answer is the required answer."
    ),
}
_PREFERENCE = (
    "I will give you a question, a rubric for desired personalized response, and a response from a model. "
    "Please answer yes if the response satisfies the desired response. Otherwise, answer no. The model "
    "does not need to reflect all the points in the rubric. The response is correct as long as it recalls "
    "and utilizes the user's personal information correctly.\n\n"
    "Question: {question}\n\nRubric: {answer}\n\nModel Response: {response}\n\n"
    "Is the model response correct? Answer yes or no only."
)
_ABSTENTION = (
    "I will give you an unanswerable question, an explanation, and a response from a model. Please answer "
    "yes if the model correctly identifies the question as unanswerable. The model could say that the "
    "information is incomplete, or some other information is given but the asked information is not.\n\n"
    "Question: {question}\n\nExplanation: {answer}\n\nModel Response: {response}\n\n"
    "Does the model correctly identify the question as unanswerable? Answer yes or no only."
)


class Graded(msgspec.Struct, kw_only=True):
    """One question's generated answer and the judge's verdict."""

    question_id: str
    question_type: str
    abstention: bool
    response: str
    verdict: str
    correct: bool


class Accuracy(msgspec.Struct, kw_only=True):
    """Answer accuracy overall, per type and on abstention questions."""

    variant: str
    generator_model: str
    judge_model: str
    n: int
    accuracy: float | None
    by_type: dict[str, float | None]
    abstention: float | None
    questions: list[Graded]


def judge_prompt(q: Question, response: str) -> str:
    """LongMemEval's judge prompt for this question's type."""
    fields = {"question": q.question, "answer": q.answer, "response": response}
    if q.abstention:
        return _ABSTENTION.format(**fields)
    if q.question_type == "single-session-preference":
        return _PREFERENCE.format(**fields)
    return _CORRECT.format(extra=_EXTRA.get(q.question_type, ""), **fields)


def history(by_id: Mapping[str, Question], sources: Sequence[str | None]) -> str:
    """The recalled turns (by their harness keys), oldest first, as the generator reads them.

    `by_id` maps question ids to questions.
    """
    found: list[tuple[int, int, str]] = []
    for text in sources:
        parsed = parse_source(text) if text else None
        if parsed is None or parsed[0] not in by_id:
            continue  # not a turn of this dataset: nothing to show the generator
        qid, sid, i = parsed
        q = by_id[qid]
        j = q.haystack_session_ids.index(sid)
        turn = q.haystack_sessions[j][i]
        date = q.haystack_dates[j]
        found.append((parse_date(date), i, f"### Session Date: {date}\n{turn.role}: {turn.content}"))
    return "\n\n".join(block for _, _, block in sorted(found))


def _ask(api: anthropic.Anthropic, model: str, prompt: str, max_tokens: int) -> str:
    message = api.messages.create(model=model, max_tokens=max_tokens, messages=[{"role": "user", "content": prompt}])
    return "".join(block.text for block in message.content if block.type == "text").strip()


def grade(
    client: Client,
    api: anthropic.Anthropic,
    dataset: Dataset,
    questions: Sequence[QuestionState],
    units: Sequence[UnitState],
    *,
    variant: str,
    recall_kwargs: Callable[[QuestionState], dict[str, object]],
    generator_model: str,
    judge_model: str,
    progress: Callable[[int], None] = lambda n: None,
) -> Accuracy:
    """Recall, generate and judge each question; sequential, one question at a time."""
    by_id = {q.question_id: q for q in dataset.questions}
    # Which turn an entry is comes from the harness's state, never from the entry.
    key_of = {
        eid: e.key
        for u in units
        if u.key in by_id
        for eid, e in zip(u.entry_ids, plan(by_id[u.key]).entries)
    }
    graded: list[Graded] = []
    for qs in questions:
        q = by_id[qs.question_id]
        hits = client.recall(**recall_kwargs(qs)).hits
        prompt = GENERATE.format(
            history=history(by_id, [key_of.get(h.id) for h in hits]), date=q.question_date or "unknown",
            question=q.question,
        )
        response = _ask(api, generator_model, prompt, 512)
        verdict = _ask(api, judge_model, judge_prompt(q, response), 10)
        graded.append(
            Graded(
                question_id=q.question_id,
                question_type=q.question_type,
                abstention=q.abstention,
                response=response,
                verdict=verdict,
                correct="yes" in verdict.lower(),
            )
        )
        progress(1)

    def share(xs: list[Graded]) -> float | None:
        return round(sum(g.correct for g in xs) / len(xs), 4) if xs else None

    types = sorted({g.question_type for g in graded})
    return Accuracy(
        variant=variant,
        generator_model=generator_model,
        judge_model=judge_model,
        n=len(graded),
        accuracy=share(graded),
        by_type={t: share([g for g in graded if g.question_type == t]) for t in types},
        abstention=share([g for g in graded if g.abstention]),
        questions=graded,
    )
