"""A realistic 45-entry memory in five themes, written through the real client.

Themes and their tag conventions:
- engineering tickets: `ticket`, one priority (`p0`-`p2`), one area (`area:*`), `bug`/`feature`;
- decisions: `decision`, `adr`, `architecture`, `tradeoff`;
- runbooks: `runbook`, `ops`, `oncall`, `deploy`/`rollback`/`incident`;
- session summaries: `session`, `summary`, `standup`/`retro`/`planning`;
- unrelated noise: personal odds and ends with one or two tags of their own.

Threads (replies via `parent_id`), `#ID` mentions and explicit relations
(`supersedes`, `refines`, `supports`) tie them together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arbiter.client import Client

THEME_TAGS = {
    "tickets": {"ticket", "p0", "p1", "p2", "area:api", "area:ui", "area:db", "area:auth", "bug", "feature"},
    "decisions": {"decision", "adr", "architecture", "tradeoff"},
    "runbooks": {"runbook", "ops", "oncall", "deploy", "rollback", "incident"},
    "sessions": {"session", "summary", "standup", "retro", "planning"},
}

TICKETS = [
    ("login", "Login fails with 500 when the email has a plus sign", "p0", "area:auth", "bug",
     "Users with addresses like ana+test@example.com get a 500 from POST /login. The normaliser lowercases and "
     "strips the plus part before the lookup, but the stored address keeps it."),
    ("pagination", "Search API returns duplicate rows across pages", "p1", "area:api", "bug",
     "GET /search?page=2 repeats the last three rows of page 1 when two rows share a timestamp. Needs a "
     "tie-breaker on id in the ORDER BY."),
    ("darkmode", "Dark mode for the settings page", "p2", "area:ui", "feature",
     "Settings still renders white in dark mode. Use the theme tokens from the design system instead of hex "
     "colours."),
    ("migration", "Orders migration locks the table for minutes", "p0", "area:db", "bug",
     "Adding the NOT NULL column to orders rewrites the table. Split it: add nullable, backfill in batches, then "
     "add the constraint."),
    ("ratelimit", "Rate-limit the public API per token", "p1", "area:api", "feature",
     "Token bucket per API token, 100 requests per minute, 429 with Retry-After. Redis is already available."),
    ("session-expiry", "Sessions expire after 5 minutes on Safari", "p1", "area:auth", "bug",
     "Safari drops the refresh cookie because SameSite=None is missing the Secure flag on staging."),
    ("avatar", "Avatar upload accepts 40 MB files", "p2", "area:ui", "bug",
     "The client-side check is missing and the server limit is 50 MB. Cap at 5 MB on both sides."),
    ("index", "Slow customer lookup by email", "p1", "area:db", "bug",
     "customers.email has no index; lookups scan 2M rows. Add a unique index on lower(email)."),
    ("webhooks", "Retry failed webhooks with backoff", "p2", "area:api", "feature",
     "Webhooks are attempted once. Retry 5 times with exponential backoff and record each attempt."),
    ("sso", "Support Okta SSO for enterprise tenants", "p1", "area:auth", "feature",
     "SAML via Okta for the three enterprise pilots; map groups to roles."),
    ("table-sort", "Sorting the invoices table loses the filter", "p2", "area:ui", "bug",
     "Clicking a column header resets the status filter because the query string is rebuilt from scratch."),
    ("deadlock", "Deadlock between invoice and payment writers", "p0", "area:db", "bug",
     "Two writers take row locks in opposite orders. Lock invoices before payments everywhere."),
]

DECISIONS = [
    ("adr-postgres", "ADR-001: Postgres is the system of record",
     "We keep Postgres as the only system of record; analytics reads replicas. Rejected: a second store for "
     "events."),
    ("adr-queue-old", "ADR-002: Use RabbitMQ for background jobs",
     "Background jobs go through RabbitMQ with one queue per job type."),
    ("adr-queue", "ADR-003: Background jobs move to Postgres-backed queues",
     "Jobs move to a Postgres table with SKIP LOCKED; one less service to run. Replaces ADR-002."),
    ("adr-monorepo", "ADR-004: One monorepo for services and web",
     "Services and the web app live in one repository with shared CI. Trade-off: slower checkouts."),
    ("adr-flags", "ADR-005: Feature flags live in the database",
     "Flags are rows, cached for 30 s per process; no third-party flag service."),
    ("adr-api-versioning", "ADR-006: Version the public API in the URL",
     "Public endpoints are /v1/...; breaking changes get /v2. Header versioning rejected as invisible in logs."),
    ("adr-typescript", "ADR-007: TypeScript strict mode everywhere",
     "All packages compile with strict: true. Migration is per package, tracked in the monorepo."),
    ("adr-observability", "ADR-008: OpenTelemetry for traces and metrics",
     "Instrument with OpenTelemetry; export to the managed collector. Trade-off: vendor-neutral but more setup."),
]

RUNBOOKS = [
    ("rb-deploy", "Runbook: deploy the API", "deploy",
     "1. Merge to main. 2. Wait for CI. 3. Run make release. 4. Watch error rate for 10 minutes."),
    ("rb-rollback", "Runbook: roll back a bad release", "rollback",
     "Run make rollback VERSION=previous; confirm the health check; post in #incidents."),
    ("rb-db-failover", "Runbook: Postgres failover", "incident",
     "Promote the replica with the managed console, update the DATABASE_URL secret, restart workers."),
    ("rb-pager", "Runbook: who to page and when", "incident",
     "SEV1: page the on-call engineer and the lead. SEV2: on-call only. Outside hours, SEV3 waits."),
    ("rb-certs", "Runbook: renew TLS certificates", "deploy",
     "Certificates renew automatically; if renewal fails, run certbot renew on the edge host and reload nginx."),
    ("rb-queue-stuck", "Runbook: background jobs stuck", "incident",
     "Check for long-running transactions holding SKIP LOCKED rows; cancel them; jobs resume."),
    ("rb-hotfix", "Runbook: ship a hotfix", "deploy",
     "Branch from the release tag, cherry-pick, run the fast CI lane, deploy with make release."),
    ("rb-rollback-db", "Runbook: roll back a migration", "rollback",
     "Every migration has a down step; run it on a replica first, then on primary during low traffic."),
]

SESSIONS = [
    ("s-standup-1", "Standup summary: Monday", "standup",
     "Ana on the login bug, Raj on pagination, Li reviewing the queue move. Blocker: staging certs."),
    ("s-retro", "Retro summary: sprint 14", "retro",
     "Went well: the failover drill. Went badly: two hotfixes in one week. Action: a fast CI lane."),
    ("s-planning", "Planning summary: sprint 15", "planning",
     "Committed: rate limiting, SSO pilot, deadlock fix. Stretch: dark mode."),
    ("s-standup-2", "Standup summary: Wednesday", "standup",
     "Deadlock fix merged behind a flag. SSO blocked on the Okta sandbox."),
    ("s-standup-3", "Standup summary: Friday", "standup",
     "Rate limiting done; webhooks retry in review."),
    ("s-retro-2", "Retro summary: sprint 15", "retro",
     "Went well: no hotfixes. Went badly: the SSO sandbox wait. Action: request sandboxes a sprint early."),
    ("s-planning-2", "Planning summary: sprint 16", "planning",
     "Committed: webhooks retry, table sort, Safari sessions. Stretch: avatar limits."),
]

NOISE = [
    ("n-bread", "Sourdough starter ratio", "learning", ["recipe"],
     "Feed 1:5:5 starter:flour:water, twelve hours at room temperature."),
    ("n-book", "Book to read: The Pragmatic Programmer", "user", ["books"],
     "Recommended by Li; the chapter on tracer bullets is the one to read first."),
    ("n-plant", "Water the office fig every Friday", "user", ["plants"],
     "One litre, and turn the pot a quarter."),
    ("n-travel", "Lisbon offsite hotel shortlist", "context", ["travel"],
     "Three hotels near Cais do Sodré; decide by the 12th."),
    ("n-coffee", "Coffee machine descaling", "learning", ["office"],
     "Descale monthly with citric acid; the red light means it is overdue."),
]


@dataclass
class Corpus:
    """Ids of the corpus entries by name, plus the threads and relations it made."""

    ids: dict[str, int] = field(default_factory=dict)
    thread_roots: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> int:
        return self.ids[name]

    def __len__(self) -> int:
        return len(self.ids)


def build(client: Client) -> Corpus:
    """Write the corpus through the daemon; 45 entries, 1 retired by supersession."""
    c = Corpus()

    def put(name: str, **params) -> int:
        c.ids[name] = client.remember(**params).id
        return c.ids[name]

    for name, title, prio, area, kind, body in TICKETS:
        put(name, type="project", title=title, content=body, tags=["ticket", prio, area, kind], source="tracker")
    for name, title, body in DECISIONS:
        extra = ["tradeoff"] if "Trade-off" in body or "Rejected" in body else []
        put(name, type="project", title=title, content=body, tags=["decision", "adr", "architecture", *extra])
    for name, title, kind, body in RUNBOOKS:
        put(name, type="reference", title=title, content=body, tags=["runbook", "ops", "oncall", kind])
    for name, title, kind, body in SESSIONS:
        put(name, type="context", title=title, content=body, tags=["session", "summary", kind])
    for name, title, etype, tags, body in NOISE:
        put(name, type=etype, title=title, content=body, tags=tags)

    # Threads: replies inherit the parent's type and tags.
    def reply(name: str, parent: str, content: str, **params) -> int:
        c.ids[name] = client.reply(c[parent], content, **params).id
        return c.ids[name]

    reply("login-r1", "login", "Reproduced on staging: the lookup uses the normalised address.")
    reply("login-r2", "login-r1", "Fix: normalise on write too, and backfill existing rows. See #%d." % c["index"])
    reply("login-r3", "login", "Deployed the fix; closing once the backfill finishes.", title="Login fix deployed")
    reply("deadlock-r1", "deadlock", "Lock-order fix merged behind the flag; watching for a week.")
    reply("rb-deploy-r1", "rb-deploy", "Add step 5: announce the release in #releases.", title="Deploy runbook step 5")
    reply("adr-queue-r1", "adr-queue", "Migrated the email and export jobs; billing next.")
    c.thread_roots = ["login", "deadlock", "rb-deploy", "adr-queue"]

    # Explicit relations and mentions.
    client.link(c["adr-queue"], "supersedes", c["adr-queue-old"])
    client.link(c["rb-rollback-db"], "refines", c["rb-rollback"])
    client.link(c["rb-queue-stuck"], "supports", c["adr-queue"])
    put("s-incident", type="context", title="Incident summary: orders table locked",
        content=f"The orders migration (#{c['migration']}) locked writes for 6 minutes. Rolled back with "
                f"#{c['rb-rollback-db']}; follow-up in #{c['deadlock']}.",
        tags=["session", "summary", "incident"])
    return c
