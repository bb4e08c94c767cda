"""Deterministic entity extraction from an entry's text: patterns and a dictionary, no LLM.

What counts as a name (each a `Found(name, type)`, first occurrence first):

- a term of the built-in dictionary (`TERMS`: languages, databases, clouds,
  frameworks, developer tools also written in lower case, everyday
  software, companies), matched case-insensitively and named canonically
  ("postgres" is PostgreSQL), type from the dictionary; formats and
  protocols (JSON, HTTP) are not in it;
- CamelCase words ("MemoryGraph", "PostgreSQL");
- ALL-CAPS acronyms of 3–10 characters ("AWS", "GDPR"), minus shouts and
  `COMMON_ACRONYMS` (units, formats, time zones, roles: "UTC", "LLM",
  "SLA"); a pair of capitals ("DB", "PR", "QA", "UI") is mostly a common
  noun abbreviated, so, like a single capitalised word, it is left to
  `capitalised`;
- file paths ("src/app/main.py", "~/notes.md") and URLs;
- @-mentions ("@alice", a person), and a name after an honorific ("Dr.
  Patel" is the person Patel);
- capitalised multi-word names in the Latin scripts ("Zoë Lindqvist",
  "Okafor & Sons", "UC Berkeley"); at a sentence start a common opening
  word, verb or role is dropped ("Met Lee Chen" is Lee Chen) and what is
  left is kept if still two words; a Title Case first line names nothing;
- quoted titles: a double-quoted phrase of at most eight words that starts
  with a capital ("read “Designing Data-Intensive Applications”").

Single capitalised words are `capitalised`'s: whether one is a name depends
on where it stands and on the tenant's other entries (`evidence.py`).

Kept simple on purpose: extraction runs on every `remember`, so it is a few
compiled regular expressions over the title and content and one dictionary
lookup per word. A name is 1–128 characters; longer matches are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from arbiter.entities.names import COMPANY_SUFFIXES, key

NAME_MAX = 128
# Extraction reads at most this much of an entry: a 64 KB paste of a log
# would otherwise yield hundreds of "entities" and cost milliseconds.
SCAN_MAX = 8192
# At most this many extracted names per entry (caller-given names are not capped).
PER_ENTRY_MAX = 24


@dataclass(frozen=True, slots=True)
class Found:
    name: str
    type: str


def _terms(kind: str, words: str) -> dict[str, tuple[str, str]]:
    return {w.casefold(): (w, kind) for w in words.split()}


# Canonical spellings; the key is the case-folded form. Aliases map a common
# other spelling to the canonical one ("postgres" -> "PostgreSQL").
TERMS: dict[str, tuple[str, str]] = {
    **_terms("tool", (
        # languages
        "Python Java JavaScript TypeScript Go Golang Rust C C++ C# Ruby PHP Perl Kotlin Swift Scala Haskell Elixir "
        "Erlang Clojure Lua Julia R MATLAB Fortran COBOL Dart Zig Nim OCaml F# Bash Zsh PowerShell SQL HTML CSS "
        "WebAssembly Solidity Groovy Objective-C Assembly Lisp Scheme Racket Prolog Crystal "
        # databases and stores
        "PostgreSQL MySQL MariaDB SQLite MongoDB Redis Cassandra DynamoDB Elasticsearch OpenSearch Neo4j CockroachDB "
        "ClickHouse Snowflake BigQuery Redshift Oracle Memcached InfluxDB TimescaleDB Couchbase CouchDB Firebase "
        "Supabase DuckDB Kafka RabbitMQ NATS Pulsar etcd Consul Zookeeper Pinecone Milvus Qdrant Weaviate FAISS "
        "LevelDB RocksDB HBase Hive Presto Trino Spark Flink Hadoop Airflow dbt Dagster Prefect "
        # clouds and platforms
        "AWS GCP Azure Heroku Vercel Netlify Cloudflare DigitalOcean Linode Fly.io Render OpenShift S3 EC2 Lambda "
        "CloudFront ECS EKS GKE AKS Fargate "
        # frameworks and libraries
        "React Vue Angular Svelte Next.js Nuxt Remix Django Flask FastAPI Rails Laravel Spring Express NestJS "
        "Node.js Deno Bun jQuery Redux GraphQL gRPC REST Tailwind Bootstrap PyTorch TensorFlow Keras JAX NumPy "
        "pandas scikit-learn SciPy Matplotlib Jupyter Hugging LangChain LlamaIndex OpenCV Celery SQLAlchemy "
        "Pydantic msgspec pytest Jest Mocha Cypress Playwright Selenium Storybook Vite Webpack Babel ESLint "
        "Prettier Electron Flutter Qt GTK Unity Unreal "
        # tools and infrastructure
        "Git GitHub GitLab Bitbucket Docker Kubernetes Helm Terraform Ansible Puppet Chef Vagrant Packer Nomad "
        "Vault Jenkins CircleCI Travis Buildkite ArgoCD Prometheus Grafana Datadog Sentry Splunk Kibana Logstash "
        "Jaeger OpenTelemetry Nginx Apache Caddy HAProxy Envoy Istio Linux Ubuntu Debian Fedora Alpine CentOS "
        "macOS Windows Android iOS FreeBSD npm pip Poetry Conda Cargo Maven Gradle Bazel Make CMake Homebrew "
        "VSCode Vim Neovim Emacs IntelliJ PyCharm Xcode Slack Jira Confluence Notion Figma Trello Zoom "
        "Postman Swagger OpenAPI JSON YAML TOML XML CSV Protobuf Parquet Avro OAuth JWT SAML LDAP SSH TLS HTTP "
        "HTTPS WebSocket TCP UDP DNS CDN VPN MCP ChatGPT Claude GPT-4 Llama Mistral Gemini Copilot Ollama "
        # command-line and developer tools, written in lower case in notes ("piped it through jq")
        "kubectl k9s minikube kustomize skaffold Tilt jq yq ripgrep fd fzf tmux htop wget ffmpeg rsync "
        "pgbouncer pg_dump pg_restore pg_upgrade pgvector psycopg sqlx Alembic gunicorn uvicorn certbot uv ruff "
        "isort flake8 mypy pyright pylint tox nox pre-commit pipx pyenv nvm pnpm Yarn esbuild Vitest Biome "
        "freezegun Hypothesis Locust k6 grpcurl HTTPie ngrok Tailscale WireGuard systemd journalctl strace gdb "
        "Valgrind direnv Podman docker-compose Pulumi OpenTofu Loki Tempo Mimir Thanos Honeycomb Opsgenie "
        "PagerDuty Sigstore cosign Graphiti LanceDB Chroma "
        # everyday software
        "Excel Airtable Dropbox OneDrive SharePoint Asana Linear Miro Loom Calendly HubSpot Zendesk Intercom "
        "Twilio Mailchimp Mixpanel Amplitude Looker Tableau Metabase Superset WhatsApp Telegram Signal Discord "
        "1Password Bitwarden Okta Auth0 Keycloak Duolingo Gmail Outlook Teams"
    )),
    **_terms("organisation", "Google Amazon Microsoft Apple Meta Netflix OpenAI Anthropic IBM Intel NVIDIA "
             "Salesforce Stripe Shopify Uber Airbnb Spotify Twitter LinkedIn Mozilla DeepMind Samsung "
             "Zalando Atlassian Databricks Palantir Adobe Dell Cisco SAP Siemens Bosch"),
}
_ALIASES = {
    "postgres": "postgresql", "psql": "postgresql", "k8s": "kubernetes", "golang": "go", "js": "javascript",
    "ts": "typescript", "node": "node.js", "nodejs": "node.js", "nextjs": "next.js", "mongo": "mongodb",
    "es": "elasticsearch", "tf": "terraform", "gh": "github", "py": "python", "sklearn": "scikit-learn",
    "vs code": "vscode", "gcloud": "gcp", "amazon web services": "aws", "google cloud": "gcp",
}
TERMS.update({alias: TERMS[canonical] for alias, canonical in _ALIASES.items()})
# Formats and protocols are common nouns in a note ("export it as CSV over HTTP"), not tools: see COMMON_ACRONYMS.
for _format in "json yaml toml xml csv http https tcp udp dns cdn vpn ssh tls rest websocket saml oauth jwt ldap".split():
    del TERMS[_format]
# Multi-word aliases ("vs code") are never matched by the one-word scan: canonical() still maps them.
# One-letter languages (C, R) are left to callers: in free text they are mostly "vitamin C" and "plan B".
_TERM_KEYS = frozenset(k for k in TERMS if " " not in k and len(k) > 1)


def canonical(name: str) -> str:
    """The dictionary's spelling of a known alias ("k8s" is "Kubernetes"); any other name unchanged."""
    term = _ALIASES.get(key(name))
    return TERMS[term][0] if term else name

