"""The briefing verb on a real daemon: LLM cluster names through the fake Messages API, cached across calls."""

from __future__ import annotations

import json
import re

from tests import corpus
from tests.conftest import DaemonProcess
from tests.fake_messages import FakeMessages

SECTIONS = ["## 1. Identity and totals", "## 2. Conventions", "## 3. Before you write", "## 4. Topic map",
            "## 5. Open threads", "## 6. Recent activity"]


def namer(request: dict) -> str:
    first = re.search(r"Tags: ([^,\n]+)", request["messages"][0]["content"])[1].split(":")[-1]
    return json.dumps({"name": f"{first} work", "description": f"Everything about {first}."})


def test_briefing_names_clusters_once_then_reads_the_cache(home, fake_messages: FakeMessages):  # noqa: F811
    fake_messages.set_script(namer)
    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake_messages.base_url}
    daemon = DaemonProcess(home, extra_env=env).start()
    try:
        with daemon.client() as c:
            corpus.build(c)
            first = c.briefing()
            calls = len(fake_messages.requests)
            second = c.briefing()
            clusters = c.topic_clusters().clusters
    finally:
        daemon.stop()
    assert calls == len(first.clusters) >= 3
    assert {cl.named_by for cl in first.clusters} == {"advisor"}
    assert "**Ticket Work**" in first.text and "Everything about ticket." in first.text
    # The names were cached by the first briefing: no more LLM calls.
    assert len(fake_messages.requests) == calls
    assert {cl.named_by for cl in second.clusters} == {"cache"} == {cl.named_by for cl in clusters}
    assert second.text.replace("cache", "") == first.text.replace("cache", "")


def test_briefing_of_an_empty_memory(client):
    b = client.briefing()
    assert [b.text.index(s) for s in SECTIONS] == sorted(b.text.index(s) for s in SECTIONS)
    assert "0 active entries" in b.text and "Nothing yet" in b.text and b.cut == []
