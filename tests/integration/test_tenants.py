"""Tenant isolation through the real daemon: another tenant's id is indistinguishable from a missing one."""

from __future__ import annotations

import random
import re
import stat

import pytest

from arbiter import paths
from arbiter.client import Client
from arbiter.errors import ArbiterError, Conflict, InvalidParams, Unauthorized
from tests.conftest import arbiter_cli


@pytest.fixture
def two(daemon):
    """(mine, theirs): clients of the default tenant and of a second tenant, `other`."""
    with Client(daemon.socket, daemon.admin_token) as admin:
        created = admin.tenant_create("other")
    with daemon.client() as mine, daemon.client(created.token) as theirs:
        yield mine, theirs


def error_of(call) -> ArbiterError:
    with pytest.raises(ArbiterError) as info:
        call()
    return info.value


def same_error(foreign: int, missing: int, call) -> None:
    """`call(id)` fails identically for another tenant's id and for an id that does not exist."""
    got, baseline = error_of(lambda: call(foreign)), error_of(lambda: call(missing))
    assert type(got) is type(baseline)
    assert got.path == baseline.path
    assert re.sub(rf"\b{foreign}\b", "ID", got.message) == re.sub(rf"\b{missing}\b", "ID", baseline.message)


def test_another_tenants_id_looks_missing_to_every_verb(two):
    mine, theirs = two
    t1 = theirs.remember(type="project", title="Their secret", content="launch codes", tags=["secret"])
    t2 = theirs.remember(type="project", title="Their other", content="more", supersedes_ids=[t1.id])
    theirs.link(t2.id, "relates_to", theirs.remember(type="user", title="x", content="y").id)
    conv = theirs.conversation_create("their conversation")
    m = mine.remember(type="project", title="Mine", content="my own")
    missing = 987_654
    foreign = t2.id
    before = theirs.status()

    same_error(foreign, missing, lambda i: mine.get(i))
    same_error(t1.id, missing, lambda i: mine.get(i, as_of="2100-01-01T00:00:00Z"))
    same_error(foreign, missing, lambda i: mine.link(m.id, "relates_to", i))
    same_error(foreign, missing, lambda i: mine.link(i, "supports", m.id))
    same_error(foreign, missing, lambda i: mine.link(i, "supersedes", m.id))
    same_error(foreign, missing, lambda i: mine.unlink(i, "relates_to", m.id))
    same_error(foreign, missing, lambda i: mine.expand(i, depth=2))
    same_error(foreign, missing, lambda i: mine.forget(i))
    same_error(foreign, missing, lambda i: mine.purge(i))
    same_error(foreign, missing, lambda i: mine.history(i))
    same_error(t1.id, missing, lambda i: mine.history(i))
    same_error(t1.id, missing, lambda i: mine.history(i, known_at="2100-01-01T00:00:00Z"))
    same_error(t1.id, missing, lambda i: mine.get(i, known_at="2100-01-01T00:00:00Z"))
    same_error(t1.id, missing, lambda i: mine.restore(i))  # retired there: missing here, not "retired"
    same_error(t1.id, missing, lambda i: mine.link(m.id, "supersedes", i))
    same_error(foreign, missing, lambda i: mine.thread(i, known_at="2100-01-01T00:00:00Z"))
    same_error(foreign, missing, lambda i: mine.density(i))
    same_error(foreign, missing, lambda i: mine.update(i, title="pwned"))
    same_error(foreign, missing, lambda i: mine.remember(type="user", title="r", content="c", parent_id=i))
    same_error(foreign, missing, lambda i: mine.remember(type="user", title="r", content="c", supersedes_ids=[m.id, i]))
    same_error(foreign, missing, lambda i: mine.remember_many(
        [{"type": "user", "title": "r", "content": "c", "supersedes_ids": [i]}]))
    same_error(conv.id, missing, lambda i: mine.remember(type="user", title="r", content="c", conversation_id=i))
    same_error(conv.id, missing, lambda i: mine.conversation_get(i))

    # A self-loop is refused before any lookup, so it says nothing about the id either.
    assert type(error_of(lambda: mine.link(foreign, "relates_to", foreign))) is InvalidParams

    # Nothing of theirs changed, and none of mine was written by the failed calls.
    assert theirs.status() == before
    assert theirs.get(t2.id).title == "Their other"
    assert [e.id for e in mine.list(limit=1000)] == [m.id]


def test_reads_never_cross_tenants(two):
    mine, theirs = two
    t = theirs.remember(type="project", title="Zanzibar plan", content="zanzibar zanzibar", tags=["travel"])
    conv = theirs.conversation_create("trip")
    theirs.remember(type="project", title="In conv", content="zanzibar", conversation_id=conv.id)
    m = mine.remember(type="project", title="Mine", content="nothing here", tags=["travel"])
    assert mine.recall("zanzibar").hits == []
    assert [h.id for h in theirs.recall("zanzibar").hits] != []
    assert [e.id for e in mine.list(tag="travel")] == [m.id]
    same_error(conv.id, conv.id + 1000, lambda i: mine.list(conversation_id=i))
    same_error(conv.id, conv.id + 1000, lambda i: mine.recall("zanzibar", conversation_id=i))
    assert mine.conversation_list() == []
    assert mine.status().entries_active == 1
    assert theirs.status().entries_active == 2
    assert t.id not in {n.id for n in mine.expand(m.id).nodes}