# Dictionary words that are also ordinary English (or one letter): matched only
# when written as the term is ("Go", "R", "Make"), never in lower case.
_CASE_SENSITIVE = frozenset(
    "go c r make chef spring express render lambda hive spark rest swift rust unity vault nomad packer consul "
    "meta apple bun remix assembly scheme crystal zoom notion slack hugging claude gemini llama oracle apache "
    "es js ts py tf gh node keras flask rails qt tilt yarn hypothesis locust tempo loki honeycomb linear "
    "loom signal teams outlook chroma biome excel".split()
)
# ALL-CAPS words that are not names: shouts, units, Roman numerals, common abbreviations.
NOT_ACRONYMS = frozenset(
    "OK AM PM TODO FIXME NOTE NB PS FYI ASAP ETA TBD TBA AKA IE EG ETC VS OR AND NOT THE IT IS IN ON AT TO OF "
    "BY IF NO YES II III IV VI VII VIII IX XI XII KB MB GB TB MS US UK EU USD EUR GBP".split()
)
#: Acronyms of units, formats, protocols, time zones, roles and business terms: a note uses them as common nouns
#: ("store it as ISO 8601 in UTC", "the LLM judge", "a 99.9% SLA"), so they make no entity. They still link one a
#: caller names (`--entity SLA`), as a pair of capitals does. Formats and protocols left the dictionary for the
#: same reason: "JSON" in a note names no thing a later question is about.
COMMON_ACRONYMS = frozenset("""
UTC GMT CET CEST EST EDT PST PDT BST IST JST AEST WAT EAT CAT DST AOE ISO RFC IEEE ANSI UTF ASCII
TTL LLM LLMS AI ML NLP GPU CPU RAM SSD HDD IO API APIS SDK CLI GUI UI UX URL URI DNS CDN VPN SSH TLS SSL HTTP HTTPS
TCP UDP IP REST RPC JSON YAML TOML XML CSV TSV PDF PNG JPG JPEG GIF SVG HTML CSS SQL ORM SFTP FTP SMTP IMAP
SSO SAML MFA OTP JWT OAUTH RBAC ACL IAM PII GDPR HIPAA SOC BAA NDA MSA SOW SLA SLO SLI KPI OKR OKRS ROI ARR MRR
QA CI CD PR PRS MR ETL ELT CRUD DB DBA SRE SWE PM EM VP CEO CTO CFO COO CISO CIO HR IT OPS DEVOPS
RSVP IRB ADR ADRS RFP RFQ POC MVP GA EOD EOW EOM EOY FY YTD QOQ YOY WIP FAQ TL DR TLDR DM DMS IM
KR P0 P1 P2 P3 NA EMEA APAC LATAM AMER B2B B2C SAAS PAAS IAAS OS
""".split())

