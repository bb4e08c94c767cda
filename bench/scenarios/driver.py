"""The driver: one scenario run, a model talking to `arbiter mcp` through tool use, recorded event by event.

The MCP side is the official SDK client on a real `arbiter mcp` process
(stdio) as the scenario's user; the model side is the `anthropic` SDK's
Messages API with the server's tools handed over as they are listed. With a
key that is the real API; with `--fake` the same client is pointed at the
local fake Messages server, whose scripted agent answers in the API's own
shapes, so both paths run this code.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal

import anthropic
import msgspec
from mcp import ClientSession, StdioServerParameters, stdio_client

#: What the model is told before the briefing, in every mode.
PREAMBLE = (
    "You are a coding assistant for a small engineering team. You have a long-term memory shared with your "
    "team, reached through the tools you are given. The person talking to you is the memory's user."
)
BRIEFINGS = ("full", "flat-tags", "none")
MAX_TURNS = 12
MAX_TOKENS = 2048


class Event(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One thing that happened in a run, in order."""

    kind: Literal["system", "user", "assistant", "tool_call", "tool_result"]
    text: str = ""
    tool: str | None = None
    call_id: str | None = None
    args: dict[str, Any] | None = None
    #: A tool result's structured content, as the server sent it.
    structured: Any = None
    is_error: bool = False


class Usage(msgspec.Struct, kw_only=True):
    """What a run cost: Messages requests, the tokens the API reported, and the characters sent."""

    requests: int = 0
    input_tokens: int = 0
    #: Input read from, and written to, the prompt cache (the tools and the system prompt repeat every request).
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    request_chars: int = 0

    def count(self, usage: object) -> None:
        """Add the token counts of one reply's `usage`."""
        self.input_tokens += getattr(usage, "input_tokens", 0) or 0
        self.output_tokens += getattr(usage, "output_tokens", 0) or 0
        self.cache_read_tokens += getattr(usage, "cache_read_input_tokens", 0) or 0
        self.cache_write_tokens += getattr(usage, "cache_creation_input_tokens", 0) or 0

    def add(self, other: Usage) -> None:
        for f in self.__struct_fields__:
            setattr(self, f, getattr(self, f) + getattr(other, f))


class Transcript(msgspec.Struct, kw_only=True):
    scenario: str
    rep: int
    model: str
    briefing: str
    events: list[Event] = []
    usage: Usage = msgspec.field(default_factory=Usage)
    #: Set when the run stopped early (turn limit, an API error): the assertions still run on what happened.
    error: str | None = None

    def calls(self) -> list[tuple[Event, Event | None]]:
        """Each tool call with its result (None if the run stopped before it came)."""
        results = {e.call_id: e for e in self.events if e.kind == "tool_result"}
        return [(e, results.get(e.call_id)) for e in self.events if e.kind == "tool_call"]

    def final_text(self) -> str:
        """The model's last words to the user."""
        texts = [e.text for e in self.events if e.kind == "assistant" and e.text]
        return texts[-1] if texts else ""


def system_prompt(instructions: str, mode: str) -> str:
    """The system prompt for a briefing mode: the server's briefing, its tag list alone, or nothing.

    `flat-tags` is the seed's baseline (§6, iteration 0): who you are and a
    flat tag list, without conventions, guidance, topic map or open threads.
    """
    if mode == "full":
        return f"{PREAMBLE}\n\n{instructions}"
    if mode == "none":
        return PREAMBLE
    if mode != "flat-tags":
        raise ValueError(f"briefing must be one of {', '.join(BRIEFINGS)}, not {mode!r}")
    identity = _section(instructions, "## 1.")
    vocabulary = [line for line in _section(instructions, "## 2.").splitlines() if line.startswith("- Tag vocabulary")]
    if not identity or not vocabulary:
        raise ValueError("flat-tags: the briefing has no identity section or tag vocabulary line to keep")
    return f"{PREAMBLE}\n\n# Memory briefing\n\n{identity}\n\n## Tags\n{vocabulary[0]}"


