"""The advisor against the real anthropic SDK and a local fake Messages API."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from arbiter.advisor import Advisor, AdvisorError, Candidate
from tests.fake_messages import Delay, FakeMessages

REPO = Path(__file__).resolve().parents[2]

CANDIDATES = [
    Candidate(1, "project", "2024-01-02", False, "Deploys run on Fridays."),
    Candidate(2, "feedback", "2024-02-03", True, "Use tabs."),
    Candidate(3, "learning", "2024-03-04", False, "Tests use a fake API."),
    Candidate(4, "user", "2024-04-05", False, "Alice owns the bench."),
]


@pytest.fixture
def advisor(fake_messages: FakeMessages) -> Iterator[Advisor]:  # noqa: F811
    """An advisor on the fake, with no retries so each scripted failure is final."""
    url = fake_messages.base_url
    with Advisor(api_key="test", base_url=url, max_retries=0, timeout_s=5.0) as adv:
        yield adv


def prompt_of(request: dict) -> str:
    """The user prompt of a recorded request."""
    return request["messages"][0]["content"]


def reason_of(excinfo: pytest.ExceptionInfo[AdvisorError]) -> str:
    return excinfo.value.reason


# -- expansions ----------------------------------------------------------------


def test_expansions_parse_fenced_json_and_use_the_fast_model(advisor, fake_messages):
    fake_messages.set_script(
        ['Sure:\n```json\n{"rephrased": "when do deploys happen", "answer": "We deploy on Tuesdays."}\n```']
    )
    assert advisor.expansions("deploy day?") == ["when do deploys happen", "We deploy on Tuesdays."]
    (request,) = fake_messages.requests
    assert request["model"] == "claude-haiku-4-5"
    assert "deploy day?" in prompt_of(request)
    assert "worded as a stored note that answers it" in prompt_of(request)  # the query2doc guess is asked for


def test_expansions_strip_dedupe_and_drop_empties_and_echoes(advisor, fake_messages):
    fake_messages.set_script(['{"rephrased": "  deploy  DAY? ", "answer": "  we ship   on Tuesdays "}'])
    assert advisor.expansions("deploy day?") == ["we ship on Tuesdays"]
    fake_messages.set_script(['{"rephrased": "when we ship", "answer": "When  we ship"}'])
    assert advisor.expansions("deploy day?") == ["when we ship"]
    fake_messages.set_script(['{"rephrased": 7, "answer": "Tuesdays"}'])
    assert advisor.expansions("deploy day?") == ["Tuesdays"]


def test_expansions_model_override_is_sent(advisor, fake_messages):
    fake_messages.set_script(['{"rephrased": "a", "answer": "b"}'])
    advisor.expansions("q", model="claude-opus-4-1")
    assert fake_messages.requests[0]["model"] == "claude-opus-4-1"


@pytest.mark.parametrize(
    "reply",
    [
        "I cannot answer that.",
        '{"rephrased": "unterminated',
        '{"rephrased": "", "answer": "   "}',
        '{"paraphrases": ["a", "b"]}',
        '["a", "b"]',
    ],
)
def test_expansions_malformed_output_fails(advisor, fake_messages, reply):
    fake_messages.set_script([reply])
    with pytest.raises(AdvisorError) as excinfo:
        advisor.expansions("deploy day?")
    assert reason_of(excinfo) == "malformed output"


# -- rerank --------------------------------------------------------------------


def test_rerank_orders_by_the_model_and_shows_metadata(advisor, fake_messages):
    fake_messages.set_script(['{"ids": [3, 1, 4, 2]}'])
    assert advisor.rerank("fake api", CANDIDATES) == [3, 1, 4, 2]
    (request,) = fake_messages.requests
    assert request["model"] == "claude-sonnet-4-6"
    prompt = prompt_of(request)
    assert "(feedback · 2024-02-03 · superseded)" in prompt
    assert "(project · 2024-01-02 · current)" in prompt
    assert "Tests use a fake API." in prompt
    assert "fake api" in prompt


def test_rerank_drops_unknown_and_duplicate_ids_and_appends_missing(advisor, fake_messages):
    fake_messages.set_script(['{"ids": [3, 99, 3, "1", true, -2, null]}'])
    assert advisor.rerank("q", CANDIDATES) == [3, 1, 2, 4]


def test_rerank_accepts_a_bare_list(advisor, fake_messages):
    fake_messages.set_script(["[4, 2]"])
    assert advisor.rerank("q", CANDIDATES) == [4, 2, 1, 3]


def test_rerank_with_only_unknown_ids_keeps_the_original_order(advisor, fake_messages):
    fake_messages.set_script(['{"ids": [42, 43]}'])
    assert advisor.rerank("q", CANDIDATES) == [1, 2, 3, 4]


def test_rerank_unparseable_output_fails(advisor, fake_messages):
    fake_messages.set_script(["The best one is entry three."])
    with pytest.raises(AdvisorError) as excinfo:
        advisor.rerank("q", CANDIDATES)
    assert reason_of(excinfo) == "malformed output"


def test_rerank_of_one_or_no_candidates_needs_no_call(advisor, fake_messages):
    assert advisor.rerank("q", []) == []
    assert advisor.rerank("q", CANDIDATES[:1]) == [1]
    assert fake_messages.requests == []


# -- tags ----------------------------------------------------------------------


def test_tags_are_normalised_validated_and_skip_existing(advisor, fake_messages):
    long_tag = "x" * 65
    fake_messages.set_script(
        [json.dumps({"tags": ["Python", "machine learning", "python", long_tag, "deploy", "", 3]})]
    )
    tags = advisor.tags(
        "Deploy script", "We deploy with a Python script.", ["deploy"], ["python", "ops"]
    )
    assert tags == ["python", "machine-learning"]
    prompt = prompt_of(fake_messages.requests[0])
    assert "python, ops" in prompt
    assert "We deploy with a Python script." in prompt


def test_tags_are_capped_at_four(advisor, fake_messages):
    fake_messages.set_script(['{"tags": ["a", "b", "c", "d", "e", "f"]}'])
    assert advisor.tags("t", "c", [], []) == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    "reply", ['{"tags": []}', json.dumps({"tags": ["x" * 65, "  ", "bell\u0007"]}), "tags: a, b"]
)
def test_tags_without_a_valid_tag_fail(advisor, fake_messages, reply):
    fake_messages.set_script([reply])
    with pytest.raises(AdvisorError) as excinfo:
        advisor.tags("t", "c", [], [])
    assert reason_of(excinfo) == "malformed output"


# -- contradictions ------------------------------------------------------------


NEW = Candidate(10, "project", "2024-05-06", False, "Deploys run on Mondays.")


def test_contradictions_keeps_only_ids_among_olds(advisor, fake_messages):
    fake_messages.set_script(['{"ids": [1, 10, 77, 1, "3"]}'])
    assert advisor.contradictions(NEW, CANDIDATES) == [1, 3]
    (request,) = fake_messages.requests
    assert request["model"] == "claude-sonnet-4-6"
    prompt = prompt_of(request)
    assert "Deploys run on Mondays." in prompt and "Deploys run on Fridays." in prompt
    assert "empty list" in prompt  # the prompt leans towards "none"


def test_contradictions_none(advisor, fake_messages):
    fake_messages.set_script(['{"ids": []}'])
    assert advisor.contradictions(NEW, CANDIDATES) == []


def test_contradictions_malformed_output_fails(advisor, fake_messages):
    fake_messages.set_script(['{"ids": 1}'])
    with pytest.raises(AdvisorError) as excinfo:
        advisor.contradictions(NEW, CANDIDATES)
    assert reason_of(excinfo) == "malformed output"


def test_contradictions_with_no_olds_needs_no_call(advisor, fake_messages):
    assert advisor.contradictions(NEW, [NEW]) == []
    assert fake_messages.requests == []


# -- links ---------------------------------------------------------------------

MEANINGS = {"relates_to": "same subject", "causes": "the source is a cause of the target"}
SUGGESTED = [(CANDIDATES[0], "causal: shares 40% of its words"), (CANDIDATES[2], "similar: shares 35% of its words")]


def test_links_keep_triples_joining_the_new_entry_and_a_suggestion(advisor, fake_messages):
    fake_messages.set_script([json.dumps({"links": [
        {"source": 1, "relation": "causes", "target": 10}, {"source": "10", "relation": "relates_to", "target": "#3"},
        {"source": 1, "relation": "causes", "target": 10},  # a repeat
        {"source": 4, "relation": "causes", "target": 10},  # not suggested
        {"source": 1, "relation": "relates_to", "target": 3},  # not touching the new entry
        {"source": 10, "relation": "supersedes", "target": 1},  # outside the vocabulary given
        {"source": 10, "relation": "causes", "target": 10}, {"source": True, "relation": "causes", "target": 10}, "x",
    ]})])
    assert advisor.links(NEW, SUGGESTED, MEANINGS) == [(1, "causes", 10), (10, "relates_to", 3)]
    (request,) = fake_messages.requests
    prompt = prompt_of(request)
    assert request["model"] == "claude-sonnet-4-6"
    assert "Deploys run on Fridays." in prompt and "Suggested because: causal: shares 40%" in prompt
    assert "- causes: the source is a cause" in prompt and "Alice owns the bench." not in prompt


@pytest.mark.parametrize("reply", ['{"links": [{"source": 4, "relation": "causes", "target": 10}]}',
                                   '{"links": "none"}', "nothing to link"])
def test_links_unusable_answers_fail(advisor, fake_messages, reply):
    fake_messages.set_script([reply])
    with pytest.raises(AdvisorError) as excinfo:
        advisor.links(NEW, SUGGESTED, MEANINGS)
    assert reason_of(excinfo) == "malformed output"


def test_links_none_and_no_suggestions(advisor, fake_messages):
    fake_messages.set_script(['{"links": []}'])
    assert advisor.links(NEW, SUGGESTED, MEANINGS) == []
    assert advisor.links(NEW, [(NEW, "itself")], MEANINGS) == []
    assert len(fake_messages.requests) == 1


# -- name_cluster --------------------------------------------------------------


def test_name_cluster_returns_title_case_name_and_description(advisor, fake_messages):
    fake_messages.set_script(
        ['{"name": "release API planning", "description": "  When and how we ship. "}']
    )
    assert advisor.name_cluster(["deploy", "release"], ["Deploy day", "Freeze"]) == (
        "Release API Planning",
        "When and how we ship.",
    )
    prompt = prompt_of(fake_messages.requests[0])
    assert "deploy, release" in prompt and "- Freeze" in prompt


@pytest.mark.parametrize(
    "reply",
    [
        '{"name": "one two three four", "description": "d"}',
        '{"name": "", "description": "d"}',
        '{"name": "Ops", "description": "line one\\nline two"}',
        '{"name": "Ops", "description": "   "}',
        '{"name": "Ops"}',
        '["Ops", "d"]',
        "Ops: the operations cluster",
    ],
)
def test_name_cluster_invalid_output_fails(advisor, fake_messages, reply):
    fake_messages.set_script([reply])
    with pytest.raises(AdvisorError) as excinfo:
        advisor.name_cluster(["ops"], ["Pager"])
    assert reason_of(excinfo) == "malformed output"


# -- entities ------------------------------------------------------------------

TYPES = ("person", "tool", "other")


def test_entities_are_cleaned_typed_and_skip_what_was_found(advisor, fake_messages):
    fake_messages.set_script([json.dumps({"entities": [
        {"name": "  Old   Boathouse ", "type": "location"}, {"name": "redis", "type": "tool"},
        {"name": "Ann", "type": "person"}, {"name": "ann", "type": "person"}, {"name": "bad\u0007name"},
        {"name": "x" * 129}, {"name": 7}, "Zed",
    ]})])
    assert advisor.entities("Dinner", "with Ann at the Old Boathouse", ["Redis"], TYPES) == [
        ("Old Boathouse", "other"), ("Ann", "person"), ("Zed", "other"),
    ]
    (request,) = fake_messages.requests
    assert request["model"] == "claude-haiku-4-5"
    assert "Already found: Redis" in prompt_of(request) and "person, tool, other" in prompt_of(request)


@pytest.mark.parametrize("reply", ['{"entities": []}', '{"entities": [{"name": "Redis"}]}'])
def test_entities_none_new_is_an_empty_answer(advisor, fake_messages, reply):
    fake_messages.set_script([reply])
    assert advisor.entities("t", "Redis", ["Redis"], TYPES) == []


@pytest.mark.parametrize("reply", ['{"entities": [1, {"type": "tool"}]}', '{"names": []}', "none"])
def test_entities_malformed_output_fails(advisor, fake_messages, reply):
    fake_messages.set_script([reply])
    with pytest.raises(AdvisorError) as excinfo:
        advisor.entities("t", "c", [], TYPES)
    assert reason_of(excinfo) == "malformed output"


# -- HTTP failures and retries -------------------------------------------------


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (429, "rate limited (429)"),
        (500, "server error (500)"),
        (529, "server error (529)"),
        (400, "api error (400)"),
    ],
)
def test_http_errors_map_to_reasons(advisor, fake_messages, status, reason):
    fake_messages.set_script([status])
    with pytest.raises(AdvisorError) as excinfo:
        advisor.expansions("q")
    assert reason_of(excinfo) == reason
    assert len(fake_messages.requests) == 1


def test_retry_then_success(fake_messages):
    fake_messages.set_script([500, '{"rephrased": "a", "answer": "b"}'])
    with Advisor(api_key="test", base_url=fake_messages.base_url, max_retries=1) as adv:
        assert adv.expansions("q") == ["a", "b"]
    assert len(fake_messages.requests) == 2


def test_retries_are_bounded(fake_messages):
    fake_messages.set_script([429, 429, '{"rephrased": "a"}'])
    with Advisor(api_key="test", base_url=fake_messages.base_url, max_retries=1) as adv:
        with pytest.raises(AdvisorError) as excinfo:
            adv.expansions("q")
    assert reason_of(excinfo) == "rate limited (429)"
    assert len(fake_messages.requests) == 2


def test_client_errors_are_not_retried(fake_messages):
    fake_messages.set_script([401, '{"rephrased": "a"}'])
    with Advisor(api_key="bad", base_url=fake_messages.base_url, max_retries=3) as adv:
        with pytest.raises(AdvisorError) as excinfo:
            adv.expansions("q")
    assert reason_of(excinfo) == "api error (401)"
    assert len(fake_messages.requests) == 1


def test_exhausted_script_is_a_server_error(advisor, fake_messages):
    fake_messages.set_script(['{"rephrased": "a"}'])
    advisor.expansions("q")
    with pytest.raises(AdvisorError) as excinfo:
        advisor.expansions("q")
    assert reason_of(excinfo) == "server error (500)"


def test_callable_script_sees_each_request(advisor, fake_messages):
    fake_messages.set_script(lambda body: json.dumps({"rephrased": body["model"]}))
    assert advisor.expansions("q", model="m-1") == ["m-1"]


def test_connection_refused():
    with socket.socket() as sock:  # a port that was free a moment ago and now listens to no one
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with Advisor(api_key="test", base_url=f"http://127.0.0.1:{port}", max_retries=0) as adv:
        with pytest.raises(AdvisorError) as excinfo:
            adv.expansions("q")
    assert reason_of(excinfo) == "connection failed"


# -- budget ----------------------------------------------------------------------


def test_slow_reply_past_the_deadline_times_out_early(fake_messages):
    # The reply would come after a minute and timeout_s is half of that: only the
    # deadline can end the call before 30 s (a bound no loaded machine gets near).
    # The deadline leaves the request time to be sent on a loaded machine: one
    # already passed is refused before sending ("deadline passed", another test).
    fake_messages.set_script([Delay(60.0, '{"rephrased": "late"}')])
    url = fake_messages.base_url
    with Advisor(api_key="test", base_url=url, timeout_s=30.0, max_retries=1) as adv:
        start = time.monotonic()
        with pytest.raises(AdvisorError) as excinfo:
            adv.expansions("q", deadline=start + 3.0)
        elapsed = time.monotonic() - start
    assert reason_of(excinfo) == "timeout"
    assert elapsed < 30.0
    assert len(fake_messages.requests) == 1  # no retry: the budget was spent


def test_timeout_s_bounds_a_call_without_deadline(fake_messages):
    # Waiting for the reply would succeed after a minute; a timeout ends it first.
    fake_messages.set_script([Delay(60.0)])
    url = fake_messages.base_url
    with Advisor(api_key="test", base_url=url, timeout_s=0.3, max_retries=0) as adv:
        start = time.monotonic()
        with pytest.raises(AdvisorError) as excinfo:
            adv.rerank("q", CANDIDATES)
        elapsed = time.monotonic() - start
    assert reason_of(excinfo) == "timeout"
    assert elapsed < 30.0


def test_deadline_already_passed_sends_nothing(advisor, fake_messages):
    with pytest.raises(AdvisorError) as excinfo:
        advisor.tags("t", "c", [], [], deadline=time.monotonic() - 1)
    assert reason_of(excinfo) == "deadline passed"
    assert fake_messages.requests == []


# -- no key ----------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, ""])
def test_no_key_fails_without_network(fake_messages, key):
    adv = Advisor(api_key=key, base_url=fake_messages.base_url)
    calls = [
        lambda: adv.expansions("q"),
        lambda: adv.rerank("q", CANDIDATES),
        lambda: adv.tags("t", "c", [], []),
        lambda: adv.contradictions(NEW, CANDIDATES),
        lambda: adv.name_cluster(["a"], ["b"]),
    ]
    for call in calls:
        with pytest.raises(AdvisorError) as excinfo:
            call()
        assert reason_of(excinfo) == "no API key"
    assert fake_messages.requests == []


def test_importing_the_advisor_does_not_import_anthropic():
    code = "import sys, arbiter.advisor; assert 'anthropic' not in sys.modules, 'imported eagerly'"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=30)
