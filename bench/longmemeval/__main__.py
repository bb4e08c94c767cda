"""`python -m bench.longmemeval`: ingest, query, run and grade LongMemEval against a daemon."""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click
import msgspec

from arbiter.errors import ArbiterError
from bench.longmemeval import dataset as ds
from bench.longmemeval import harness, report
from bench.longmemeval.daemon import Daemon, DaemonError, connect
from bench.longmemeval.metrics import K, VariantScores, variant_scores
from bench.longmemeval.phrasing import PHRASINGS

if TYPE_CHECKING:
    from arbiter.client import Client

NO_KEY = "not run: no ANTHROPIC_API_KEY"
DEFAULT_RERANK = "claude-haiku-4-5"
DEFAULT_FINE = "claude-sonnet-4-6"  # the daemon's strong model; 4-5 is deprecated


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """Known failures become one line and exit 1; ARBITER_DEBUG=1 keeps the traceback."""
    try:
        yield
    except (ds.DatasetError, harness.HarnessError, DaemonError, ArbiterError) as e:
        if os.environ.get("ARBITER_DEBUG") == "1":
            raise
        raise click.ClickException(str(e)) from None


@contextlib.contextmanager
def _endpoint(
    home: Path | None, socket: Path | None, token_file: Path | None, state: Path | None, timeout: float
) -> Iterator[tuple[Client, Path, str]]:
    """A connected client, the state file path and how the daemon was reached.

    With --socket: the running daemon there. Otherwise a daemon of our own on
    --home, or on a temporary home removed afterwards.
    """
    if socket is not None:
        if token_file is None:
            raise click.UsageError("--socket needs --token-file")
        with connect(socket, token_file) as client:
            yield client, state or socket.parent / harness.STATE_NAME, "external"
        return
    temporary = home is None
    home = Path(tempfile.mkdtemp(prefix="arbiter-lme-")) if home is None else home
    try:
        with Daemon(home, timeout=timeout) as daemon, daemon.client() as client:
            yield client, state or home / harness.STATE_NAME, "own"
    finally:
        if temporary:
            shutil.rmtree(home)