def _section(text: str, heading: str) -> str:
    start = text.find(f"\n{heading}")
    if start < 0:
        return ""
    end = text.find("\n## ", start + 1)
    return text[start + 1 : end if end > 0 else len(text)].strip()


def server_params(home: Path, token_file: Path) -> StdioServerParameters:
    """`arbiter mcp` as the user `token_file` names, on the daemon of `home`, with no key of the shell's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARBITER_", "ANTHROPIC_"))}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "arbiter", "mcp", "--home", str(home), "--token-file", str(token_file)],
        env=env,
    )


async def drive(
    *,
    server: StdioServerParameters,
    model_client: anthropic.AsyncAnthropic,
    model: str,
    turns: list[str],
    briefing: str,
    scenario: str,
    rep: int,
    errlog: Any = sys.stderr,
) -> Transcript:
    """Run one scenario's user turns against the model until it stops calling tools, recording everything."""
    t = Transcript(scenario=scenario, rep=rep, model=model, briefing=briefing)
    async with stdio_client(server, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        system = system_prompt(init.instructions or "", briefing)
        t.events.append(Event(kind="system", text=system))
        listed = await session.list_tools()
        tools = [{"name": x.name, "description": x.description or "", "input_schema": x.input_schema}
                 for x in listed.tools]
        # The tools and the system prompt are the bulk of every request (about 38 KB and 5.5 KB of its 44 KB
        # with today's 38 tools and the full briefing): one cache breakpoint after each makes a repeat a cache read.
        tools[-1]["cache_control"] = {"type": "ephemeral"}
        messages: list[dict[str, Any]] = []
        for turn in turns:
            t.events.append(Event(kind="user", text=turn))
            messages.append({"role": "user", "content": turn})
            if not await _converse(session, model_client, model, system, tools, messages, t):
                break
    return t


async def _converse(session: ClientSession, model_client: anthropic.AsyncAnthropic, model: str, system: str,
                    tools: list[dict[str, Any]], messages: list[dict[str, Any]], t: Transcript) -> bool:
    """One user turn: ask, run the tools the model calls, ask again, until it answers. False if it never did."""
    for _ in range(MAX_TURNS):
        request = {"model": model, "max_tokens": MAX_TOKENS, "tools": tools, "messages": messages,
                   "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]}
        t.usage.requests += 1
        t.usage.request_chars += len(msgspec.json.encode(request))
        try:
            reply = await model_client.messages.create(**request)
        except anthropic.APIError as e:
            t.error = f"messages API: {type(e).__name__}: {e}"
            return False
        t.usage.count(reply.usage)
        messages.append({"role": "assistant", "content": [_echo(block) for block in reply.content]})
        text = "\n".join(b.text for b in reply.content if b.type == "text")
        uses = [b for b in reply.content if b.type == "tool_use"]
        if text or not uses:
            t.events.append(Event(kind="assistant", text=text))
        if not uses:
            return True
        results = []
        for use in uses:
            t.events.append(Event(kind="tool_call", tool=use.name, call_id=use.id, args=dict(use.input)))
            result = await session.call_tool(use.name, dict(use.input))
            out = "\n".join(b.text for b in result.content if b.type == "text")
            t.events.append(Event(kind="tool_result", tool=use.name, call_id=use.id, text=out,
                                  structured=result.structured_content, is_error=bool(result.is_error)))
            results.append({"type": "tool_result", "tool_use_id": use.id, "content": out or "(empty)",
                            "is_error": bool(result.is_error)})
        messages.append({"role": "user", "content": results})
    t.error = f"no answer after {MAX_TURNS} model turns"
    return False


def _echo(block: Any) -> dict[str, Any]:
    """A reply's content block as it goes back in the next request: the fields a request takes, no more."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return block.model_dump(exclude_none=True)  # thinking blocks go back whole, signature and all
