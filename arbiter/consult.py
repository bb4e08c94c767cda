"""Asking the daemon's advisor (the optional LLM) from a verb, one way: every feature says the same two things.

A feature that uses the advisor degrades to what it does without it, and its
answer says why in one note: "<what> skipped: no ANTHROPIC_API_KEY on the
daemon" or "<what> failed (<reason>)", each followed by what that leaves
("nothing linked"). The advisor module (and the anthropic SDK behind it) is
imported only when a key is set, so a daemon without one never loads it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from arbiter.advisor import Advisor

T = TypeVar("T")

NO_KEY = "no ANTHROPIC_API_KEY on the daemon"


def skipped(what: str, leaves: str = "") -> str:
    """The note of a feature the daemon has no advisor for."""
    return f"{what} skipped: {NO_KEY}{leaves}"


def consult(advisor: Advisor | None, notes: list[str], what: str, ask: Callable[[Advisor], T], *,
            leaves: str = "") -> T | None:
    """`ask(advisor)`, or None with a note in `notes` when there is no advisor or its call fails.

    `what` names the feature as the caller asked for it (`auto_link`); `leaves` says what its absence leaves
    (": nothing linked").
    """
    if advisor is None:
        notes.append(skipped(what, leaves))
        return None
    from arbiter.advisor import AdvisorError

    try:
        return ask(advisor)
    except AdvisorError as e:
        notes.append(f"{what} failed ({e.reason}){leaves}")
        return None
