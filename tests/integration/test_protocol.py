"""The wire protocol over a raw unix socket to a real daemon.

Every bad input gets a JSON-RPC error with a stable code (and `data.path` where
a field is at fault), the connection answers the next line, and the database
is unchanged.
"""

from __future__ import annotations

import json
import random
import socket
import threading

import pytest

from arbiter.client import Client
from arbiter.store import connect
from arbiter.errors import (
    Conflict,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    NotFound,
    ParseError,
    Unauthorized,
)
from tests.conftest import DaemonProcess

TOKEN = object()  # stands for the daemon's default-tenant token in the cases below
NO_PARAMS = object()


class Raw:
    """One raw connection: bytes out, one decoded JSON line back."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rb")

    def send(self, raw: bytes) -> None:
        self.sock.sendall(raw)

    def line(self) -> dict:
        data = self.file.readline()
        assert data.endswith(b"\n"), f"connection closed: {data!r}"
        return json.loads(data)

    def frame(self, raw: bytes) -> dict:
        self.send(raw + b"\n")
        return self.line()

    def request(self, method: str, params=NO_PARAMS, *, token=TOKEN, id=7, real_token: str) -> dict:
        msg = {"jsonrpc": "2.0", "id": id, "method": method, "params": {} if params is NO_PARAMS else params}
        if token is TOKEN:
            msg["token"] = real_token
        elif token is not None:
            msg["token"] = token
        return self.frame(json.dumps(msg).encode())

    def close(self):
        self.file.close()
        self.sock.close()


def state(daemon) -> tuple:
    """What a bad request must not change: the tenant's counts and the newest ids."""
    with daemon.client() as c:
        s = c.status()
        newest = [e.id for e in c.list(limit=5)]
    return s.entries_active, s.entries_retired, s.relations, s.conversations, newest


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import tempfile
    from pathlib import Path

    d = DaemonProcess(Path(tempfile.mkdtemp(prefix="arb-"))).start()
    with d.client() as c:  # something to leave unchanged
        a = c.remember(type="project", title="Ship v1", content="Target: Friday.")
        b = c.remember(type="project", title="Ship v1 slips", content="Target: Monday.", supersedes_ids=[a.id])
        c.link(b.id, "relates_to", c.remember(type="user", title="Owner", content="Dana owns v1.").id)
        c.conversation_create("standup")
    yield d
    d.stop()


@pytest.fixture
def raw(served):
    conn = Raw(served.socket)
    yield conn
    conn.close()


def remember_params(**over):
    return {"type": "project", "title": "A title", "content": "Some content.", **over}