# Letters of the Latin scripts, so "Zoë", "Søren" and "Université de Montréal" are names like "Zoe".
_LATIN = [chr(c) for c in range(0xC0, 0x250)]
_UP = "A-Z" + "".join(c for c in _LATIN if c.isupper() and c != "×")
_LO = "a-z" + "".join(c for c in _LATIN if c.islower() and c != "÷")
_WORD = re.compile(r"[a-z][\w+#.\-]*[\w+#]|[a-z]")
_CAMEL = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+\b|\b[a-z]+[A-Z][A-Za-z0-9]*\b")
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,9}\b")
_URL = re.compile(r"\bhttps?://[^\s<>\"')\]]+")
_PATH = re.compile(r"(?<![\w/:.])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]+|\b[\w-]+\.(?:py|js|ts|tsx|jsx|md|json|toml|"
                   r"yaml|yml|rs|go|c|h|cpp|hpp|java|rb|sh|sql|txt|cfg|ini|html|css|lock)\b")
_MENTION = re.compile(r"(?<![\w@])@([A-Za-z0-9_](?:[\w.-]*\w)?)")
_CAPWORD = rf"[{_UP}][{_LO}]+(?:[{_UP}][{_LO}]+)*(?:-[{_UP}]?[{_LO}]+)?"
_CONNECTORS = ("of", "de", "da", "das", "do", "dos", "du", "des", "di", "del", "della", "van", "von", "der", "la",
               "le", "&")
