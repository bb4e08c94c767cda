"""The stdio MCP protocol layer on its own: framing, the handshake and hostile messages (no daemon is reached)."""

from __future__ import annotations

import io
import json

from arbiter.client import Client
from arbiter.mcp import load_tools, surface
from arbiter.mcp.server import PROTOCOL_VERSIONS, McpServer, serve_stdio
from arbiter.mcp.tool import TOOLS, Session


def exchange(*lines: bytes) -> list:
    load_tools()
    # A client on a socket nobody serves: any tool that reached the daemon would fail loudly.
    server = McpServer(Session(Client("/nonexistent/arbiter.sock")), "the briefing")
    out = io.BytesIO()
    serve_stdio(server, io.BytesIO(b"".join(line + b"\n" for line in lines)), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def request(i, method: str, params: dict | None = None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": method, **({"params": params} if params else {})}).encode()


def test_the_handshake_negotiates_a_version_we_speak():
    ours, theirs = exchange(
        request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}),
        request(2, "initialize", {"protocolVersion": "2099-01-01", "capabilities": {}, "clientInfo": {"name": "t"}}),
    )
    assert ours["result"]["protocolVersion"] == "2025-06-18"
    assert theirs["result"]["protocolVersion"] == PROTOCOL_VERSIONS[-1]
    assert ours["result"]["instructions"] == "the briefing"
    assert ours["result"]["capabilities"]["resources"] == {"subscribe": True, "listChanged": True}


def test_notifications_get_no_answer_and_requests_keep_their_order():
    answers = exchange(
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(),
        request("a", "ping"),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "a"}}).encode(),
        request("b", "tools/list"),
    )
    assert [a["id"] for a in answers] == ["a", "b"]
    assert answers[0]["result"] == {}
    assert [t["name"] for t in answers[1]["result"]["tools"]] == list(surface.build())


def test_hostile_messages_get_one_line_errors_and_the_server_keeps_serving():
    answers = exchange(
        b"{not json",
        b'[1, 2]',
        b'{"jsonrpc": "1.0", "id": 3, "method": "ping"}',
        request(4, "server/discover"),
        json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": [1]}).encode(),
        request(6, "tools/call", {"name": "get", "arguments": [1]}),
        request(7, "resources/read", {}),
        request(8, "ping"),
    )
    errors = {a.get("id"): a["error"] for a in answers if "error" in a and not isinstance(a, list)}
    batch = next(a for a in answers if isinstance(a, list))
    assert answers[0]["error"]["code"] == -32700
    assert [e["error"]["code"] for e in batch] == [-32600, -32600]
    assert errors[3]["code"] == -32600
    assert errors[4]["code"] == -32601 and errors[4]["message"].startswith("method_not_found:")
    assert errors[5]["code"] == -32602
    assert errors[6]["message"] == "invalid_params: arguments: must be an object"
    assert errors[7]["message"] == "invalid_params: uri: required, a string"
    assert all("\n" not in e["message"] for e in errors.values())
    assert answers[-1] == {"jsonrpc": "2.0", "id": 8, "result": {}}


def test_a_tool_error_is_a_result_the_model_reads_not_a_protocol_error():
    (answer,) = exchange(request(1, "tools/call", {"name": "get", "arguments": {"id": 0}}))
    assert answer["result"]["isError"] is True
    assert answer["result"]["content"] == [{"type": "text", "text": "invalid_params: id: must be at least 1"}]


def test_params_of_the_wrong_shape_are_invalid_params_not_internal_errors():
    answers = exchange(
        request(1, "resources/list", {"cursor": 5}),
        request(2, "prompts/get", {"name": "what_do_we_know", "arguments": "subject"}),
        request(3, "prompts/get", {"name": "what_do_we_know", "arguments": ["subject"]}),
        b"[]",
    )
    assert [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers] == [
        (1, -32602, "invalid_params: cursor: must be a string"),
        (2, -32602, "invalid_params: arguments: must be an object"),
        (3, -32602, "invalid_params: arguments: must be an object"),
        (None, -32600, "invalid_request: an empty batch"),
    ]


def test_schema_descriptions_read_as_written_not_as_indented_source():
    load_tools()
    for t in TOOLS.values():
        listing = t.listing()
        for schema in (listing["inputSchema"], listing["outputSchema"]):
            assert "\n    " not in json.dumps(schema).replace("\\n", "\n"), t.name


def test_counts_read_in_the_right_number():
    from arbiter.mcp.entries import WrittenMany
    from arbiter.mcp.people import SharedView

    assert WrittenMany(ids=[7], conversation_id=None).text() == "Remembered 1 entry: #7"
    assert SharedView(root_id=7, team="core", ids=[7]).text() == "Thread #7 (1 entry) is now shared with team core."