BAD_REQUESTS = [
    # (case id, method, params, expected error class, expected data.path)
    ("wrong type", "get", {"id": "x"}, InvalidParams, "id"),
    ("zero id", "get", {"id": 0}, InvalidParams, "id"),
    ("id past 64-bit signed", "get", {"id": 2**63}, InvalidParams, "id"),
    ("link id past 64-bit signed", "link", {"source_id": 1, "relation": "supports", "target_id": 2**64 + 1},
     InvalidParams, "target_id"),
    ("bool for int", "get", {"id": True}, InvalidParams, "id"),
    ("float for int", "forget", {"id": 1.5}, InvalidParams, "id"),
    ("params not an object", "status", [], InvalidParams, "params"),
    ("params null", "get", None, InvalidParams, "params"),
    ("missing field", "get", {}, InvalidParams, "id"),
    ("missing content", "remember", {"type": "user", "title": "t"}, InvalidParams, "content"),
    ("missing target", "link", {"source_id": 1, "relation": "supports"}, InvalidParams, "target_id"),
    ("unknown field", "get", {"id": 1, "colour": "red"}, InvalidParams, "colour"),
    ("unknown entry type", "remember", remember_params(type="gossip"), InvalidParams, "type"),
    ("unknown relation", "link", {"source_id": 1, "relation": "hates", "target_id": 2}, InvalidParams, "relation"),
    ("unknown type filter", "list", {"types": ["project", "gossip"]}, InvalidParams, "types[1]"),
    ("tags not a list", "remember", remember_params(tags="a,b"), InvalidParams, "tags"),
    ("title over 200 bytes", "remember", remember_params(title="é" * 101), InvalidParams, "title"),
    ("empty title", "remember", remember_params(title=""), InvalidParams, "title"),
    ("content over 64 KiB", "remember", remember_params(content="x" * (64 * 1024 + 1)), InvalidParams, "content"),
    ("multibyte content over 64 KiB", "remember", remember_params(content="€" * 21846), InvalidParams, "content"),
    ("empty content", "remember", remember_params(content=""), InvalidParams, "content"),
    ("blank content", "remember", remember_params(content=" \n\t"), InvalidParams, "content"),
    ("33 tags", "remember", remember_params(tags=[f"t{i}" for i in range(33)]), InvalidParams, "tags"),
    ("tag of 65 chars", "remember", remember_params(tags=["ok", "x" * 65]), InvalidParams, "tags[1]"),
    ("empty tag", "remember", remember_params(tags=[""]), InvalidParams, "tags[0]"),
    ("tag with a space", "remember", remember_params(tags=["two words"]), InvalidParams, "tags[0]"),
    ("source over 200 bytes", "remember", remember_params(source="ß" * 101), InvalidParams, "source"),
    ("bad valid_from", "remember", remember_params(valid_from="last tuesday"), InvalidParams, "valid_from"),
    ("bad as_of", "list", {"as_of": "yesterday"}, InvalidParams, "as_of"),
    ("as_of without offset", "get", {"id": 1, "as_of": "2026-11-20T10:00:00"}, InvalidParams, "as_of"),
    ("limit over 1000", "list", {"limit": 1001}, InvalidParams, "limit"),
    ("depth over 2", "expand", {"id": 1, "depth": 3}, InvalidParams, "depth"),
    ("query over 4096", "recall", {"query": "q" * 4097}, InvalidParams, "query"),
    ("bad entry in a batch", "remember_many",
     {"entries": [remember_params(), remember_params(content="")]}, InvalidParams, "entries[1].content"),
    ("bad time in a batch", "remember_many",
     {"entries": [remember_params(), remember_params(valid_from="soon")]}, InvalidParams, "entries[1].valid_from"),
    ("missing id in a batch", "remember_many",
     {"entries": [remember_params(), remember_params(supersedes_ids=[99999])]}, NotFound,
     "entries[1].supersedes_ids[0]"),
    ("empty batch", "remember_many", {"entries": []}, InvalidParams, "entries"),
    ("LLM flag in a batch", "remember_many",
     {"entries": [remember_params(), remember_params(auto_tag=True)]}, InvalidParams, "entries[1].auto_tag"),
    ("missing supersedes target", "remember", remember_params(supersedes_ids=[1, 99999]), NotFound,
     "supersedes_ids[1]"),
    ("retired supersedes target", "remember", remember_params(supersedes_ids=[1]), InvalidParams,
     "supersedes_ids[0]"),
    ("supersedes from a retired entry", "link", {"source_id": 1, "relation": "supersedes", "target_id": 2},
     InvalidParams, "source_id"),
    ("missing conversation to list", "list", {"conversation_id": 99999}, NotFound, "conversation_id"),
    ("missing conversation to recall", "recall", {"query": "x", "conversation_id": 99999}, NotFound,
     "conversation_id"),
    ("title with a newline", "remember", remember_params(title="Ship\nv1"), InvalidParams, "title"),
    ("conversation title with a newline", "conversation_create", {"title": "a\nb"}, InvalidParams, "title"),
    ("tag with a space", "remember", remember_params(tags=["ok", "not ok"]), InvalidParams, "tags[1]"),
    ("valid_from in the future", "remember", remember_params(valid_from="2999-01-01T00:00:00Z"), InvalidParams,
     "valid_from"),
    ("missing parent", "remember", remember_params(parent_id=99999), NotFound, "parent_id"),
    ("missing conversation", "remember", remember_params(conversation_id=99999), NotFound, "conversation_id"),
    ("a new conversation and an existing one", "remember", remember_params(conversation_id=1, new_conversation="x"),
     InvalidParams, "new_conversation"),
    ("a blank new conversation", "remember", remember_params(new_conversation="   "), InvalidParams,
     "new_conversation"),
    ("a refused write starts no conversation", "remember", remember_params(new_conversation="x", parent_id=99999),
     NotFound, "parent_id"),
    ("a batch's new conversation and an entry's own", "remember_many",
     {"entries": [remember_params(conversation_id=1)], "new_conversation": "x"}, InvalidParams,
     "entries[0].conversation_id"),
    ("a refused batch starts no conversation", "remember_many",
     {"entries": [remember_params(), remember_params(parent_id=99999)], "new_conversation": "x"}, NotFound,
     "entries[1].parent_id"),
    ("self loop", "link", {"source_id": 1, "relation": "supports", "target_id": 1}, InvalidParams, "target_id"),
    ("missing entry", "get", {"id": 99999}, NotFound, None),
    ("retired entry", "get", {"id": 1}, NotFound, None),
    ("update of a retired entry", "update", {"id": 1, "title": "x"}, NotFound, None),
    ("unknown method", "remember_everything", {}, MethodNotFound, "method"),
    ("admin verb, tenant token", "tenant_list", {}, Unauthorized, "token"),
]


