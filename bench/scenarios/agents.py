"""Scripted agents for `--fake`: what the fake Messages server answers in place of a model.

An agent reads each request as a model would (the system prompt holding the
briefing, the user's turn, its own earlier tool calls and their results) and
answers with tool calls or a final text, in the API's own content blocks.
It keeps no state of its own between requests.

- `careful` follows the briefing: it takes ids, tags and topics from it (or
  looks them up when the briefing does not carry them), reads before it
  writes, replies to the open thread by its id, reuses the vocabulary,
  links and supersedes.
- `careless` ignores it: it answers questions without looking and files
  every request as a new entry with tags of its own.
- `meddler` reads, then does the wrong thing with what it found: edits
  entries in place (a teammate's too), replies where a new memory belongs,
  writes while answering a question, writes twice. It fails the
  assertions the careless agent never reaches, for the scenarios in
  `MEDDLES`.

The judge's model gets `judge_reply`, a verdict shaped as the judge's prompt
asks, built from the rubric questions the request carries.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.scenarios import tools
from bench.scenarios.tools import Call

Act = list[Call] | str


@dataclass
class View:
    """One Messages request, as the agent reads it."""

    system: str
    prompt: str
    #: (action, args, result text, is_error) for each earlier call, in order (`tools.action`: a reply, a view).
    steps: list[tuple[str, dict[str, Any], str, bool]] = field(default_factory=list)

    @classmethod
    def of(cls, body: dict[str, Any]) -> View:
        system = body.get("system") or ""
        if isinstance(system, list):
            system = "\n".join(b.get("text", "") for b in system)
        messages = body["messages"]
        prompt = messages[0]["content"] if isinstance(messages[0]["content"], str) else ""
        calls: dict[str, tuple[str, dict[str, Any]]] = {}
        steps = []
        for m in messages[1:]:
            for block in m["content"] if isinstance(m["content"], list) else []:
                if block.get("type") == "tool_use":
                    calls[block["id"]] = (block["name"], block["input"])
                elif block.get("type") == "tool_result":
                    name, args = calls[block["tool_use_id"]]
                    content = block.get("content")
                    text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content or [])
                    steps.append((tools.action(name, args), args, text, bool(block.get("is_error"))))
        return cls(system, prompt, steps)

    def called(self, name: str) -> bool:
        return any(s[0] == name and not s[3] for s in self.steps)

    def tried(self, name: str) -> bool:
        """Called `name`, whether or not it succeeded."""
        return any(s[0] == name for s in self.steps)

    def result(self, name: str) -> str:
        return next((s[2] for s in reversed(self.steps) if s[0] == name and not s[3]), "")

    def seen(self) -> str:
        """Everything the agent has read: the system prompt and every result."""
        return "\n".join([self.system, *(s[2] for s in self.steps)]).replace("**", "")

    def find(self, title: str) -> int | None:
        """The `#ID` on the first line (briefing or result) that names `title`."""
        for line in self.seen().splitlines():
            if title.lower() in line.lower() and (m := re.search(r"#(\d+)", line)):
                return int(m.group(1))
        return None

    def tags(self, wanted: list[str]) -> list[str]:
        """The wanted tags that the agent has seen in use (a backticked tag, or one in a result's tag list)."""
        text = self.seen()
        return [t for t in wanted if f"`{t}`" in text or re.search(rf"tags: [^)\]]*\b{re.escape(t)}\b", text)]


class _Need(Exception):
    """The agent must read before it can go on: these calls first."""

    def __init__(self, *calls: Call):
        self.calls = list(calls)


def _locate(v: View, title: str, query: str) -> int:
    """The id of the entry titled `title`: from the briefing or a result, else after a recall for it."""
    found = v.find(title)
    if found is None:
        if not any(s[0] == tools.RECALL and s[1].get("query") == query for s in v.steps):
            raise _Need(tools.recall(query))
        raise LookupError(f"careful agent: no entry titled {title!r} in the briefing or the recall results")
    return found


def _read_first(v: View, query: str) -> None:
    if not any(s[0].partition(":")[0] in tools.READS for s in v.steps):
        raise _Need(tools.recall(query))


def _written_id(v: View, name: str) -> int:
    m = re.search(r"#(\d+)", v.result(name))
    if not m:
        raise LookupError(f"careful agent: the {name} result names no id")
    return int(m.group(1))


def _topics(v: View) -> list[str]:
    """The topic map's clusters as 'name (tags)', from the briefing or a topic_clusters result."""
    text = v.seen()
    briefing = re.findall(r"^- \*{0,2}([^*\n]+?)\*{0,2} \(\d+ entries\):.*?Tags: (.+)$", text, re.M)
    listed = re.findall(r"^- ([^\n(]+?) \(\d+ entries\):.*\[tags: (.+)\]$", text, re.M)
    return [f"{name} ({tags.replace('`', '')})" for name, tags in briefing or listed]


def careful(key: str, v: View) -> Act:
    """The scripted agent that follows the briefing, for scenario `key`."""
    if key == "reply-to-thread":
        if not v.called(tools.REPLY):
            parent = _locate(v, "Sessions expire after 5 minutes on Safari", "Safari sessions expire")
            return [tools.reply(parent, "Secure flag fix deployed to staging; sessions now survive the whole hour.")]
        return "Added to the Safari sessions thread."
    if key == "new-memory":
        _read_first(v, "office move floor")
        if not v.called(tools.REMEMBER):
            return [tools.remember(type="context", title="Office moves to the 4th floor on 3 December",
                                   content="The office moves to the 4th floor on 3 December; desks packed by the "
                                           "evening of 2 December.", tags=v.tags(["office"]))]
        return f"Recorded as #{_written_id(v, tools.REMEMBER)}."
    if key == "cluster-recall":
        if not v.called(tools.TOPIC_CLUSTER) and not v.called(tools.RECALL):
            return [tools.topic_cluster("rollback") if v.tags(["rollback"]) else tools.recall("rollback runbook")]
        return _rollback_summary(v)
    if key == "teammate-thread":
        if not v.called(tools.REPLY):
            parent = _locate(v, "Deadlock between invoice and payment writers", "deadlock invoice payment")
            return [tools.reply(parent, "The lock-order fix ran a full week in production with no deadlocks; the "
                                        "flag can be removed.")]
        return "Added to Raj's deadlock thread."
    if key == "tag-conventions":
        _read_first(v, "CSV export invoices timeout")
        if not v.called(tools.REMEMBER):
            return [tools.remember(type="project", title="CSV export times out above 10k invoices",
                                   content="CSV export times out for accounts with more than 10k invoices.",
                                   tags=v.tags(["eng", "p1", "area:api", "bug"]))]
        return f"Filed as #{_written_id(v, tools.REMEMBER)}."
    if key == "no-duplicate":
        existing = _locate(v, "Slow customer lookup by email", "customers email index")
        return f"Already recorded as #{existing} (Slow customer lookup by email); nothing new to add."
    if key == "cross-reference":
        target = _locate(v, "Rate-limit the public API per token", "rate limit per token")
        if not v.called(tools.REMEMBER):
            return [tools.remember(type="project", title="Webhook retries go through the per-token rate limiter",
                                   content=f"Retries must respect the per-token bucket of #{target}, so a burst of "
                                           "retries cannot lock a customer out.",
                                   tags=v.tags(["eng", "p2", "area:api", "feature"]))]
        new = _written_id(v, tools.REMEMBER)
        if not v.called(tools.LINK):
            return [tools.link(new, "refines", target)]
        return f"Recorded as #{new}, linked to #{target}."
    if key == "supersede":
        old = _locate(v, "Runbook: roll back a bad release", "roll back a bad release")
        if not v.called(tools.REMEMBER):
            return [tools.remember(type="reference", title="Runbook: roll back a bad release",
                                   content="Run make rollback TAG=<release-tag>; the health check runs "
                                           "automatically. Post in #incidents.",
                                   tags=v.tags(["runbook", "ops", "oncall", "rollback"]), supersedes=[old])]
        return f"The new procedure is #{_written_id(v, tools.REMEMBER)}; #{old} is retired and kept in history."
    if key == "topics-from-briefing":
        topics = _topics(v)
        if not topics and not v.called(tools.TOPIC_CLUSTERS):
            return [tools.topic_clusters()]
        return "Your memory covers: " + "; ".join(topics)
    if key == "cluster-vocabulary":
        if not v.called(tools.REPLY):
            parent = _locate(v, "Runbook: Postgres failover", "Postgres failover runbook")
            return [tools.reply(parent, "After a failover, drain the job queue before restarting the workers, or "
                                        "jobs run twice.")]
        return "Added to the Postgres failover runbook."
    raise KeyError(f"careful agent: no script for scenario {key!r}")


def _rollback_summary(v: View) -> str:
    """What the rollback runbooks say, from the last topic_cluster or recall result."""
    lines = (v.result(tools.TOPIC_CLUSTER) or v.result(tools.RECALL)).replace("**", "").splitlines()
    said = [body.strip() for head, body in itertools.pairwise(lines)
            if head.startswith("- #") and "roll back" in head.lower()]
    return "The rollback runbooks say: " + " ".join(said) if said else "No rollback runbook found."


def careless(key: str, v: View) -> Act:
    """The scripted agent that ignores the briefing: never reads, files everything new, invents tags."""
    if v.prompt.rstrip().endswith("?") or v.prompt.lower().startswith(("what", "which")):
        return "I don't have that to hand."
    if not v.called(tools.REMEMBER):
        title = v.prompt.split(":")[-1].split(".")[0].strip()[:120]
        return [tools.remember(type="project", title=title, content=v.prompt, tags=["note", "todo"])]
    return "Saved."


def meddler(key: str, v: View) -> Act:
    """The scripted agent that reads and then misuses what it read, for the scenarios in MEDDLES."""
    if key == "new-memory":
        if not v.called(tools.REPLY):
            thread = re.search(r"#(\d+)", v.system[v.system.index("## 5. Open threads"):])
            return [tools.reply(int(thread.group(1)), v.prompt)]
        return "Noted."
    if key == "cluster-recall":
        if not v.called(tools.TOPIC_CLUSTER):
            return [tools.topic_cluster("rollback")]
        if not v.called(tools.REMEMBER):
            return [tools.remember(type="context", title="Rollback summary", content=_rollback_summary(v),
                                   tags=["runbook"])]
        return _rollback_summary(v)
    if key in ("teammate-thread", "cross-reference"):
        title = {"teammate-thread": "Deadlock between invoice and payment writers",
                 "cross-reference": "Rate-limit the public API per token"}[key]
        if not v.tried(tools.UPDATE):
            return [tools.update(_locate(v, title, title), v.prompt)]
        return "Updated the entry."
    if key == "cluster-vocabulary":
        parent = _locate(v, "Runbook: Postgres failover", "Postgres failover runbook")
        if not v.called(tools.REPLY):
            return [tools.reply(parent, v.prompt)]
        if not v.called(tools.REMEMBER):
            return [tools.remember(type="reference", title="Drain the queue after a failover",
                                   content="Drain the job queue before restarting the workers after a failover.",
                                   tags=["runbook", "ops", "oncall", "incident"])]
        return "Noted, twice to be safe."
    raise KeyError(f"meddler: no script for scenario {key!r} (it has {', '.join(MEDDLES)})")


MEDDLES = ("new-memory", "cluster-recall", "teammate-thread", "cross-reference", "cluster-vocabulary")
AGENTS: dict[str, Callable[[str, View], Act]] = {"careful": careful, "careless": careless, "meddler": meddler}


def judge_reply(body: dict[str, Any]) -> str:
    """A well-formed verdict for the judge's request: every rubric question answered 'yes'."""
    prompt = body["messages"][0]["content"]
    questions = re.findall(r"^\d+\. (.+)$", prompt.split("The run:")[0], re.M)
    answers = [{"question": q, "verdict": "yes", "why": "scripted judge"} for q in questions]
    return json.dumps({"answers": answers, "score": 10})


_ids = itertools.count(1)


def content(act: Act) -> tuple[tuple[dict[str, Any], ...], str]:
    """An agent's act as the API's content blocks and stop reason."""
    if isinstance(act, str):
        return ({"type": "text", "text": act},), "end_turn"
    blocks = tuple({"type": "tool_use", "id": f"toolu_fake_{next(_ids):05d}", "name": name, "input": args}
                   for name, args in act)
    return blocks, "tool_use"


def act(agent: Callable[[str, View], Act], key: str, body: dict[str, Any]) -> Act:
    """What `agent` does next in scenario `key`, given the request `body`."""
    view = View.of(body)
    try:
        return agent(key, view)
    except _Need as need:
        return need.calls
