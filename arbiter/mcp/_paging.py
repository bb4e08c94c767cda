"""Paging for the MCP tools whose results page (`recall`, `list`, `history`, `thread`): a cursor, a budget in
characters for the whole result, and a page that keeps the lines it was fitted with."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from msgspec import Meta

from arbiter.errors import InvalidParams
from arbiter.mcp.tool import Session, View, fit

MaxChars = Annotated[int, Meta(ge=500, le=100_000, description=(
    "Budget for the whole result, in characters: hits beyond it move to the next page."))]
Cursor = Annotated[Annotated[str, Meta(max_length=32)] | None, Meta(description="The `next_cursor` of the previous page.")]

DEFAULT_MAX_CHARS = 8000
#: Cursors (recall's and history's) a session keeps; an older one is refused.
KEPT_CURSORS = 64
#: Room a paged result keeps for the lines around its items: a heading, a note, the footer naming the cursor.
FRAME_CHARS = 200


class Page(View, dict=True):
    """A page of results: `more` is true while another page waits behind `next_cursor`.

    The items' text is rendered once, while the page is fitted to `max_chars`
    (`fit_page`), and kept beside the Struct (`dict=True`: not structured
    content) for `text()`: rendering is most of this server's time on a recall.
    """

    more: bool
    next_cursor: str | None

    def footer(self) -> str:
        return f'\nmore: pass cursor "{self.next_cursor}" for the next page' if self.more else ""


def fit_page(page: Page, blocks: Iterable[list[str]], header: int, max_chars: int) -> int:
    """How many of `blocks` (each an item's lines) fit in `max_chars` after `header` characters (at least one,
    `tool.fit`); their lines are kept on `page`. Blocks are rendered only until one does not fit."""
    read: list[list[str]] = []

    def reading():
        for block in blocks:
            read.append(block)
            yield block

    n = fit(reading(), max_chars - header)
    page._lines = [line for block in read[:n] for line in block]
    return n


def page_offset(cursor: str | None) -> int:
    """The position a `cursor` this server returned points at (0 for none)."""
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise InvalidParams.at("cursor", "not a cursor this tool returned")
    return int(cursor)


def shown_before(s: Session, cursor: str | None, scope: tuple, *, again: str) -> frozenset:
    """The items the pages before `cursor` showed (none on a first page): a `shown_cursor` this session returned
    for the same `scope` (the tool and what it pages: a recall's query, a history's entry).

    A cursor of another scope is refused, not read as "nothing shown yet": its items would filter nothing, and
    the first page would come again. `again` says what to do instead ("search again").
    """
    if cursor is None:
        return frozenset()
    kept = s.cursors.get(cursor)
    if kept is None or kept[0] != scope:
        raise InvalidParams.at("cursor", f"not a cursor this session returned (or an old one): {again} without cursor")
    return kept[1]


def shown_cursor(s: Session, scope: tuple, shown: frozenset) -> str:
    """A cursor for the page after those that showed `shown`, kept on the session (the last `KEPT_CURSORS`).

    Recall ranks again for each page, and a write between pages moves the ranking (a new hit above the cut, the
    conversation the write started), so the next page is the best hits not shown yet, not "from position N":
    a position would repeat a hit that moved down and skip one that moved up. A history grows between pages
    the same way (a new supersede joins its chain).
    """
    s.pages += 1
    cursor = f"p{s.pages}"
    s.cursors[cursor] = (scope, shown)
    if len(s.cursors) > KEPT_CURSORS:
        del s.cursors[next(iter(s.cursors))]
    return cursor