@pytest.mark.parametrize("method, params, error, path", [c[1:] for c in BAD_REQUESTS], ids=[c[0] for c in BAD_REQUESTS])
def test_bad_params_get_a_stable_error_and_change_nothing(served, raw, method, params, error, path):
    before = state(served)
    resp = raw.request(method, params, real_token=served.token)
    assert resp["id"] == 7 and "result" not in resp
    assert resp["error"]["code"] == error.code
    assert resp["error"]["data"]["name"] == error.name
    assert resp["error"]["data"].get("path") == path
    assert "\n" not in resp["error"]["message"]
    assert "Expected `" not in resp["error"]["message"]  # said in words, not in msgspec's terms
    assert raw.request("ping", real_token=served.token)["result"]["version"]
    assert state(served) == before


def test_an_error_about_a_field_carries_its_words_apart_from_its_name(served, raw):
    """`data.reason` is the message less the field's name: a front end that spells the field otherwise (the
    CLI's `--valid-from`) says it of its own name without cutting the message apart."""
    resp = raw.request("remember", remember_params(valid_from="last tuesday"), real_token=served.token)
    data = resp["error"]["data"]
    assert data["path"] == "valid_from" and resp["error"]["message"] == f"valid_from: {data['reason']}"
    with served.client() as c:
        with pytest.raises(InvalidParams) as refused:
            c.list(limit=1001)
        with pytest.raises(NotFound) as missing:
            c.get(99999)
    assert (refused.value.path, refused.value.reason) == ("limit", "must be at most 1000")
    assert missing.value.reason is None  # a sentence of its own: "entry 99999 not found"


def test_duplicate_link_is_a_conflict_with_the_existing_id(served, raw):
    with served.client() as c:
        a = c.remember(type="user", title="a", content="a")
        b = c.remember(type="user", title="b", content="b")
        rel = c.link(a.id, "supports", b.id)
    before = state(served)
    resp = raw.request("link", {"source_id": a.id, "relation": "supports", "target_id": b.id}, real_token=served.token)
    assert resp["error"]["code"] == Conflict.code
    assert resp["error"]["data"]["existing_id"] == rel.id
    assert state(served) == before