# Words of a name are separated by spaces, never a line break (a title line is not part of the next line's name).
_MULTI = re.compile(
    rf"(?<![\w'’-])(?:[A-Z]{{2,4}}[ \t]+)?{_CAPWORD}(?:[ \t]+(?:(?:{'|'.join(_CONNECTORS)})[ \t]+)?{_CAPWORD})+"
    rf"(?![\w-])|(?<![\w'’-])[A-Z]{{2,4}}[ \t]+{_CAPWORD}(?![\w-])"
)
#: A title before a name: "Dr. Patel", "Prof. Hiroshi Nakamura". The name is kept without it, as a person.
HONORIFICS = frozenset("dr prof mr mrs ms mx sir dame".split())
_HONORIFIC = re.compile(rf"\b(?:Dr|Prof|Mr|Mrs|Ms|Mx|Sir|Dame)\.?[ \t]+({_CAPWORD}(?:[ \t]+{_CAPWORD})*)")
_QUOTED = re.compile(r"[\"“]([A-Z0-9][^\"“”\n]{0,126})[\"”]")
# A sentence ends at . ! ? : ; or a line break; a list item's first word is capitalised by convention too, and
# markdown's emphasis, headings and numbering ("**Remember**", "### Tips", "1. Focus") stand before it.
_SENTENCE_START = re.compile(r"(?:^[\s*_#>]*|([.!?:;])[\s*_\"“(]+|\n[\s*_#>•-]*|\n\s*\d+[.)][\s*_]+)$")
#: Abbreviations whose period ends no sentence ("Dr. Patel", "Wu et al. showed").
_ABBREVIATIONS = re.compile(r"(?:\b(?:Dr|Mr|Mrs|Ms|Mx|Prof|St|vs|al|e\.g|i\.e))$")


def sentence_start(text: str, at: int) -> bool:
    """Whether a sentence starts at `text[at]`, so a capital there is grammar's, not a name's."""
    if at == 0:
        return True
    before = text[max(0, at - 12):at]
    m = _SENTENCE_START.search(before)
    return m is not None and not (m.group(1) == "." and _ABBREVIATIONS.search(before, 0, m.start(1)))


