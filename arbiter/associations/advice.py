"""`auto_link`: the advisor judges `remember`'s link candidates; the ones it confirms become relations.

Candidates are found inside the write (they need the new entry's entity
links and neighbours), so the judging cannot run in `remember`'s prepare
step, and calling the model inside the write would hold the writer for
seconds. It is the verb's `finish` phase instead: once the entry has
committed, `judge` shows the model the new entry and its candidates on a
reader, and the links it confirms are made by a second, short write with
the same checks as the `link` verb. The entry stands whatever happens
after it: without an LLM key, or when the call fails, nothing is linked and
`note` says why.
"""

from __future__ import annotations

import time
from functools import partial

import msgspec

from arbiter.consult import consult, skipped
from arbiter.errors import ArbiterError
from arbiter.model import Remembered, RememberParams
from arbiter.recall import llm as llm_layers
from arbiter.store import relations
from arbiter.verb import Context, advisor_for

#: Seconds the advisor may take (on a reader, after the write has committed).
DEADLINE_S = 15.0
#: Bytes of each entry's text shown to the model.
EXCERPT = 1000
#: What the advisor may assert. Never `supersedes`: retiring an entry is
#: `auto_supersede`'s question, asked with its own cautious prompt.
LINKABLE = ("relates_to", "refines", "supports", "contradicts", "causes")


def judge(ctx: Context, p: RememberParams, result: Remembered):
    """Ask the advisor which of `result.candidates` hold; returns the write that links them (or only notes why not)."""
    if result.duplicate_of is not None:
        return partial(_noted, result, "auto_link: nothing was written, so nothing to link")
    if not result.candidates:
        return partial(_noted, result, "auto_link: no candidates to judge")
    advisor = advisor_for(ctx)
    if advisor is None:
        return partial(_noted, result, skipped("auto_link"))
    reasons: dict[int, str] = {}
    for c in result.candidates:
        reasons.setdefault(c.id, f"{c.kind}: {c.reason}")
    # Read again as the caller, on this snapshot: only entries they see are ever shown.
    shown = {s.id: s for s in llm_layers.shown(ctx.conn, ctx.viewer, [result.id, *reasons], EXCERPT)}
    new = shown.pop(result.id, None)
    olds = [(s, reasons[s.id]) for s in shown.values()]
    if new is None or not olds:
        return partial(_noted, result, "auto_link: no candidates to judge")
    meanings = {name: relations.REGISTRY[name].meaning for name in LINKABLE}
    notes: list[str] = []
    judged = consult(advisor, notes, "auto_link", lambda advisor: advisor.links(
        new, olds, meanings, deadline=time.monotonic() + DEADLINE_S), leaves=": nothing linked")
    if judged is None:
        return partial(_noted, result, notes[0])
    return partial(_link, result, judged)


def _noted(result: Remembered, note: str, ctx: Context) -> Remembered:
    return msgspec.structs.replace(result, note="; ".join(filter(None, [result.note, note])))


def _link(result: Remembered, judged: list[tuple[int, str, int]], ctx: Context) -> Remembered:
    """Make the confirmed links with `link`'s checks; one refused (a link that exists, an entry gone) is skipped."""
    linked, skipped = [], []
    for source, relation, target in judged:
        try:
            linked.append(relations.link(ctx.conn, ctx.viewer, source, relation, target, now=ctx.now))
        except ArbiterError as e:
            skipped.append(f"#{source} {relation} #{target} ({e.name})")
    said = []
    if linked:
        said.append("the advisor linked " + ", ".join(f"#{r.source_id} {r.relation} #{r.target_id}" for r in linked))
    if skipped:
        said.append("not linked: " + ", ".join(skipped))
    note = "auto_link: " + ("; ".join(said) if said else "the advisor confirmed no link")
    return msgspec.structs.replace(_noted(result, note, ctx), linked=linked)