RAW_FRAMES = [
    ("malformed JSON", b'{"jsonrpc": "2.0", "method": ', ParseError, None),
    ("trailing garbage", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"} x', ParseError, None),
    ("invalid UTF-8", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{},"token":"\xff\xfe"}', ParseError, None),
    ("invalid UTF-8 in params", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xc3"}}', ParseError, None),
    ("invalid UTF-8 in an ignored field", b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xff"}', ParseError, None),
    ("invalid UTF-8 deep in a large frame", b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"'
     + "\u00e9\u20ac".encode() * 30000 + b'\xe2\x82"}', ParseError, None),
    ("lone surrogate escape", b'{"jsonrpc":"2.0","id":1,"method":"ping","token":"\\ud800"}', ParseError, None),
    ("an empty batch", b"[ ]", InvalidRequest, "batch"),
    ("nested 10^5 deep", b"[" * 100_000 + b"]" * 100_000, InvalidRequest, None),
    ("params nested 10^5 deep", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b"[" * 100_000
     + b"]" * 100_000 + b"}", InvalidRequest, None),
    ("a bare string", b'"ping"', InvalidRequest, None),
    ("no method", b'{"jsonrpc": "2.0", "id": 1}', InvalidRequest, "method"),
    ("wrong version", b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', InvalidRequest, "jsonrpc"),
    ("no version", b'{"id": 1, "method": "ping"}', InvalidRequest, "jsonrpc"),
    ("method not a string", b'{"jsonrpc": "2.0", "id": 1, "method": 5}', InvalidRequest, "method"),
    ("id an object", b'{"jsonrpc": "2.0", "id": {}, "method": "ping"}', InvalidRequest, "id"),
]


@pytest.mark.parametrize("frame, error, path", [c[1:] for c in RAW_FRAMES], ids=[c[0] for c in RAW_FRAMES])
def test_bad_frames_get_a_stable_error(served, raw, frame, error, path):
    before = state(served)
    resp = raw.frame(frame)
    assert resp["error"]["code"] == error.code
    assert resp["error"]["data"].get("path") == path
    assert resp["id"] is None
    assert raw.request("ping", real_token=served.token)["result"]
    assert state(served) == before


@pytest.mark.parametrize("token, path", [("arb_not-a-real-token", "token"), (None, "token"), ("", "token")])
def test_bad_token_is_unauthorized(served, raw, token, path):
    before = state(served)
    for method, params in [("get", {"id": 2}), ("remember", remember_params()), ("status", {})]:
        resp = raw.request(method, params, token=token, real_token=served.token)
        assert resp["error"]["code"] == Unauthorized.code
        assert resp["error"]["data"]["path"] == path
    assert raw.request("get", {"id": 2}, real_token=served.token)["result"]["id"] == 2
    assert state(served) == before


def test_limits_are_inclusive(served, raw):
    ok = raw.request(
        "remember",
        remember_params(title="é" * 100, content="€" * 21845 + "x", tags=[f"t{i}" for i in range(31)] + ["x" * 64],
                        source="ß" * 100),
        real_token=served.token,
    )
    assert len(ok["result"]["content"].encode()) == 64 * 1024
    assert len(ok["result"]["title"].encode()) == 200
    assert len(ok["result"]["tags"]) == 32


def test_blank_lines_are_ignored_and_pipelined_requests_answer_in_order(served, raw):
    token = served.token
    lines = b"\n\n".join(
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping", "token": token}).encode() for i in range(20)
    )
    raw.send(lines + b"\n" + b'{"bad\n' + b"  \n")
    assert [raw.line()["id"] for _ in range(20)] == list(range(20))
    assert raw.line()["error"]["code"] == ParseError.code


def test_a_batch_is_answered_by_an_array_in_order(served, raw):
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": "two", "method": "get", "params": {"id": 2}, "token": served.token},
        {"jsonrpc": "2.0", "id": 3, "method": "get", "params": {"id": 2**63}, "token": served.token},
        5,
    ]
    answers = raw.frame(json.dumps(batch).encode())
    assert [a["id"] for a in answers] == [1, "two", 3, None]
    assert answers[0]["result"]["version"] and answers[1]["result"]["id"] == 2
    assert [a.get("error", {}).get("code") for a in answers[2:]] == [InvalidParams.code, InvalidRequest.code]


def test_large_frames_pipelined_with_small_ones_answer_in_order(served, raw):
    # A frame of 64 KiB or more is handed over as the read buffer itself: what follows it in the same
    # read must start the next frame, and a large batch (with leading blanks) must still be a batch.
    entries = [remember_params(title=f"bulk {i}", content=f"pipelined bulk entry {i} " + "x" * 600) for i in range(200)]
    many = {"jsonrpc": "2.0", "id": "many", "method": "remember_many", "params": {"entries": entries},
            "token": served.token}
    ping = {"jsonrpc": "2.0", "id": "ping", "method": "ping"}
    batch = [{"jsonrpc": "2.0", "id": f"b{i}-" + "p" * 150, "method": "ping"} for i in range(500)]
    frames = [json.dumps(many).encode(), json.dumps(ping).encode(), b" \t" + json.dumps(batch).encode()]
    assert len(frames[0]) > 64 * 1024 and len(frames[2]) > 64 * 1024
    raw.send(b"\n".join([*frames, frames[1]]) + b"\n")
    assert len(raw.line()["result"]["ids"]) == 200
    assert raw.line()["id"] == "ping"
    assert [a["id"] for a in raw.line()] == [b["id"] for b in batch]
    assert raw.line()["id"] == "ping"


def test_a_batch_over_the_limit_is_one_error(served, raw):
    resp = raw.frame(b"[" + b",".join([b"{}"] * 1001) + b"]")
    assert resp["error"]["code"] == InvalidRequest.code and resp["error"]["data"]["path"] == "batch"
    assert raw.request("ping", real_token=served.token)["result"]


def test_string_ids_are_echoed(served, raw):
    resp = raw.request("ping", id="abc-1", real_token=served.token)
    assert resp["id"] == "abc-1"


# ---- frames over the limit -------------------------------------------------------------


@pytest.fixture(scope="module")
def small_frames():
    import tempfile
    from pathlib import Path

    d = DaemonProcess(Path(tempfile.mkdtemp(prefix="arb-")), args=("--max-frame", "4096")).start()
    yield d
    d.stop()


def test_a_frame_over_the_limit_in_one_piece(small_frames):
    raw = Raw(small_frames.socket)
    before = state(small_frames)
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "remember", "token": small_frames.token,
                      "params": remember_params(content="y" * 5000)}).encode()
    resp = raw.frame(big)
    assert resp["error"]["code"] == InvalidRequest.code
    assert resp["error"]["data"]["path"] == "frame"
    assert raw.request("ping", real_token=small_frames.token)["result"]
    assert state(small_frames) == before
    raw.close()


def test_a_frame_over_the_limit_in_pieces(small_frames):
    raw = Raw(small_frames.socket)
    before = state(small_frames)
    raw.send(b"z" * 3000)
    raw.send(b"z" * 3000)  # now over the limit without a newline: answered at once
    resp = raw.line()
    assert resp["error"]["code"] == InvalidRequest.code
    raw.send(b"z" * 20000)  # the rest of the same frame is dropped, not answered again
    raw.send(b"z\n")
    assert raw.request("ping", id=99, real_token=small_frames.token)["id"] == 99
    assert state(small_frames) == before
    raw.close()


def test_a_frame_at_the_limit_is_served(small_frames):
    raw = Raw(small_frames.socket)
    msg = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}).encode()
    frame = msg[:-1] + b" " * (4096 - len(msg)) + b"}"
    assert len(frame) == 4096
    assert raw.frame(frame)["id"] == 5
    assert raw.frame(frame[:-1] + b" }")["error"]["code"] == InvalidRequest.code
    raw.close()