#: Words capitalised only because a sentence starts with them ("Yesterday Alice Smith called"):
#: dropped from the front of a multi-word name there. Any other first word is kept ("Alice Smith called").
SENTENCE_OPENERS = frozenset("""
a about after again all also although an and another any as at because before both but by can could did do
does during each either even every few for from had has have he her here his how i if in instead into is it
its just last later let like many may maybe meanwhile more most my next no not now of often on once only or
our perhaps please since so some still such than thank thanks that the their then there these they this
those though thus to today tomorrow tonight too under unless until was we well were what when where whether
which while who why will with without would yes yesterday yet you your hi hello hey dear sure ok okay great
good first second third finally also however overall sometimes usually recently currently actually
use using click add create make get set see try note check open save go run new keep find consider choose
""".split()) | frozenset("""
ask met meet call send sent tell told book email mail ping remind chase contact invite follow pick bring buy order
pay move fix ship review read write draft plan schedule share pair talk discuss agree agreed decide decided
confirm confirmed thank welcome introduce update reply offer quote sign visit lunch dinner coffee demo
owner contact champion coach trainer accountant lawyer doctor manager lead director engineer customer client
candidate reviewer attendees speaker host partner vendor team dear fwd re per via need needs
daily weekly monthly yearly quarterly annual nobody everyone someone anyone everybody somebody
yeah yep yup nope nah wow oh ah aw hmm haha lol omg cool awesome nice absolutely definitely exactly totally
congrats congratulations sorry remember additionally furthermore moreover however bye cheers woah whoa aww
oof woohoo yay hooray ugh phew btw
""".split())
#: Languages and nationalities: capitalised in English mid-sentence, yet a later question is rarely about "French".
_DEMONYMS = frozenset("""
english spanish french german italian portuguese dutch swedish norwegian danish finnish icelandic polish czech
russian ukrainian greek turkish arabic hebrew persian hindi urdu bengali chinese mandarin cantonese japanese
korean vietnamese thai indonesian malay filipino swahili yoruba igbo hausa american british canadian mexican
brazilian argentine australian european african asian irish scottish welsh swiss austrian belgian latin
""".split())
#: Weekdays and months, whole and abbreviated: "Tue Nov 24" (git's Date: line) is a date, not a name.
#: A name made only of them is dropped; one that merely holds one ("April Smith", "May Day Parade") stays.
CALENDAR = frozenset("""
monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun
mondays tuesdays wednesdays thursdays fridays saturdays sundays
january february march april may june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec
""".split())
# Closed-class words that break a run of capitals: "Weekly Sync With Rosa" in a Title Case heading is no name.
_BREAKERS = frozenset("with and for from to about at on in by the a an or vs into over via after before".split())
# A hyphen continues a name only before a capital ("Marc-André"): "Shopify-scale" is Shopify.
_CAPITALISED = re.compile(rf"(?<![\w'’-])[{_UP}][{_LO}]\w*(?:-[{_UP}]\w*)*")
# A capitalised word before a number is a numbered label ("Wave 3", "Type II", "Reviewer 2"), not a name.
# A name after a lower-case prefix and a hyphen: "ex-Criteo", "non-Google".
_PREFIXED = re.compile(rf"\b[a-z]{{2,5}}-([{_UP}][{_LO}]\w*)")
_AFTER_ACRONYM = re.compile(r"\b([A-Z]{2,5})[ \t]+$")
_NUMBERED = re.compile(r"[ \t]+(?:\d|[IVX]+\b)")
# Two capitals: an abbreviated common noun far more often than a name ("DB choice", "PR merged", "QA sign-off").
_PAIR = re.compile(r"\b[A-Z]{2}\b")
_POSSESSIVE = re.compile(r"['’]s?$")
#: Endings of a word that opens a sentence as a verb or a gerund ("Emailed Charles", "Booked Osteria Francescana").
_VERB_ENDINGS = ("ed", "ing")
_ORG_WORDS = frozenset("""
inc ltd llc plc gmbh ag corp corporation co company sons labs lab university université universität universidad
college institute foundation bank group ventures capital partners hospital clinic agency council ministry
association society research health systems technologies
""".split())


def _opener(word: str) -> bool:
    """A first word a sentence's capital could explain: a function word, a common verb or role, a verb form."""
    w = word.casefold()
    # "Unfortunately", "Honestly": an adverb; a name this long ending so is rare ("Kimberly" is the price).
    return w in SENTENCE_OPENERS or (len(w) >= 5 and w.endswith(_VERB_ENDINGS)) or (len(w) >= 8 and w.endswith("ly"))


