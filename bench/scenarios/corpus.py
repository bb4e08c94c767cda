"""The fixture corpus: a small engineering team's memory, seeded fresh for every run.

45 entries in five categories, written by two users of one team:

- engineering tickets: `eng` (the umbrella tag), one priority `p0`-`p3`,
  one area `area:*`, `bug`/`feature`; shared with the team;
- architectural decisions: `decision`, `adr`, `architecture`; shared;
- operational runbooks: `runbook`, `ops`, `oncall` and one of
  `deploy`/`rollback`/`incident`; shared;
- session summaries: `session`, `summary` and `standup`/`retro`/`planning`;
  private to ana, the user every scenario's session runs as;
- unrelated noise: one tag of its own each, private to ana.

Threads have replies by both users (the multi-author scenario replies in
raj's thread), `adr-queue` supersedes `adr-queue-old`, and an incident
summary mentions two tickets by `#ID`. Each run gets a tenant of its own on
one daemon: its first user adds ana and raj, ana makes the team and adds
raj, all through the daemon's own verbs, so every run starts from the same
memory and nothing of one run is seen by another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from arbiter.client import Client

USER = "ana"
TEAMMATE = "raj"
TEAM = "eng"

# (name, author, title, priority, area, kind, content)
TICKETS = [
    ("login", "ana", "Login fails with 500 when the email has a plus sign", "p0", "area:auth", "bug",
     "Users with addresses like ana+test@example.com get a 500 from POST /login. The normaliser strips the plus "
     "part before the lookup, but the stored address keeps it."),
    ("pagination", "raj", "Search API returns duplicate rows across pages", "p1", "area:api", "bug",
     "GET /search?page=2 repeats the last rows of page 1 when two rows share a timestamp. Needs a tie-breaker on id."),
    ("darkmode", "ana", "Dark mode for the settings page", "p3", "area:ui", "feature",
     "Settings still renders white in dark mode. Use the design system's theme tokens instead of hex colours."),
    ("migration", "raj", "Orders migration locks the table for minutes", "p0", "area:db", "bug",
     "Adding the NOT NULL column to orders rewrites the table. Add it nullable, backfill in batches, then constrain."),
    ("ratelimit", "raj", "Rate-limit the public API per token", "p1", "area:api", "feature",
     "Token bucket per API token, 100 requests per minute, 429 with Retry-After. Redis holds the buckets."),
    ("session-expiry", "ana", "Sessions expire after 5 minutes on Safari", "p1", "area:auth", "bug",
     "Safari drops the refresh cookie because SameSite=None is missing the Secure flag on staging."),
    ("avatar", "ana", "Avatar upload accepts 40 MB files", "p2", "area:ui", "bug",
     "The client-side check is missing and the server limit is 50 MB. Cap at 5 MB on both sides."),
    ("index", "raj", "Slow customer lookup by email", "p1", "area:db", "bug",
     "customers.email has no index, so a lookup by email scans 2M rows. Add a unique index on lower(email)."),
    ("webhooks", "ana", "Retry failed webhooks with backoff", "p2", "area:api", "feature",
     "Webhooks are attempted once. Retry 5 times with exponential backoff and record each attempt."),
    ("sso", "raj", "Support Okta SSO for enterprise tenants", "p1", "area:auth", "feature",
     "SAML via Okta for the three enterprise pilots; map Okta groups to roles."),
    ("table-sort", "ana", "Sorting the invoices table loses the filter", "p3", "area:ui", "bug",
     "Clicking a column header resets the status filter because the query string is rebuilt from scratch."),
    ("deadlock", "raj", "Deadlock between invoice and payment writers", "p0", "area:db", "bug",
     "Two writers take row locks in opposite orders. Lock invoices before payments everywhere."),
]

# (name, author, title, content)
DECISIONS = [
    ("adr-postgres", "raj", "ADR-001: Postgres is the system of record",
     "Postgres stays the only system of record; analytics reads replicas. Rejected: a second store for events."),
    ("adr-queue-old", "raj", "ADR-002: Use RabbitMQ for background jobs",
     "Background jobs go through RabbitMQ with one queue per job type."),
    ("adr-queue", "raj", "ADR-003: Background jobs move to Postgres-backed queues",
     "Jobs move to a Postgres table read with SKIP LOCKED; one less service to run. Replaces ADR-002."),
    ("adr-monorepo", "ana", "ADR-004: One monorepo for services and web",
     "Services and the web app live in one repository with shared CI. Trade-off: slower checkouts."),
    ("adr-flags", "ana", "ADR-005: Feature flags live in the database",
     "Flags are rows, cached for 30 s per process; no third-party flag service."),
    ("adr-api-versioning", "raj", "ADR-006: Version the public API in the URL",
     "Public endpoints are /v1/...; breaking changes get /v2. Header versioning rejected as invisible in logs."),
    ("adr-observability", "ana", "ADR-007: OpenTelemetry for traces and metrics",
     "Instrument with OpenTelemetry and export to the managed collector."),
]

# (name, author, title, kind, content)
RUNBOOKS = [
    ("rb-deploy", "raj", "Runbook: deploy the API", "deploy",
     "1. Merge to main. 2. Wait for CI. 3. Run make release. 4. Watch the error rate for 10 minutes."),
    ("rb-rollback", "ana", "Runbook: roll back a bad release", "rollback",
     "Run make rollback VERSION=previous, then confirm the health check by hand and post in #incidents."),
    ("rb-db-failover", "raj", "Runbook: Postgres failover", "incident",
     "Promote the replica in the managed console, update the DATABASE_URL secret, restart the workers."),
    ("rb-pager", "ana", "Runbook: who to page and when", "incident",
     "SEV1: page the on-call engineer and the lead. SEV2: on-call only. Outside hours, SEV3 waits."),
    ("rb-certs", "raj", "Runbook: renew TLS certificates", "deploy",
     "Certificates renew automatically; if renewal fails, run certbot renew on the edge host and reload nginx."),
    ("rb-queue-stuck", "raj", "Runbook: background jobs stuck", "incident",
     "Look for long-running transactions holding SKIP LOCKED rows; cancel them and the jobs resume."),
    ("rb-hotfix", "ana", "Runbook: ship a hotfix", "deploy",
     "Branch from the release tag, cherry-pick, run the fast CI lane, deploy with make release."),
    ("rb-rollback-db", "raj", "Runbook: roll back a migration", "rollback",
     "Every migration has a down step: run it on a replica first, then on the primary during low traffic."),
]

# (name, title, kind, content): ana's own notes
SESSIONS = [
    ("s-standup-1", "Standup summary: Monday", "standup",
     "Ana on the login bug, Raj on pagination, Li reviewing the queue move. Blocker: staging certificates."),
    ("s-retro", "Retro summary: sprint 14", "retro",
     "Went well: the failover drill. Went badly: two hotfixes in one week. Action: a fast CI lane."),
    ("s-planning", "Planning summary: sprint 15", "planning",
     "Committed: rate limiting, SSO pilot, deadlock fix. Stretch: dark mode."),
    ("s-standup-2", "Standup summary: Wednesday", "standup",
     "Deadlock fix merged behind a flag. SSO blocked on the Okta sandbox."),
    ("s-retro-2", "Retro summary: sprint 15", "retro",
     "Went well: no hotfixes. Went badly: the SSO sandbox wait. Action: request sandboxes a sprint early."),
    ("s-planning-2", "Planning summary: sprint 16", "planning",
     "Committed: webhook retries, table sort, Safari sessions. Stretch: avatar limits."),
]

# (name, type, title, tag, content): ana's, unrelated to work
NOISE = [
    ("n-bread", "learning", "Sourdough starter ratio", "recipe",
     "Feed 1:5:5 starter:flour:water, twelve hours at room temperature."),
    ("n-book", "user", "Book to read: The Pragmatic Programmer", "books",
     "Recommended by Li; read the chapter on tracer bullets first."),
    ("n-plant", "user", "Water the office fig every Friday", "plants", "One litre, and turn the pot a quarter."),
    ("n-travel", "context", "Lisbon offsite hotel shortlist", "travel",
     "Three hotels near Cais do Sodre; decide by the 12th."),
    ("n-coffee", "learning", "Coffee machine descaling", "office",
     "Descale monthly with citric acid; the red light means it is overdue."),
]

# (name, parent, author, content): replies, in the order written
REPLIES = [
    ("login-r1", "login", "raj", "Reproduced on staging: the lookup uses the normalised address."),
    ("login-r2", "login-r1", "ana", "Fix: normalise on write too, and backfill the existing rows."),
    ("session-expiry-r1", "session-expiry", "raj", "Confirmed on Safari 17: the cookie is dropped after the first "
     "refresh. Production has the Secure flag; only staging is affected."),
    ("deadlock-r1", "deadlock", "raj", "Lock-order fix merged behind the flag; watching it for a week."),
    ("adr-queue-r1", "adr-queue", "ana", "Migrated the email and export jobs; billing is next."),
    ("rb-deploy-r1", "rb-deploy", "ana", "Add step 5: announce the release in #releases."),
]


@dataclass
class Fixture:
    """One seeded memory: its tenant, the users' tokens, and entry ids by fixture name."""

    tenant: str
    tokens: dict[str, str]
    ids: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, name: str) -> int:
        return self.ids[name]

    def name_of(self, entry_id: int) -> str | None:
        return next((n for n, i in self.ids.items() if i == entry_id), None)

    def client(self, socket: Path, user: str = USER) -> Client:
        return Client(socket, self.tokens[user])