def _variants(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    names = list(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    unknown = [v for v in names if v not in harness.VARIANTS]
    if unknown or not names:
        raise click.BadParameter(f"choose from {','.join(harness.VARIANTS)} (got {value!r})")
    return names


def _phrasings(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    names = list(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not names or any(n not in PHRASINGS for n in names):
        raise click.BadParameter(f"choose from {','.join(PHRASINGS)} (got {value!r})")
    return names


def _bar(length: int, label: str) -> click.progressbar:
    return click.progressbar(length=length, label=label, file=sys.stderr, show_pos=True)


def endpoint_options(f):
    """--home, --socket, --token-file, --state, --start-timeout."""
    for option in reversed(
        [
            click.option(
                "--home",
                type=click.Path(file_okay=False, path_type=Path),
                help="Start a daemon on this home and keep it (and the ingested haystacks) for re-runs.",
            ),
            click.option(
                "--socket",
                type=click.Path(dir_okay=False, path_type=Path),
                help="Use the daemon already listening here instead of starting one.",
            ),
            click.option(
                "--token-file",
                type=click.Path(dir_okay=False, exists=True, path_type=Path),
                help="The tenant token for --socket (e.g. HOME/tenants/default.token).",
            ),
            click.option(
                "--state",
                type=click.Path(dir_okay=False, path_type=Path),
                help=f"Harness state file (default: {harness.STATE_NAME} in the home or beside the socket).",
            ),
            click.option(
                "--start-timeout", default=30.0, show_default=True, help="Seconds to wait for the daemon to answer."
            ),
        ]
    ):
        f = option(f)
    return f


def query_options(f):
    """--variants, --out, --rerank-model, --fine-model."""
    for option in reversed(
        [
            click.option(
                "--variants",
                default=",".join(harness.VARIANTS),
                show_default=True,
                callback=_variants,
                help="Comma-separated variants; expand, rerank and cascade need ANTHROPIC_API_KEY and are "
                "reported as not run without it.",
            ),
            click.option(
                "--out",
                type=click.Path(file_okay=False, path_type=Path),
                help="Folder for results.json and results.md (default: bench/results/longmemeval-<UTC time>).",
            ),
            click.option(
                "--phrasing",
                default="as-written",
                show_default=True,
                callback=_phrasings,
                help="Comma-separated: as-written (the question as the user asked the assistant) and/or "
                "third-person (as an agent asks its memory: 'the user', 'the assistant'); each variant runs "
                "once per phrasing.",
            ),
            click.option("--rerank-model", default=DEFAULT_RERANK, show_default=True,
                         help="The model of rerank, of cascade's first stage and of expand."),
            click.option("--fine-model", default=DEFAULT_FINE, show_default=True, help="Second stage of cascade."),
        ]
    ):
        f = option(f)
    return f


dataset_option = click.option(
    "--dataset",
    required=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="LongMemEval or LoCoMo JSON file (the format is recognised), plain or .gz.",
)
limit_option = click.option("--limit", type=click.IntRange(min=1), help="Only the first N questions.")
batch_option = click.option(
    "--batch-size",
    default=harness.DEFAULT_BATCH,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="Entries per remember_many call.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """LongMemEval retrieval benchmark for Arbiter.

    \b
    Example (one shot, on a temporary home):
      python -m bench.longmemeval run --dataset longmemeval_s.json.gz --variants bm25,graduated
    Example (ingest once, query many times):
      python -m bench.longmemeval ingest --dataset longmemeval_s.json.gz --home lme-home
      python -m bench.longmemeval query --home lme-home --variants graduated
    """


def _load(path: Path) -> ds.Corpus:
    started = time.perf_counter()
    data = ds.load_corpus(path)
    click.echo(
        f"loaded {data.format}: {len(data.units)} conversations, {sum(len(u.asks) for u in data.units)} questions, "
        f"{sum(u.turns for u in data.units)} turns in {time.perf_counter() - started:.1f} s; "
        f"{sum(u.cleaned for u in data.units)} titles cleaned of control characters, "
        f"{data.mended} half surrogate pairs read as U+FFFD",
        err=True,
    )
    return data


@cli.command()
@dataset_option
@endpoint_options
@limit_option
@batch_option
def ingest(dataset, home, socket, token_file, state, start_timeout, limit, batch_size) -> None:
    """Write the haystacks into a home that persists, for `query` to re-run against.

    Questions already in the home are skipped, so a larger --limit adds only the rest.

    \b
    Example:
      python -m bench.longmemeval ingest --dataset longmemeval_s.json.gz --home lme-home
    """
    if home is None and socket is None:
        raise click.UsageError("ingest needs --home (or --socket): a temporary home would be thrown away")
    with _errors():
        data = _load(dataset)
        with _endpoint(home, socket, token_file, state, start_timeout) as (client, state_path, _):
            stats = _do_ingest(client, data, state_path, limit, batch_size)[1]
    click.echo(_ingest_line(stats))


def _do_ingest(
    client: Client, data: ds.Corpus, state_path: Path, limit: int | None, batch_size: int
) -> tuple[harness.State, report.IngestStats]:
    state = harness.open_state(state_path, data)
    units = data.units[:limit] if limit else data.units
    done = {u.key for u in state.units} | {q.unit or q.question_id for q in state.questions}
    todo_turns = sum(u.turns for u in units if u.key not in done)
    from arbiter.cli._progress import Progress  # the same progress as `arbiter load`: count, rate, ETA

    with Progress(todo_turns, "ingest", unit="turns") as bar:
        # The bar counts turns; skipped empty turns never reach it, a few short of full at worst.
        stats = harness.ingest(client, units, state, state_path, batch_size=batch_size, progress=bar.update)
    return state, stats


def _ingest_line(stats: report.IngestStats) -> str:
    if stats.reused:
        return f"nothing to ingest: the home already holds these questions ({stats.entries} entries at the time)"
    return (
        f"ingested {stats.entries} entries into {stats.conversations} conversations in {stats.seconds:.1f} s "
        f"({stats.entries_per_s:.0f}/s); skipped {stats.skipped_empty} empty turns, cut {stats.truncated}, "
        f"cleaned control characters from {stats.cleaned} titles"
    )


def _measure(
    client: Client,
    state: harness.State,
    *,
    variants: list[str],
    phrasings: list[str],
    limit: int | None,
    rerank_model: str,
    fine_model: str,
    daemon: str,
    out: Path | None,
) -> None:
    """Run the variants, then write and print the results."""
    questions = state.questions[:limit] if limit else state.questions
    if not questions:
        raise harness.HarnessError("the harness state holds no questions; run `ingest` first")
    has_key = bool(os.environ.get("ANTHROPIC_API_KEY"))
    version = client.ping().version
    out = out or Path("bench/results") / time.strftime("longmemeval-%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    scored: dict[str, VariantScores | report.NotRun] = {}
    fallback: dict[str, VariantScores] = {}
    for variant in variants:
        for phrasing in phrasings:
            name = variant if phrasing == "as-written" else f"{variant} ({phrasing})"
            if variant in harness.LLM_VARIANTS and not has_key:
                scored[name] = report.NotRun(NO_KEY)
                continue
            with _bar(len(questions), f"query {name}") as bar:
                outcomes = harness.run_variant(
                    client,
                    questions,
                    variant,
                    k=K,
                    rerank_model=rerank_model,
                    fine_model=fine_model,
                    phrasing=phrasing,
                    progress=bar.update,
                )
            file = f"outcomes-{variant}.jsonl" if phrasing == "as-written" else f"outcomes-{variant}-{phrasing}.jsonl"
            (out / file).write_bytes(b"".join(msgspec.json.encode(o) + b"\n" for o in outcomes))
            scored[name] = variant_scores(outcomes)
            fallback[name] = variant_scores(outcomes, truth="fallback")
    results = report.Results(
        dataset=report.DatasetInfo(
            path=state.dataset_path,
            sha256=state.dataset_sha256,
            questions=len(questions),
            turns=_turns(state, questions),
            questions_in_file=state.questions_in_file,
            tenant_questions=len(state.questions),
            abstention=sum(q.abstention for q in questions),
            truth_from=dict(collections.Counter(q.truth_from for q in questions)),
            no_truth=[q.question_id for q in questions if not q.truth_ids],
        ),
        settings=report.Settings(
            variants=variants,
            phrasings=phrasings,
            limit=limit,
            k=K,
            rerank_model=rerank_model,
            fine_model=fine_model,
            daemon=daemon,
        ),
        version=report.Version(harness=report.HARNESS_VERSION, arbiter=version, commit=report.commit()),
        machine=report.machine(),
        variants=scored,
        fallback=fallback,
        ingest=state.ingest,
    )
    json_path, md_path = report.write(results, out)
    click.echo(report.markdown(results))
    click.echo(f"wrote {json_path} and {md_path}", err=True)


def _turns(state: harness.State, questions: list[harness.QuestionState]) -> int:
    """Turns in the conversations the questions are asked of (each conversation once)."""
    asked = {q.unit or q.question_id for q in questions}
    if state.units:
        return sum(u.turns for u in state.units if u.key in asked)
    return sum(q.turns for q in questions)


@cli.command()
@endpoint_options
@query_options
@limit_option
def query(
    home, socket, token_file, state, start_timeout, variants, out, phrasing, rerank_model, fine_model, limit
) -> None:
    """Run recall variants against a home `ingest` filled, and write the results.

    \b
    Example:
      python -m bench.longmemeval query --home lme-home --variants bm25,graduated --out lme-results
    """
    if home is None and socket is None:
        raise click.UsageError("query needs --home or --socket: the home `ingest` filled")
    with _errors(), _endpoint(home, socket, token_file, state, start_timeout) as (client, state_path, daemon):
        loaded = harness.State.load(state_path)
        _measure(
            client,
            loaded,
            variants=variants,
            phrasings=phrasing,
            limit=limit,
            rerank_model=rerank_model,
            fine_model=fine_model,
            daemon=daemon,
            out=out,
        )


@cli.command()
@dataset_option
@endpoint_options
@query_options
@limit_option
@batch_option
def run(
    dataset,
    home,
    socket,
    token_file,
    state,
    start_timeout,
    variants,
    out,
    phrasing,
    rerank_model,
    fine_model,
    limit,
    batch_size,
) -> None:
    """Ingest (unless the home already holds the questions), query, and write results.json and results.md.

    Without --home or --socket it starts a daemon on a temporary home and
    removes it afterwards.

    \b
    Example:
      python -m bench.longmemeval run --dataset longmemeval_s.json.gz --variants bm25,graduated --out lme-results
    """
    with _errors():
        data = _load(dataset)
        with _endpoint(home, socket, token_file, state, start_timeout) as (client, state_path, daemon):
            loaded, stats = _do_ingest(client, data, state_path, limit, batch_size)
            click.echo(_ingest_line(stats), err=True)
            _measure(
                client,
                loaded,
                variants=variants,
                phrasings=phrasing,
                limit=limit,
                rerank_model=rerank_model,
                fine_model=fine_model,
                daemon=daemon,
                out=out,
            )


@cli.command()
@dataset_option
@endpoint_options
@limit_option
@click.option(
    "--variant",
    default="graduated",
    show_default=True,
    type=click.Choice(harness.VARIANTS),
    help="Which recall feeds the generator.",
)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Folder for grade.json.")
@click.option("--generator-model", default=DEFAULT_FINE, show_default=True)
@click.option("--judge-model", default=DEFAULT_FINE, show_default=True)
@click.option("--rerank-model", default=DEFAULT_RERANK, show_default=True)
@click.option("--fine-model", default=DEFAULT_FINE, show_default=True)
def grade(
    dataset,
    home,
    socket,
    token_file,
    state,
    start_timeout,
    limit,
    variant,
    out,
    generator_model,
    judge_model,
    rerank_model,
    fine_model,
) -> None:
    """Answer accuracy on an ingested home: a model answers from the recalled turns, a judge grades it.

    Needs ANTHROPIC_API_KEY; costs two model calls per question.

    \b
    Example:
      python -m bench.longmemeval grade --dataset longmemeval_s.json.gz --home lme-home --limit 50
    """
    key = os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        raise click.ClickException(
            "grade needs ANTHROPIC_API_KEY (a generator model answers, a judge model grades); "
            "retrieval numbers need no key: use `run` or `query`"
        )
    if home is None and socket is None:
        raise click.UsageError("grade needs --home or --socket: the home `ingest` filled")
    import anthropic  # only grade talks to a model directly

    from bench.longmemeval.grade import grade as grade_questions

    with _errors():
        data = ds.load(dataset)
        with _endpoint(home, socket, token_file, state, start_timeout) as (client, state_path, _):
            loaded = harness.open_state(state_path, ds.Corpus(
                path=data.path, sha256=data.sha256, format="longmemeval", units=[],
                questions_in_file=len(data.questions),
            ))
            questions = loaded.questions[:limit] if limit else loaded.questions
            if not questions:
                raise harness.HarnessError("the harness state holds no questions; run `ingest` first")
            with _bar(len(questions), f"grade {variant}") as bar:
                accuracy = grade_questions(
                    client,
                    anthropic.Anthropic(api_key=key),
                    data,
                    questions,
                    loaded.units,
                    variant=variant,
                    recall_kwargs=lambda q: harness.recall_kwargs(
                        variant, q, k=K, rerank_model=rerank_model, fine_model=fine_model
                    ),
                    generator_model=generator_model,
                    judge_model=judge_model,
                    progress=bar.update,
                )
    out = out or Path("bench/results") / time.strftime("longmemeval-grade-%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    (out / "grade.json").write_bytes(msgspec.json.format(msgspec.json.encode(accuracy), indent=2) + b"\n")
    share = "–" if accuracy.accuracy is None else f"{accuracy.accuracy * 100:.1f}%"
    click.echo(f"{variant}: accuracy {share} over {accuracy.n} questions; wrote {out / 'grade.json'}")
    for t, a in accuracy.by_type.items():
        click.echo(f"  {t}: {'–' if a is None else f'{a * 100:.1f}%'}")


@cli.command()
@dataset_option
@limit_option
@click.option(
    "--granularity",
    default="session,turn",
    show_default=True,
    help="Comma-separated: session (sessions as units) and/or turn (user turns as units, also scored per session).",
)
@click.option("--phrasing", default="as-written", show_default=True, callback=_phrasings, help="As for `run`.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Folder for official.json.")
def official(dataset, limit, granularity, phrasing, out) -> None:
    """LongMemEval's own protocol: a fresh index per question, user turns only, recall_any/all and ndcg_any@k.

    Runs the library in this process (no daemon); see bench/longmemeval/official.py
    for the protocol and where it departs from the official code.

    \b
    Example:
      python -m bench.longmemeval official --dataset longmemeval_s.json.gz --granularity session
    """
    from bench.longmemeval import official as off

    levels = [g.strip() for g in granularity.split(",") if g.strip()]
    if not levels or any(g not in off.GRANULARITIES for g in levels):
        raise click.BadParameter(f"choose from {','.join(off.GRANULARITIES)}", param_hint="--granularity")
    with _errors():
        data = _load(dataset)
        questions = ds.load(dataset).questions if data.format == "longmemeval" else None
    if questions is None:
        raise click.ClickException("the official protocol is LongMemEval's; this file is LoCoMo")
    questions = questions[:limit] if limit else questions
    summaries = []
    for g in levels:
        for ph in phrasing:
            with _bar(len(questions), f"official {g} {ph}") as bar:
                summary, per = off.run(questions, g, phrasing=ph, progress=bar.update)
            summaries.append(summary)
    out = out or Path("bench/results") / time.strftime("longmemeval-official-%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    (out / "official.json").write_bytes(msgspec.json.format(msgspec.json.encode(summaries), indent=2) + b"\n")
    click.echo(report.official_markdown(summaries))
    click.echo(f"wrote {out / 'official.json'}", err=True)


if __name__ == "__main__":
    cli()