def _title_end(text: str) -> int:
    """Where the first line ends if it is in Title Case (its capitals say nothing about names), else -1."""
    first = text.split("\n", 1)[0]
    return len(first) if _title_case(first) else -1


def _title_case(line: str) -> bool:
    """A line in Title Case ("Weekly Sync With Rosa"): its capitals say nothing about names."""
    words = [w for w in re.findall(rf"[{_UP}{_LO}]+", line) if len(w) >= 3]
    return len(words) >= 3 and sum(w[0].isupper() for w in words[1:]) >= 2 and any(
        w[0].isupper() and w.casefold() in _BREAKERS for w in words[1:])


def capitalised(text: str, found: list[Found]) -> list[tuple[str, str]]:
    """Single capitalised words not part of `found`, each as (word, how): candidate, initial or known.

    "Apollo" alone in one note is weak evidence of an entity, but the
    tenant's other notes may show it is a name (`evidence.py`): a word
    written with a capital mid-sentence is a `candidate`, one only at a
    sentence's start (where grammar explains the capital) is `initial`, which
    needs more of that evidence. A pair of capitals ("DB", "PR") is `known`:
    it links an entity that exists and never makes one. So a title "DB
    choice" makes no entity, but once someone names one "DB" (`--entity
    DB`), later mentions link it.
    """
    text = text[:SCAN_MAX]
    # A word inside a longer name found ("Lee" of "Lee Chen") is that name's; alone elsewhere it is its own.
    inside: list[tuple[int, int]] = []
    for f in found:
        if " " in f.name:
            at = text.find(f.name)
            while at >= 0:
                inside.append((at, at + len(f.name)))
                at = text.find(f.name, at + 1)
    seen = {key(f.name) for f in found} | HONORIFICS
    firsts = {key(f.name.split()[0]) for f in found if " " in f.name}
    lower = {w.casefold() for w in re.findall(r"\b[a-z][\w-]*", text)}
    title_end = _title_end(text)
    words = [(m.start(), _POSSESSIVE.sub("", m.group()), True) for m in _CAPITALISED.finditer(text)]
    words += [(m.start(1), m.group(1), True) for m in (_PREFIXED.finditer(text) if "-" in text else ())]  # "ex-Criteo"
    words += [(m.start(), m.group(), False) for m in _PAIR.finditer(text) if m.group() not in NOT_ACRONYMS]
    how: dict[str, tuple[int, str, str]] = {}  # key -> (first position, word, how): a mid-sentence one wins
    rank = {"known": 0, "initial": 1, "candidate": 2}
    for at, word, single in sorted(words, key=lambda w: w[0]):
        k = key(word)
        if k in seen or len(word) < 2 or any(s <= at < e for s, e in inside):
            continue
        after_acronym = _AFTER_ACRONYM.search(text, max(0, at - 8), at)
        if not single or _opener(word) or k in _BREAKERS or k in TERMS or k in COMPANY_SUFFIXES \
                or k in _DEMONYMS or _common_acronym(word) or k in lower or _NUMBERED.match(text, at + len(word)) \
                or (after_acronym and _common_acronym(after_acronym.group(1))) or _dated(text, at, word):
            kind = "known"  # "VP Operations": a title's capitals; "Wave 3": a numbered label
        elif (at > title_end and not sentence_start(text, at)) or k in firsts:
            kind = "candidate"  # mid-sentence, or the first name of one the note writes in full ("Diane Roy ... Diane")
        else:
            kind = "initial"
        if k not in how or rank[kind] > rank[how[k][2]]:
            how[k] = (how[k][0] if k in how else at, word, kind)
    return [(word, kind) for _, word, kind in sorted(how.values())][:PER_ENTRY_MAX]


