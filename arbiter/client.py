"""`Client`: the one typed way to talk to a running daemon.

The CLI, the MCP server and the bench all use it. Each method sends one
JSON-RPC request over the unix socket and returns a typed result, or raises
the same `ArbiterError` subclass the daemon raised.

    with Client.from_home() as c:
        e = c.remember(type="project", title="Ship v1", content="Target: Friday.")
        print(c.recall("ship").hits[0].title)
"""

from __future__ import annotations

import itertools
import select
import socket
import time
from pathlib import Path
from typing import TypeVar

import msgspec

from arbiter import _code, paths
from arbiter.errors import BY_CODE, ArbiterError, DaemonOutdated, Unavailable
from arbiter.associations.model import Associations, AssociationsRebuilt, LinkCandidates
from arbiter.changes.model import Changes
from arbiter.model import (
    Conversation,
    ConversationList,
    Density,
    Entry,
    EntryDetail,
    EntryList,
    ForgetResult,
    Graph,
    History,
    Pong,
    PurgeResult,
    RecallResult,
    RestoreResult,
    Relation,
    RememberManyResult,
    Remembered,
    RememberParams,
    Response,
    Status,
    TenantCreated,
    TenantList,
    UnlinkResult,
)

from arbiter.model import (
    Around,
    Backlinks,
    Briefing,
    OpenThreads,
    TagCooccurrence,
    Thread,
    TopicClusterResult,
    TopicClusters,
)

from arbiter.backup.model import BackupCreated
from arbiter.ui.model import GraphView
from arbiter.transfer.model import ExportPage, ImportProgress
from arbiter.facts.model import AspectList, Batch, BatchList, ExtractResult, FactHistory, FactList, Predicate, PredicateList

from arbiter.entities.model import Entity, EntityContext, EntityList, EntityRelation
from arbiter.model import MaintenanceReport, Membership, SalienceInfo, Shared, TeamList, UserCreated, UserList, Whoami

T = TypeVar("T")
_response_decoder = msgspec.json.Decoder(Response)
_encoder = msgspec.json.Encoder()


def _dropped(sock: socket.socket) -> bool:
    """True if the daemon closed this idle connection (idle timeout, restart): readable with no data."""
    try:
        poller = select.poll()  # not select(): it refuses a descriptor past 1023 (a process with many files open)
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0)) and sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except OSError:
        return True


def _drop_none(params: dict) -> dict:
    return {k: v for k, v in params.items() if v is not None}


def _given(named: dict) -> dict:
    """A typed method's parameters (its `locals()`) as the request's params: the daemon applies the defaults of
    what is left out (None)."""
    return {k: v for k, v in named.items() if k != "self" and v is not None}


#: What a time parameter takes: an RFC 3339 text or seconds since the epoch.
When = str | float | None


def no_daemon(socket_path, start_with: str = "arbiter serve") -> Unavailable:
    """The error for a socket nobody serves, with the command line that starts a daemon on it."""
    return Unavailable(f"no daemon on {socket_path}: start it with `{start_with}`")