def seed(socket: Path, admin_token: str, tenant: str) -> Fixture:
    """Make `tenant` (with ana, raj and team eng) and write the corpus into it."""
    with Client(socket, admin_token) as admin:
        owner_token = admin.tenant_create(tenant).token
    with Client(socket, owner_token) as owner:
        fx = Fixture(tenant, {u: owner.user_add(u).token for u in (USER, TEAMMATE)})
    with fx.client(socket, USER) as ana, fx.client(socket, TEAMMATE) as raj:
        ana.team_add(TEAM)
        ana.team_join(TEAM, TEAMMATE)
        by = {USER: ana, TEAMMATE: raj}

        def put(name: str, author: str, **params) -> None:
            fx.ids[name] = by[author].remember(**params).id

        for name, author, title, prio, area, kind, body in TICKETS:
            put(name, author, type="project", title=title, content=body, tags=["eng", prio, area, kind],
                source="tracker", team=TEAM)
        for name, author, title, body in DECISIONS:
            put(name, author, type="project", title=title, content=body, tags=["decision", "adr", "architecture"],
                team=TEAM)
        for name, author, title, kind, body in RUNBOOKS:
            put(name, author, type="reference", title=title, content=body, tags=["runbook", "ops", "oncall", kind],
                team=TEAM)
        for name, title, kind, body in SESSIONS:
            put(name, USER, type="context", title=title, content=body, tags=["session", "summary", kind])
        for name, etype, title, tag, body in NOISE:
            put(name, USER, type=etype, title=title, content=body, tags=[tag])
        for name, parent, author, body in REPLIES:
            fx.ids[name] = by[author].reply(fx[parent], body).id
        raj.link(fx["adr-queue"], "supersedes", fx["adr-queue-old"])
        raj.link(fx["rb-rollback-db"], "refines", fx["rb-rollback"])
        put("s-incident", USER, type="context", title="Incident summary: orders table locked",
            content=f"The orders migration (#{fx['migration']}) locked writes for 6 minutes. Rolled back with "
                    f"#{fx['rb-rollback-db']}; follow-up in #{fx['deadlock']}.",
            tags=["session", "summary", "incident"])
    return fx