def _dated(text: str, at: int, word: str) -> bool:
    """A weekday or month: a full one or a weekday's abbreviation always ("March", "Fri"), a month's abbreviation
    next to a number or another one ("Jun 4", "Tue Nov"), since alone it may be a name ("Jun took the page")."""
    k = word.casefold()
    if k not in CALENDAR:
        return False
    if k in _WHOLE_CALENDAR or k in _WEEKDAYS:
        return True  # a month's abbreviation may be a name ("Jun", "Jan"); a weekday's is not
    return bool(_NEAR_DATE.match(text, at + len(word)) or _NEAR_DATE_BEFORE.search(text, max(0, at - 12), at))


_WHOLE_CALENDAR = frozenset(w for w in CALENDAR if len(w) > 4 and w not in ("sept", "thurs", "tues")) | {"may", "june", "july"}
_WEEKDAYS = frozenset("mon tue tues wed thu thur thurs fri sat sun".split())
_NEAR_DATE = re.compile(r"[ \t,.]*(?:\d|(?:mon|tue|wed|thu|fri|sat|sun|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w*\b)",
                        re.IGNORECASE)
_NEAR_DATE_BEFORE = re.compile(r"(?:\d|\b(?:mon|tue|wed|thu|fri|sat|sun|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w*)"
                               r"[ \t,.]*$", re.IGNORECASE)


def _typed(words: list[str]) -> str:
    return "organisation" if any(w.casefold() in _ORG_WORDS for w in words) else "other"


def extract(text: str) -> list[Found]:
    """The names in `text`, each once (by case-folded name), in order of first appearance."""
    text = text[:SCAN_MAX]
    found: dict[str, tuple[int, Found]] = {}

    def add(at: int, name: str, kind: str) -> None:
        name = name.strip()
        if not name or len(name) > NAME_MAX:
            return
        k = key(name)
        if k not in found:
            found[k] = (at, Found(name, kind))

    taken: list[tuple[int, int]] = []  # spans of URLs and paths, whose words are not names of their own
    # A pattern is scanned only over a text holding what every match of it holds: the scans at every position were
    # most of extraction's time, and most texts hold no URL, path, mention or quote (the idle deriver's bulk loads).
    for m in (_URL.finditer(text) if "://" in text else ()):
        add(m.start(), m.group().rstrip(".,;:!?"), "other")
        taken.append(m.span())
    for m in (_PATH.finditer(text) if "/" in text or "." in text else ()):
        path = m.group().rstrip(".,;:")
        # "and/or" and "1/2" are not paths: a path is rooted, has two slashes or ends in a file name.
        pathlike = path[0] in "~./" or path.count("/") >= 2 or "." in path.rsplit("/", 1)[-1]
        if pathlike and not any(s <= m.start() < e for s, e in taken):
            add(m.start(), path, "other")
            taken.append(m.span())

    def free(span: tuple[int, int]) -> bool:
        return not any(s <= span[0] < e for s, e in taken)

    for m in (_MENTION.finditer(text) if "@" in text else ()):
        if free(m.span()):
            add(m.start(), "@" + m.group(1), "person")
    for m in _HONORIFIC.finditer(text):
        if free(m.span()):
            add(m.start(1), m.group(1), "person")
            taken.append(m.span())
    for m in (_QUOTED.finditer(text) if '"' in text or "“" in text else ()):
        inner = m.group(1).strip()
        # One quoted word is a title only if it is no ordinary opener ("Use" on a button is not a name).
        if len(inner.split()) <= 8 and len(inner) >= 2 and inner.casefold() not in SENTENCE_OPENERS:
            add(m.start(1), inner, "other")
    title_end = _title_end(text)
    names: list[tuple[int, int]] = []  # spans of multi-word names: a dictionary word inside one is part of it
    for m in _MULTI.finditer(text):
        if not free(m.span()) or m.start() < title_end:
            continue
        for start, words in _runs(text, m):
            if len(words) >= 2 and not all(w.casefold() in CALENDAR for w in words):
                name = " ".join(words)
                add(start, name, _typed(words))
                names.append((start, start + len(name)))
    # The dictionary: which of its terms occur at all is one C-level pass and a
    # set intersection; only those few are then located in the original text.
    tokens = _WORD.findall(text.lower())
    tokens += [part for t in tokens if "-" in t for part in t.split("-")]  # "ex-shopify", "kafka-based"
    for term in sorted(_TERM_KEYS.intersection(tokens)):
        canonical_name, kind = TERMS[term]
        for m in re.finditer(rf"(?<![\w+#.]){re.escape(term)}(?![\w+#])", text, re.IGNORECASE):
            word = m.group()
            # An ordinary word that is also a term ("Make", "Go") counts only as spelled, and not where a
            # sentence's capital could explain it ("Make sure ...").
            if term in _CASE_SENSITIVE and (word != canonical_name or sentence_start(text, m.start())):
                continue
            if len(word) == 1 and not word.isupper():
                continue
            if free(m.span()) and not any(s <= m.start() < e for s, e in names):
                add(m.start(), canonical_name, kind)
                break
    for pattern in (_CAMEL, _ACRONYM):
        for m in pattern.finditer(text):
            word = m.group()
            if not free(m.span()) or word in NOT_ACRONYMS or word.casefold() in TERMS:
                continue
            if pattern is _ACRONYM and (sum(c.isalpha() for c in word) < 2 or word.casefold() in SENTENCE_OPENERS
                                        or _common_acronym(word)):
                continue  # "YOU", "WHAT": shouting; "UTC", "KR2": a unit or a common noun, not a name
            if pattern is _CAMEL and (_common_acronym(word) or word.casefold() in COMPANY_SUFFIXES):
                continue  # "AoE", "APIs", "GmbH"
            if pattern is _ACRONYM and _PAIR.fullmatch(word):
                continue  # "DB": known names only (`capitalised`)
            add(m.start(), word, "other")
    ordered = sorted(found.values(), key=lambda item: item[0])
    return [f for _, f in ordered[:PER_ENTRY_MAX]]