def test_the_default_limit_is_4_mib(served, raw):
    head = b'{"jsonrpc":"2.0","id":1,"method":"ping","pad":"'
    frame = head + b"p" * (4 * 1024 * 1024 - len(head)) + b'"}'
    resp = raw.frame(frame)
    assert resp["error"]["code"] == InvalidRequest.code
    assert resp["error"]["data"]["path"] == "frame"
    assert raw.request("ping", real_token=served.token)["result"]


# ---- many clients at once -----------------------------------------------------------------


def test_many_clients_at_once(served):
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    threads, per_thread = 8, 40
    with served.client() as c:
        start_count = c.status().entries_active
    results: dict[int, list[tuple[int, str]]] = {}
    errors: list[BaseException] = []
    go = threading.Barrier(threads)

    def worker(n: int) -> None:
        rng = random.Random(seed + n)
        mine: list[tuple[int, str]] = []
        try:
            with served.client() as c:
                go.wait()
                for i in range(per_thread):
                    word = f"w{n}x{i}q{rng.randrange(10**6)}"
                    if rng.random() < 0.2:
                        ids = c.remember_many([remember_params(title=word, content=f"batch {word}", tags=[f"worker{n}"])])
                        mine.append((ids[0], word))
                    else:
                        e = c.remember(type="learning", title=word, content=f"body {word}", tags=[f"worker{n}"])
                        mine.append((e.id, word))
                    eid, w = rng.choice(mine)
                    assert c.get(eid).title == w
                    assert {e.id for e in c.list(tag=f"worker{n}", limit=1000)} == {i for i, _ in mine}
                    if i % 10 == 0:
                        assert [h.id for h in c.recall(w).hits][:1] == [eid]
            results[n] = mine
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(60)
    assert not errors, errors[0]
    ids = [eid for mine in results.values() for eid, _ in mine]
    assert len(ids) == len(set(ids)) == threads * per_thread
    with served.client() as c:
        assert c.status().entries_active == start_count + threads * per_thread
        got = {e.id: e.title for e in c.list(limit=1000)}
    assert all(got[eid] == word for mine in results.values() for eid, word in mine)


