"""The exception tree. Each class maps to one stable JSON-RPC error code.

The core raises these; the daemon turns them into wire errors; the client
turns wire errors back into the same classes; the CLI turns them into one line.
"""

from __future__ import annotations


class ArbiterError(Exception):
    """Base class; on the wire, an unexpected failure inside the daemon (logged there)."""

    code = -32603
    name = "internal_error"

    def __init__(self, message: str, *, path: str | None = None, existing_id: int | None = None,
                 reason: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.existing_id = existing_id
        #: What is wrong with the field `path`, in words that do not name it (set by `at`: the message is
        #: `path: reason`). A front end that spells the field otherwise (the CLI's `--conversation`) puts its
        #: own name before it; None when the message is a sentence of its own ("entry 7 not found").
        self.reason = reason

    @classmethod
    def at(cls, path: str, reason: str, **fields):
        """The error about the field `path`: its message is `path: reason`."""
        return cls(f"{path}: {reason}", path=path, reason=reason, **fields)

    def data(self) -> dict | None:
        """The JSON-RPC `data` member: the stable name plus any fields."""
        out: dict = {"name": self.name}
        if self.path is not None:
            out["path"] = self.path
        if self.existing_id is not None:
            out["existing_id"] = self.existing_id
        if self.reason is not None:
            out["reason"] = self.reason
        return out


class FieldError(ValueError):
    """A params Struct's own check refused `field` (raised in `__post_init__`, where msgspec takes a ValueError)."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class ParseError(ArbiterError):
    """The frame is not valid UTF-8 JSON."""

    code = -32700
    name = "parse_error"


class InvalidRequest(ArbiterError):
    """The frame is JSON but not a JSON-RPC 2.0 request, or is too large."""

    code = -32600
    name = "invalid_request"


class MethodNotFound(ArbiterError):
    """No verb has this name."""

    code = -32601
    name = "method_not_found"


class InvalidParams(ArbiterError):
    """A parameter has the wrong type, an unknown value or is out of limits; `path` names it."""

    code = -32602
    name = "invalid_params"


class NotFound(ArbiterError):
    """No such row in the caller's tenant (or it is not visible at the requested time)."""

    code = -32001
    name = "not_found"


class Conflict(ArbiterError):
    """The write collides with an existing row; `existing_id` names it."""

    code = -32002
    name = "conflict"


class Unauthorized(ArbiterError):
    """The token is missing, matches no tenant, or is not the admin token an admin verb needs."""

    code = -32003
    name = "unauthorized"


class SchemaTooNew(ArbiterError):
    """The database was written by a newer Arbiter than this one."""

    code = -32004
    name = "schema_too_new"


class Unavailable(ArbiterError):
    """The daemon cannot be reached, or another daemon already owns the socket."""

    code = -32005
    name = "unavailable"


class StorageFull(ArbiterError):
    """The disk holding the database is full: the write changed nothing; reads still work."""

    code = -32006
    name = "storage_full"


class DaemonOutdated(ArbiterError):
    """The daemon runs other code than the client (an upgrade since it started): restart it."""

    code = -32007
    name = "daemon_outdated"


class Forbidden(ArbiterError):
    """The caller sees the row but may not do this to it: another user's entry, or a step for the tenant's first user."""

    code = -32008
    name = "forbidden"


BY_CODE: dict[int, type[ArbiterError]] = {
    cls.code: cls
    for cls in (
        ArbiterError,
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        NotFound,
        Conflict,
        Unauthorized,
        SchemaTooNew,
        Unavailable,
        StorageFull,
        DaemonOutdated,
        Forbidden,
    )
}