def test_admin_verbs_need_the_admin_token(daemon):
    with daemon.client() as tenant:
        for call in (lambda: tenant.tenant_create("sneaky"), tenant.tenant_list):
            err = error_of(call)
            assert type(err) is Unauthorized and err.path == "token"
    with Client(daemon.socket, daemon.admin_token) as admin:
        assert [t.name for t in admin.tenant_list().tenants] == ["default"]
        admin.tenant_create("second")
        assert type(error_of(lambda: admin.tenant_create("second"))) is Conflict
        assert type(error_of(lambda: admin.tenant_create("bad name"))) is InvalidParams
        assert [t.name for t in admin.tenant_list().tenants] == ["default", "second"]
        # The admin token is not a tenant token.
        assert type(error_of(admin.status)) is Unauthorized


def cli(home, *args, check=True):
    proc = arbiter_cli(home, *args)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_tenant_add_writes_a_0600_token_file(daemon):
    out = cli(daemon.home, "tenant", "add", "research").stdout
    path = paths.token_path(daemon.home, "research")
    token = path.read_text().strip()
    assert token in out  # printed once, for the user to copy
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(paths.admin_token_path(daemon.home).stat().st_mode) == 0o600
    # The CLI picks the token up by tenant name.
    cli(daemon.home, "--tenant", "research", "remember", "--type", "user", "--title", "R", "--content", "c")
    assert cli(daemon.home, "--tenant", "research", "status", "--json").stdout.count('"entries_active":1') == 1
    assert '"entries_active":0' in cli(daemon.home, "status", "--json").stdout
    again = cli(daemon.home, "tenant", "add", "research", check=False)
    assert again.returncode == 1 and "Traceback" not in again.stderr
    assert path.read_text().strip() == token  # a refused add does not clobber the saved token
    unknown = cli(daemon.home, "--tenant", "nobody", "status", check=False)
    assert unknown.returncode == 1 and len(unknown.stderr.strip().splitlines()) == 1



def test_adding_a_tenant_or_user_keeps_a_token_file_the_home_already_holds(daemon):
    """Tokens are stored hashed: a file under HOME/tenants can be the only copy of a token another database of
    the home gave a tenant or user of that name (`serve --db scratch.db`). Adding one here wrote over it."""
    tenant_file, user_file = paths.token_path(daemon.home, "research"), paths.user_token_path(
        daemon.home, "default", "bob")
    for path in (tenant_file, user_file):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.write_text("arbt_held_elsewhere\n")
    for args, path in ((("tenant", "add", "research"), tenant_file), (("user", "add", "bob"), user_file)):
        refused = cli(daemon.home, *args, check=False)
        assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert f"{path} already holds a token" in refused.stderr and "nothing was created" in refused.stderr
        assert path.read_text() == "arbt_held_elsewhere\n"
    assert "research" not in cli(daemon.home, "tenant", "list").stdout
    assert "bob" not in cli(daemon.home, "user", "list").stdout
    # An empty file holds no token: it is written over.
    user_file.write_text("")
    assert "user bob" in cli(daemon.home, "user", "add", "bob").stdout and user_file.read_text().strip()
    # A name taken here is the daemon's to refuse: the file is that name's own, not a stranger's.
    admin = paths.admin_token_path(daemon.home).read_text()
    for args in (("tenant", "add", "default"), ("user", "add", "bob"), ("user", "add", "default")):
        refused = cli(daemon.home, *args, check=False)
        assert refused.returncode == 1 and "already exists" in refused.stderr, (args, refused.stderr)
    # A name is checked before it names a file: "../admin" named the admin token's.
    for args in (("tenant", "add", "../admin"), ("user", "add", "../../admin")):
        refused = cli(daemon.home, *args, check=False)
        assert refused.returncode == 1 and refused.stderr.startswith("arbiter: error: NAME: a name is letters"), \
            refused.stderr
    assert paths.admin_token_path(daemon.home).read_text() == admin

def test_status_does_not_move_with_another_tenants_writes(two, daemon):
    mine, theirs = two
    mine.remember(type="user", title="mine", content="a little")
    before = mine.call("status", {}, dict)
    # Text that does not compress away (the file stores it deflated): ~1 MB however it is stored.
    rng = random.Random(11)
    theirs.remember_many([{"type": "reference", "title": f"bulk {i}", "content": "%x" % rng.getrandbits(16_000)}
                          for i in range(250)])
    assert mine.call("status", {}, dict) == before  # every figure, raw off the wire
    with Client(daemon.socket, daemon.admin_token) as admin:
        assert admin.tenant_list().db_bytes > 1_000_000  # the admin still sees the file's size