def test_reads_do_not_wait_behind_a_write(served):
    """While the daemon's writer is stuck on a write (another process holds the write lock), reads answer."""
    with served.client() as c:
        known = c.remember(type="user", title="known", content="c").id
        before = c.status().entries_active
    holder = connect(served.db)
    holder.execute("BEGIN IMMEDIATE")  # the write lock, held by someone else
    outcome: list = []
    writer = threading.Thread(target=lambda: outcome.append(_remember_once(served)))
    writer.start()
    try:
        with Client(served.socket, served.token, timeout=10) as r:
            for _ in range(200):
                assert r.get(known).title == "known"
            assert r.status().entries_active == before
        assert writer.is_alive(), outcome  # the write really was waiting all along
    finally:
        holder.execute("COMMIT")
        holder.close()
    writer.join(30)
    assert outcome and isinstance(outcome[0], int), outcome


def _remember_once(daemon) -> int | BaseException:
    try:
        with daemon.client() as w:
            return w.remember(type="user", title="waited", content="for the lock", allow_duplicate=True).id
    except BaseException as e:  # handed to the main thread
        return e


def test_client_raises_the_same_classes(served):
    with served.client() as c:
        with pytest.raises(NotFound):
            c.get(99999)
        with pytest.raises(InvalidParams) as info:
            c.call("get", {"id": "x"})
        assert info.value.path == "id"
        with pytest.raises(MethodNotFound):
            c.call("nope", {})
    with Client(served.socket, "arb_wrong") as c:
        with pytest.raises(Unauthorized):
            c.status()