class Client:
    """A synchronous connection to the daemon. Not thread-safe: one per thread."""

    def __init__(
        self, socket_path: str | Path, token: str | None = None, *, timeout: float | None = 60.0,
        check_code: bool = True, start_with: str = "arbiter serve",
    ):
        self.socket_path = Path(socket_path)
        self.token = token
        self.timeout = timeout
        #: The command line that starts a daemon on this socket, told to the user when none answers.
        self.start_with = start_with
        #: Compare the daemon's version and code fingerprint with ours on connect.
        self.check_code = check_code
        self._sock: socket.socket | None = None
        self._file = None
        self._ids = itertools.count(1)

    @classmethod
    def from_home(
        cls, home: Path | None = None, *, tenant: str = paths.DEFAULT_TENANT, user: str | None = None,
        socket_path: Path | None = None, **kw
    ) -> "Client":
        """A client for `tenant` (as `user`; default its first user) using the token file and socket under `home`."""
        home = home or paths.default_home()
        token = paths.read_secret(paths.user_token_path(home, tenant, user), f"user {user or tenant!r}")
        return cls(socket_path or paths.socket_path(home), token, **kw)

    # ---- plumbing -------------------------------------------------------------

    def connect(self) -> "Client":
        """Connect (again, if the daemon closed an idle connection) and check that it runs our code."""
        if self._sock is not None and _dropped(self._sock):
            self.close()
        if self._sock is None:
            self._sock = self._open()
            self._file = self._sock.makefile("rb")
            if self.check_code:
                try:
                    self._check_code()
                except BaseException:  # refused, outdated, lost: `with` never reaches __exit__
                    self.close()
                    raise
        return self

    def _open(self) -> socket.socket:
        # A full listen queue makes a non-blocking connect fail with EAGAIN at
        # once: the daemon is alive but behind on accepting. Retry until the timeout.
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        pause = 0.002
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(str(self.socket_path))
                return sock
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                raise no_daemon(self.socket_path, self.start_with) from None
            except BlockingIOError:
                sock.close()
                if deadline is not None and time.monotonic() + pause > deadline:
                    raise Unavailable(
                        f"the daemon on {self.socket_path} accepted no connection within {self.timeout:g}s "
                        "(its listen queue is full)"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)

    def _check_code(self) -> None:
        pong = self.call("ping", {}, Pong)
        ours = _code.current()
        if (pong.version, pong.code) != ours:
            raise DaemonOutdated(
                f"the daemon on {self.socket_path} runs arbiter {_code.describe(pong.version, pong.code)}, "
                f"this client {_code.describe(*ours)}: restart the daemon (arbiter stop; arbiter serve)"
            )

    def close(self) -> None:
        if self._sock is not None:
            self._file.close()
            self._sock.close()
            self._sock = self._file = None

    def __enter__(self) -> "Client":
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, method: str, params: dict | msgspec.Struct | None = None, result_type: type[T] = dict) -> T:
        """Send one request; return its result decoded as `result_type`, or raise its error."""
        self.connect()
        if isinstance(params, dict):
            params = _drop_none(params)
        request = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or {}}
        if self.token is not None:
            request["token"] = self.token
        lost: OSError | None = None
        try:
            self._sock.sendall(_encoder.encode(request) + b"\n")
        except OSError as e:
            lost = e  # the daemon may have closed after saying why (too many connections): read it
        try:
            line = self._file.readline()
        except OSError as e:
            line, lost = b"", lost or e
        if not line.endswith(b"\n"):  # nothing, or half an answer: the daemon closed the connection (or died)
            self.close()
            raise Unavailable(f"lost the daemon on {self.socket_path}: {lost}" if lost else
                              f"the daemon on {self.socket_path} closed the connection")
        response = _response_decoder.decode(line)
        if response.error is not None:
            err = response.error
            data = err.data or {}
            cls = BY_CODE.get(err.code, ArbiterError)
            raise cls(err.message, path=data.get("path"), existing_id=data.get("existing_id"), reason=data.get("reason"))
        return msgspec.json.decode(response.result, type=result_type)

    # ---- verbs ----------------------------------------------------------------

    def ping(self) -> Pong:
        return self.call("ping", {}, Pong)

    def status(self) -> Status:
        return self.call("status", {}, Status)

    def remember(
        self, *, type: str, title: str, content: str, tags: list[str] | None = None, source: str | None = None,
        conversation_id: int | None = None, new_conversation: str | None = None, parent_id: int | None = None,
        supersedes_ids: list[int] | None = None, valid_from: When = None, speaker: str | None = None,
        team: str | None = None, auto_tag: bool | None = None, auto_supersede: bool | None = None,
        entities: list[str | dict] | None = None, salience: float | None = None, permanent: bool | None = None,
        allow_duplicate: bool | None = None, extract_entities: bool | None = None, auto_link: bool | None = None,
        candidates: bool | None = None,
    ) -> Remembered:
        """Write one entry; `RememberParams` says what each field does."""
        return self.call("remember", _given(locals()), Remembered)

    def remember_many(self, entries: list[RememberParams | dict]) -> list[int]:
        """Write many entries in one transaction; returns their ids in order."""
        return self.call("remember_many", {"entries": entries}, RememberManyResult).ids

    def remember_batch(self, entries: list[RememberParams | dict], *, new_conversation: str | None = None
                       ) -> RememberManyResult:
        """`remember_many`, answering in full: the ids, and the conversation `new_conversation` started with them."""
        params = {"entries": entries, "new_conversation": new_conversation}
        return self.call("remember_many", params, RememberManyResult)

    def get(self, id: int, *, as_of: str | float | None = None, known_at: str | float | None = None) -> EntryDetail:
        """One entry valid now (or at `as_of`), as recorded now (or at `known_at`), with its salience now."""
        return self.call("get", {"id": id, "as_of": as_of, "known_at": known_at}, EntryDetail)

    def list(self, *, types: list[str] | None = None, tag: str | None = None, conversation_id: int | None = None,
             as_of: When = None, known_at: When = None, limit: int | None = None,
             before_id: int | None = None) -> list[Entry]:
        """Browse newest first; every filter is a hard filter (`ListParams`)."""
        return self.call("list", _given(locals()), EntryList).entries

    def update(self, id: int, *, type: str | None = None, title: str | None = None, content: str | None = None,
               tags: list[str] | None = None, source: str | None = None, speaker: str | None = None) -> Entry:
        """Correct an active entry in place; omitted fields keep their value (`UpdateParams`)."""
        return self.call("update", _given(locals()), Entry)

    def forget(self, id: int) -> bool:
        """Retire an entry; False if it was already retired."""
        return self.call("forget", {"id": id}, ForgetResult).forgotten

    def forget_with_replies(self, id: int) -> ForgetResult:
        """Retire an entry; the result says whether it was active, and which of your replies below it went too (`also`)."""
        return self.call("forget", {"id": id}, ForgetResult)

    def restore(self, id: int) -> bool:
        """Reopen a retired entry; False if it was active."""
        return self.call("restore", {"id": id}, RestoreResult).restored

    def purge(self, id: int) -> bool:
        return self.call("purge", {"id": id}, PurgeResult).purged

    def history(self, id: int, *, known_at: str | float | None = None) -> History:
        """The supersession chain through an entry and every recorded state of each (as recorded at `known_at`)."""
        return self.call("history", {"id": id, "known_at": known_at}, History)

    def link(self, source_id: int, relation: str, target_id: int, *, qualifier: str | None = None) -> Relation:
        """Relate two entries; `qualifier` (enables, prevents) only on `causes`."""
        params = {"source_id": source_id, "relation": relation, "target_id": target_id, "qualifier": qualifier}
        return self.call("link", params, Relation)

    def unlink(self, source_id: int, relation: str, target_id: int) -> bool:
        params = {"source_id": source_id, "relation": relation, "target_id": target_id}
        return self.call("unlink", params, UnlinkResult).removed

    def expand(self, id: int, *, depth: int | None = None, limit: int | None = None, as_of: When = None,
               known_at: When = None) -> Graph:
        """The entries linked to one, one or two hops out (`ExpandParams`)."""
        return self.call("expand", _given(locals()), Graph)

    def density(self, id: int) -> Density:
        return self.call("density", {"id": id}, Density)

    def recall(
        self, query: str = "", *, conversation_id: int | None = None, types: list[str] | None = None,
        tag: str | None = None, as_of: When = None, known_at: When = None, limit: int | None = None,
        explain: bool | None = None, intent: str | None = None, decay: bool | None = None,
        half_life_days: float | None = None, floor: float | None = None, disable: list[str] | None = None,
        excerpts: int | None = None, expand: bool | str | None = None, rerank: bool | str | None = None,
        rerank_fine: bool | str | None = None, deadline_ms: int | None = None, graph: bool | None = None,
    ) -> RecallResult:
        """Search (or browse with no query); `RecallParams` says what each knob does."""
        return self.call("recall", _given(locals()), RecallResult)

    def conversation_create(self, title: str) -> Conversation:
        return self.call("conversation_create", {"title": title}, Conversation)

    def conversation_list(self, limit: int = 100) -> list[Conversation]:
        return self.call("conversation_list", {"limit": limit}, ConversationList).conversations

    def conversation_get(self, id: int) -> Conversation:
        return self.call("conversation_get", {"id": id}, Conversation)

    def tenant_create(self, name: str) -> TenantCreated:
        """Admin: needs the admin token."""
        return self.call("tenant_create", {"name": name}, TenantCreated)

    def tenant_list(self) -> TenantList:
        """Admin: needs the admin token."""
        return self.call("tenant_list", {}, TenantList)

    # ---- users, teams, sharing ---------------------------------------------------

    def user_add(self, name: str) -> UserCreated:
        """Add a user (the tenant's first user only); the token is shown once."""
        return self.call("user_add", {"name": name}, UserCreated)

    def user_list(self) -> UserList:
        return self.call("user_list", {}, UserList)

    def user_rotate(self, name: str) -> UserCreated:
        """A new token for `name`; the old one stops working at once."""
        return self.call("user_rotate", {"name": name}, UserCreated)

    def team_add(self, name: str) -> Membership:
        return self.call("team_add", {"name": name}, Membership)

    def team_join(self, team: str, user: str) -> Membership:
        return self.call("team_join", {"team": team, "user": user}, Membership)

    def team_leave(self, team: str, user: str) -> Membership:
        return self.call("team_leave", {"team": team, "user": user}, Membership)

    def team_list(self) -> TeamList:
        return self.call("team_list", {}, TeamList)

    def share(self, id: int, team: str) -> Shared:
        """Share the thread rooted at `id` with `team`: every reply you see follows."""
        return self.call("share", {"id": id, "team": team}, Shared)

    def unshare(self, id: int) -> Shared:
        return self.call("unshare", {"id": id}, Shared)

    def whoami(self) -> Whoami:
        return self.call("whoami", {}, Whoami)

    # ---- threads, graph projection, topic clusters, briefing ---------------------

    def reply(self, parent_id: int, content: str, *, title: str | None = None, type: str | None = None,
              tags: list[str] | None = None, source: str | None = None, speaker: str | None = None) -> Entry:
        """Reply under `parent_id`; `title`, `type`, `tags`, `source` default to the parent's (no source)."""
        return self.call("reply", _given(locals()), Entry)

    def thread(self, id: int, *, as_of: str | float | None = None, known_at: str | float | None = None) -> Thread:
        """The thread through an entry: root and visible replies, oldest first."""
        return self.call("thread", {"id": id, "as_of": as_of, "known_at": known_at}, Thread)

    def open_threads(self, limit: int = 20) -> OpenThreads:
        return self.call("open_threads", {"limit": limit}, OpenThreads)

    def backlinks(self, id: int) -> Backlinks:
        return self.call("backlinks", {"id": id}, Backlinks)

    def around(self, id: int, k: int = 5) -> Around:
        return self.call("around", {"id": id, "k": k}, Around)

    def tag_cooccurrence(self, tag: str | None = None, limit: int = 50) -> TagCooccurrence:
        return self.call("tag_cooccurrence", {"tag": tag, "limit": limit}, TagCooccurrence)

    def topic_clusters(self) -> TopicClusters:
        return self.call("topic_clusters", {}, TopicClusters)

    def topic_cluster(self, tag: str, limit: int = 10) -> TopicClusterResult:
        return self.call("topic_cluster", {"tag": tag, "limit": limit}, TopicClusterResult)

    def briefing(self, max_bytes: int = 8192) -> Briefing:
        """The session briefing (markdown in `.text`)."""
        return self.call("briefing", {"max_bytes": max_bytes}, Briefing)

    # ---- ownership: backups ----------------------------------------------------

    def backup_create(self, path: str | Path, *, pages_per_step: int | None = None) -> BackupCreated:
        """Admin: copy the live database to `path` (a new file) while the daemon keeps serving."""
        params = {"path": str(Path(path).absolute()), "pages_per_step": pages_per_step}
        return self.call("backup_create", params, BackupCreated)

    # ---- entities ----------------------------------------------------------------

    def entities(self, query: str = "", *, type: str | None = None, limit: int = 50) -> list[Entity]:
        """Known entities, most mentioned first; `query` matches the start of a name or alias."""
        return self.call("entities", {"query": query, "type": type, "limit": limit}, EntityList).entities

    def entity_show(self, name: str, *, limit: int = 20) -> EntityContext:
        """An entity by name or alias: the entries mentioning it, its relations and its cluster."""
        return self.call("entity_show", {"name": name, "limit": limit}, EntityContext)

    def entity_merge(self, keep: str, other: str) -> Entity:
        """Fold `other` into `keep`; returns `keep` with its new aliases."""
        return self.call("entity_merge", {"keep": keep, "other": other}, Entity)

    def entity_rename(self, name: str, new_name: str) -> Entity:
        return self.call("entity_rename", {"name": name, "new_name": new_name}, Entity)

    def entity_relate(self, source: str, relation: str, target: str, *, weight: float = 1.0) -> EntityRelation:
        """Create or strengthen `source RELATION target`."""
        params = {"source": source, "relation": relation, "target": target, "weight": weight}
        return self.call("entity_relate", params, EntityRelation)

    # ---- the web view ------------------------------------------------------------

    def graph_view(self, *, as_of: str | float | None = None, limit: int = 2000, view: str = "entries") -> GraphView:
        """The newest `limit` entries visible at `as_of` (or `view="entities"`), the edges among them, the topics."""
        return self.call("graph_view", {"as_of": as_of, "limit": limit, "view": view}, GraphView)

    # ---- export and import -------------------------------------------------------

    def export_page(self, kind: str, *, after: int = 0, limit: int = 5000, tenant: str | None = None) -> ExportPage:
        """One page of records (`conversation`, `entry`, `relation`); `tenant` needs the admin token."""
        params = {"kind": kind, "after": after, "limit": limit}
        if tenant is not None:
            return self.call("export_page_admin", {**params, "tenant": tenant}, ExportPage)
        return self.call("export_page", params, ExportPage)

    def import_batch(self, *, digest: str, lines: int, first_line: int, records: list, source: str = "arbiter",
                     authors: bool = False) -> ImportProgress:
        """Write one batch of an export file's records (structs, dicts or `msgspec.Raw` lines); `authors`: keep each record's author (`--all`)."""
        params = {"digest": digest, "lines": lines, "first_line": first_line, "records": records, "source": source,
                  "authors": authors}
        return self.call("import_batch", params, ImportProgress)
    # ---- facts behind the evaluation gate ---------------------------------------------

    def facts_propose(self, facts: list[dict], *, origin: str | None = None, apply: bool | None = None,
                      threshold: float | None = None, note: str | None = None, team: str | None = None) -> Batch:
        """Propose a batch of candidate facts (`subject`, `predicate`, `object`, `confidence`, `sources`...); `apply=True` applies it through the gate."""
        return self.call("facts_propose", _given(locals()), Batch)

    def facts(self, subject: str | None = None, *, predicate: str | None = None, status: str | None = None,
              as_of: When = None, known_at: When = None, limit: int | None = None) -> FactList:
        """Active facts true now (`FactsParams`)."""
        return self.call("facts", _given(locals()), FactList)

    def fact_history(self, id: int) -> FactHistory:
        return self.call("fact_history", {"id": id}, FactHistory)

    def batch_list(self, status: str | None = None, limit: int = 50) -> BatchList:
        return self.call("batch_list", {"status": status, "limit": limit}, BatchList)

    def batch_show(self, id: int) -> Batch:
        return self.call("batch_show", {"id": id}, Batch)

    def batch_evaluate(self, id: int) -> Batch:
        return self.call("batch_evaluate", {"id": id}, Batch)

    def batch_apply(self, id: int) -> Batch:
        return self.call("batch_apply", {"id": id}, Batch)

    def batch_reject(self, id: int) -> Batch:
        return self.call("batch_reject", {"id": id}, Batch)

    def predicates(self) -> PredicateList:
        return self.call("predicates", {}, PredicateList)

    def predicate_declare(self, name: str, functional: bool = False) -> Predicate:
        return self.call("predicate_declare", {"name": name, "functional": functional}, Predicate)

    def fact_extract(self, entry_ids: list[int], *, apply: bool = False, threshold: float = 0.5,
                     team: str | None = None) -> ExtractResult:
        """Advisor extraction (needs ANTHROPIC_API_KEY on the daemon): the facts these entries state, proposed as a batch."""
        return self.call("fact_extract", {"entry_ids": entry_ids, "apply": apply, "threshold": threshold, "team": team},
                         ExtractResult)

    def aspects(self, subject: str | None = None, predicate: str | None = None) -> AspectList:
        return self.call("aspects", {"subject": subject, "predicate": predicate}, AspectList)

    # ---- salience and maintenance --------------------------------------------------

    def reinforce(self, id: int) -> SalienceInfo:
        """+0.15 salience for an active entry (up to +0.6 in all)."""
        return self.call("reinforce", {"id": id}, SalienceInfo)

    def maintain(self, *, min_salience: float = 0.01) -> MaintenanceReport:
        """Run maintenance for this tenant now; returns what it did."""
        return self.call("maintain", {"min_salience": min_salience}, MaintenanceReport)

    # ---- associations --------------------------------------------------------------

    def associations(self, id: int, *, kind: str | None = None, limit: int = 50) -> Associations:
        """What Arbiter derived around an entry: temporal, entity and similarity edges with their evidence."""
        return self.call("associations", {"id": id, "kind": kind, "limit": limit}, Associations)

    def link_candidates(self, id: int) -> LinkCandidates:
        """The links worth making from entry `id` (causal, similar): what `remember` returns with `candidates`."""
        return self.call("link_candidates", {"id": id}, LinkCandidates)

    def associations_rebuild(self) -> AssociationsRebuilt:
        """Derive the tenant's stored associations again from its entries."""
        return self.call("associations_rebuild", {}, AssociationsRebuilt)

    # ---- watching for changes ------------------------------------------------------

    def changes(self, ids: list[int] = ()) -> Changes:
        """Versions of the entries `ids` you see, and of your whole memory: poll and compare to see what moved."""
        return self.call("changes", {"ids": list(ids)}, Changes)