def _common_acronym(word: str) -> bool:
    """An acronym of COMMON_ACRONYMS, in any case, plural or numbered ("APIs", "KR2", "P95")."""
    w = word.upper()
    return w in COMMON_ACRONYMS or w.rstrip("S") in COMMON_ACRONYMS or w.rstrip("0123456789") in COMMON_ACRONYMS \
        or (w[:1] == "P" and w[1:].isdigit())


def _runs(text: str, m: re.Match) -> list[tuple[int, list[str]]]:
    """The names in a run of capitalised words: split at capitalised closed-class words ("Sync With Rosa"), a
    sentence's opening verb or function word dropped ("Met Lee Chen" is Lee Chen), a trailing date dropped
    ("Debrief Friday"), a possessive's "'s" dropped."""
    out: list[tuple[int, list[str]]] = []
    words: list[tuple[int, str]] = []
    for w in re.finditer(r"\S+", m.group()):
        if w.group().casefold() in _BREAKERS and w.group()[0].isupper():
            out.append(_trim(text, words))
            words = []
        else:
            words.append((m.start() + w.start(), w.group()))
    out.append(_trim(text, words))
    return [(start, ws) for start, ws in out if ws]


def _trim(text: str, words: list[tuple[int, str]]) -> tuple[int, list[str]]:
    # An acronym leads a name ("UC Berkeley") unless it is a common one ("VP Operations", "PR Review").
    if words and words[0][1].isupper() and (_common_acronym(words[0][1]) or words[0][1] in NOT_ACRONYMS):
        words = words[1:]
    if words and sentence_start(text, words[0][0]) and _opener(words[0][1]):
        words = words[1:]
    while words and words[0][1] in _CONNECTORS:
        words = words[1:]
    while words and (words[-1][1].casefold() in CALENDAR or words[-1][1] in _CONNECTORS):
        words = words[:-1]
    if not words:
        return 0, []
    return words[0][0], [w for _, w in words]
