"""Would a statement stay on one tenant's node under Citus? The check behind tests/unit/test_pg_tenancy.py.

Citus routes a statement to one node when every distributed table it reads
or writes is pinned to one value of the distribution column. Arbiter
distributes every table that holds a tenant's data by `tenant_id`
(docs/architecture.md, "PostgreSQL"), and keeps the directory (tenants,
users, teams, memberships, scopes: small, read at every request, written
rarely) as reference tables, copied to every node. So a statement is
routable when, in each of its SELECT scopes (and an UPDATE's or DELETE's
target), every distributed table is pinned: `t.tenant_id = <parameter or
constant>`, or `t.tenant_id = u.tenant_id` with `u` pinned, in a conjunct of
its WHERE or JOIN ... ON, or of an enclosing scope that it is correlated
with. An INSERT into a distributed table names `tenant_id` among its
columns. The statements are parsed with sqlglot, as PostgreSQL reads them.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from arbiter.store.pg.citus import DIRECTORY

#: Reference tables: the directory every request reads, the same on every node (`arbiter distribute` places them).
REFERENCE = DIRECTORY


def _conjuncts(condition: exp.Expression | None) -> list[exp.Expression]:
    if condition is None:
        return []
    if isinstance(condition, exp.And):
        return _conjuncts(condition.left) + _conjuncts(condition.right)
    if isinstance(condition, exp.Paren):
        return _conjuncts(condition.this)
    return [condition]


def _is_value(node: exp.Expression) -> bool:
    return isinstance(node, (exp.Literal, exp.Placeholder, exp.Parameter)) or (
        isinstance(node, exp.Cast) and _is_value(node.this))


def _tenant_column(node: exp.Expression, aliases: set[str], only: str | None) -> str | None:
    """The alias whose tenant_id `node` is (an unqualified one belongs to the scope's only table)."""
    if isinstance(node, exp.Column) and node.name == "tenant_id":
        table = node.table or only
        return table if table in aliases else None
    return None


def _pins(scope: Scope, conditions: list[exp.Expression], candidates: set[str], outer: set[str]) -> set[str]:
    """The aliases among `candidates` pinned by `conditions` (outer aliases already pinned count as values)."""
    only = next(iter(candidates)) if len(candidates) == 1 else None
    pinned: set[str] = set()
    pairs: list[tuple[str, str]] = []
    for c in conditions:
        if not isinstance(c, exp.EQ):
            continue
        left = _tenant_column(c.left, candidates | outer, only)
        right = _tenant_column(c.right, candidates | outer, only)
        if left and _is_value(c.right):
            pinned.add(left)
        elif right and _is_value(c.left):
            pinned.add(right)
        elif left and right:
            pairs.append((left, right))
    pinned |= outer
    changed = True
    while changed:
        changed = False
        for a, b in pairs:
            for x, y in ((a, b), (b, a)):
                if y in pinned and x not in pinned:
                    pinned.add(x)
                    changed = True
    return pinned & candidates


def _scope_conditions(node: exp.Expression) -> list[exp.Expression]:
    out = _conjuncts(node.args.get("where").this if node.args.get("where") else None)
    for join in node.args.get("joins") or []:
        out += _conjuncts(join.args.get("on"))
    return out


def fan_outs(sql: str) -> list[str]:
    """Why `sql` would have to reach more than one tenant's node: one reason per unpinned table (none: routable)."""
    problems: list[str] = []
    for statement in sqlglot.parse(sql, read="postgres"):
        if statement is None:
            continue
        problems += _statement(statement)
    return problems


def _distributed(table: exp.Table) -> bool:
    """A table Citus spreads by tenant: not the directory, not the catalog (every node has its own), and not a
    set-returning function in FROM (json_each, generate_series: computed where the statement runs)."""
    if not isinstance(table.this, exp.Identifier):
        return False
    return table.name not in REFERENCE and not table.name.startswith("pg_") and table.db != "information_schema"


def _correlated(scope: Scope) -> bool:
    """Whether a subquery takes its tenant from the row around it: one in a WHERE (EXISTS, IN), or a branch of a
    UNION that is. Citus pins a subquery of a SELECT list, an ORDER BY or a JOIN to one shard only by a constant
    (`t.tenant_id = x.tenant_id` there went to every shard, or was refused: measured on Citus 13.2, bench/citus.py)."""
    around = scope.parent.expression
    if isinstance(around, exp.SetOperation):
        return True
    node, keys = scope.expression, set()
    while node is not None and node is not around:
        keys.add(node.arg_key)
        node = node.parent
    return "where" in keys


def _statement(statement: exp.Expression) -> list[str]:
    problems: list[str] = []
    # A CTE's name is no table, though one whose body is a DELETE ... RETURNING is read as one.
    named = {cte.alias for cte in statement.find_all(exp.CTE)}
    if isinstance(statement, exp.Insert):
        target = statement.this
        table = target.this if isinstance(target, exp.Schema) else target
        columns = [c.name for c in target.expressions] if isinstance(target, exp.Schema) else []
        if isinstance(table, exp.Table) and _distributed(table) and "tenant_id" not in columns:
            problems.append(f"INSERT INTO {table.name} names no tenant_id")
    if isinstance(statement, (exp.Update, exp.Delete)):
        table = statement.this
        if isinstance(table, exp.Table) and _distributed(table):
            alias = table.alias_or_name
            conditions = _conjuncts(statement.args.get("where").this if statement.args.get("where") else None)
            if alias not in _pins(None, conditions, {alias}, set()):
                problems.append(f"{type(statement).__name__.upper()} {table.name} without a tenant filter")
    memo: dict[int, set[str]] = {}

    def pinned(scope: Scope) -> set[str]:
        """The aliases pinned in `scope` or, for a correlated subquery of a WHERE, in any scope around it."""
        if id(scope) not in memo:
            outer = pinned(scope.parent) if scope.parent is not None and _correlated(scope) else set()
            aliases = {alias for alias, src in scope.sources.items() if isinstance(src, exp.Table)}
            memo[id(scope)] = _pins(scope, _scope_conditions(scope.expression), aliases, outer) | outer
        return memo[id(scope)]

    for scope in traverse_scope(statement):
        for alias, src in scope.sources.items():
            if isinstance(src, exp.Table) and _distributed(src) and src.name not in named and alias not in pinned(scope):
                problems.append(f"{src.name}{'' if alias == src.name else ' ' + alias} without a tenant filter")
    return problems


#: Statements that read or write every tenant by design, each with why: the statement's start (whitespace as
#: sent) and the reason. Anything else that fans out fails the test that sent it (`Checker`).
EVERY_TENANT: tuple[tuple[str, str], ...] = (
    ("SELECT tenant_id FROM derive_queue WHERE deriver = ",
     "the idle writer's look for whose queued entry waits longest (derive.step): a read that locks nothing; what "
     "it then takes and writes is that one tenant's"),
    ("SELECT count(*) FROM derive_queue WHERE deriver IN (",
     "the whole derivation queue's length (derive.pending without a tenant): tests and benches waiting for it"),
    ("SELECT count(DISTINCT (scope_id, seg)) FROM fulltext_docs WHERE kind = 1 ",
     "how many segments the full-text indexes hold (recall.maintain.segments): tests and benches watching the "
     "idle compaction"),
)


#: Modules whose statements are not checked, each with why.
UNCHECKED: dict[str, str] = {
    # By design: run once per database, before any tenant's request.
    "store/pg/db.py": "the schema steps (migrations), the check that a database is Arbiter's, and the tables' "
                      "statistics (ANALYZE, of the whole table by nature)",
    "transfer/migrate.py": "`arbiter migrate` copies the whole database, every tenant's rows, from one engine to the "
                           "other (an operator's verb, run with no daemon serving)",
}


def excused(sql: str) -> str | None:
    """Why `sql` may reach every tenant, if it is one of the named exceptions (admin verbs listing tenants
    included: the tenants table is the directory, but what they join to it is every tenant's)."""
    text = " ".join(sql.split())
    for start, why in EVERY_TENANT:
        if text.startswith(start):
            return why
    if " FROM tenants" in text:
        return "an admin verb listing tenants (`arbiter tenants`)"
    return None


#: Statement text -> why it fans out ([]: it does not, or is excused), for the whole test run.
_verdicts: dict[str, list[str]] = {}


class Checker:
    """A `Connection.trace` hook: reads each distinct statement Arbiter sends once in the run; `problems` holds
    (statement, reasons, where in arbiter/ it was sent) for each that would fan out."""

    def __init__(self):
        self.problems: list[tuple[str, list[str], str]] = []
        #: Every distinct statement traced.
        self.sent: set[str] = set()

    def __call__(self, sql: str) -> None:
        self.sent.add(sql)
        if _verdicts.get(sql) != []:
            self.check(sql, _sender())

    def check(self, sql: str, where: str | None) -> None:
        """Judge `sql`, sent from `where` in arbiter/ (None: a test's own statement)."""
        if where is None or where.split(":")[0] in UNCHECKED:
            return
        why = _verdicts.get(sql)
        if why is None:
            why = _verdicts[sql] = [] if excused(sql) else fan_outs(sql)
        if why and not any(p[0] == sql for p in self.problems):
            self.problems.append((sql, why, where))

    def read(self, report, start: int) -> int:
        """Judge what daemons wrote to `report` from byte `start` (`traced_to`); where its last whole line ends."""
        import json

        with open(report, "rb") as f:
            f.seek(start)
            written = f.read()
        whole = written[:written.rfind(b"\n") + 1]  # a daemon may be writing its next line
        for line in whole.splitlines():
            self.check(*json.loads(line))
        return start + len(whole)

    def report(self) -> str:
        return "\n".join(f"{where}: {', '.join(why)}\n    {' '.join(sql.split())}" for sql, why, where in self.problems)


def traced_to(report: str) -> None:
    """In a daemon a test started (tests/zygote.py): append each distinct statement this process sends to
    PostgreSQL, and where in arbiter/ it was sent, to `report` as a JSON line, for the test's process to judge
    (`Checker.read`); at once, so a daemon killed mid-test has said what it sent."""
    import json

    from arbiter.store.pg.connection import Connection

    seen: set[str] = set()

    def trace(sql: str) -> None:
        if sql not in seen:
            seen.add(sql)
            with open(report, "a", encoding="utf-8") as f:
                f.write(json.dumps([sql, _sender()]) + "\n")

    Connection.trace = staticmethod(trace)


def _sender() -> str | None:
    """Where in arbiter/ the statement being traced was sent (None: a test's own statement, not the engine's)."""
    import sys

    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if "/arbiter/" in name and not name.endswith("store/pg/connection.py"):
            return f"{name.rsplit('/arbiter/', 1)[1]}:{frame.f_lineno}"
        if "/tests/" in name:
            return None
        frame = frame.f_back
    return None
