"""The ``cladebench`` command: one verb per step of the flow, each generated from its config.

Verbs register themselves in :data:`VERBS` with the :func:`verb` decorator; ``main`` builds the parser
from that registry, so adding a verb never means editing a chain of ``if name == ...``. Heavy modules
are imported inside each verb, so ``cladebench --help`` starts in a fraction of a second.

Exit codes a script can trust: 0 success; 1 a failure of the input or environment; 2 a usage error
(bad arguments, unknown name); 3 no dataset at the path; 4 a schema error; 5 a remote URI (dataset
or model) that cannot be reached; 6 a model that cannot be built from its files; 70 a bug (an
unexpected exception, reported as one); 130 interrupted; 141 the output pipe closed (`| head`), without a message.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

from cladebench import __version__
from cladebench.config import (
    OPTION,
    POSITIONAL,
    add_config_arguments,
    bare_value,
    config_from_args,
    take_late_positionals,
)
from cladebench.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_BUG,
    EXIT_INTERRUPTED,
    CladebenchError,
    UsageError,
    environment_error,
)
from cladebench.raycluster import DEFAULT_ADDRESS


@dataclass(frozen=True)
class Verb:
    """One CLI verb: its name, one-line help, config class and the function that runs it."""

    name: str
    help: str
    config: type
    run: Callable[[Any], int | None]


VERBS: dict[str, Verb] = {}


def verb(name: str, config: type, help: str) -> Callable[[Callable[[Any], int | None]], Callable[[Any], int | None]]:
    """Register a verb; its config's fields become its arguments."""

    def register(fn: Callable[[Any], int | None]) -> Callable[[Any], int | None]:
        VERBS[name] = Verb(name=name, help=help, config=config, run=fn)
        return fn

    return register


@dataclass(frozen=True)
class Family:
    """A verb whose second word picks one of several configs (``cladebench build coobserved ...``)."""

    help: str
    metavar: str
    members: Callable[[], dict[str, Verb]]
    """Name -> verb; called when the parser is built, so members can live in a registry elsewhere."""


FAMILIES: dict[str, Family] = {}


def _builders() -> dict[str, Verb]:
    from cladebench.curate.builders import BUILDERS

    def run(builder: Any) -> Callable[[Any], int]:
        def build(config: Any) -> int:
            summary = builder.build(config)
            print(summary.describe() if hasattr(summary, "describe") else summary)
            return 0

        return build

    return {name: Verb(name=name, help=b.doc, config=b.config(), run=run(b)) for name, b in BUILDERS.items()}


FAMILIES["build"] = Family(help="build a benchmark from raw sources (an iNaturalist export, a catalog, a config)",
                           metavar="BENCHMARK", members=_builders)


# --- info ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InfoConfig:
    """Describe a dataset."""

    dataset: str
    """Path or URI (local, hf://, s3://) of a Lance dataset."""
    json: bool = False
    """Print JSON instead of text."""
    version: str | None = None
    """A version number or tag to describe instead of the latest."""
    fingerprint: bool = True
    """Compute the fingerprint (reads the uuid column)."""


@verb("info", InfoConfig, "rows, schema, groups, licenses, embeddings, fingerprint, versions and tags")
def _info(config: InfoConfig) -> int:
    from cladebench import store
    from cladebench.store import info

    version: int | str | None = config.version
    if isinstance(version, str) and version.isdigit():
        version = int(version)
    dataset = store.open_dataset(config.dataset, version=version)
    description = info.describe(dataset, config.dataset, with_fingerprint=config.fingerprint)
    print(json.dumps(description, indent=2, default=str) if config.json else info.format_description(description))
    return 0


# --- subset --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubsetConfig:
    """Materialise part of a dataset locally."""

    dataset: str
    """Path or URI (local, hf://, s3://) of the source Lance dataset."""
    out: Path = field(metadata=OPTION)
    """Directory of the new local Lance dataset (must not exist yet)."""
    where: str | None = None
    """SQL filter pushed down to Lance, e.g. "challenge_group = 'camera_trap'"."""
    columns: tuple[str, ...] | None = None
    """Columns to keep (uuid is always kept); all when omitted."""


@verb("subset", SubsetConfig, "copy the rows matching --where (and only --columns) into a new local dataset")
def _subset(config: SubsetConfig) -> int:
    from cladebench import store

    result = store.subset(config.dataset, config.out, where=config.where, columns=config.columns)
    print(f"wrote {result.count_rows():,} rows to {config.out} (fingerprint {store.fingerprint(result)})")
    return 0


# --- embed ---------------------------------------------------------------------------------------

from cladebench.embed import EmbedConfig  # noqa: E402  (a light module: torch is imported when it runs)


@verb("embed", EmbedConfig, "encode every image once into an emb_<model> column (resumable)")
def _embed(config: EmbedConfig) -> int:
    from cladebench.embed import embed_dataset

    try:
        summary = embed_dataset(config)
    except KeyboardInterrupt:
        print("cladebench embed: interrupted; finished rows are staged, rerun the same command to resume",
              file=sys.stderr)
        raise
    print(
        f"{summary.column}: {summary.valid:,} of {summary.rows:,} rows embedded "
        f"({summary.encoded_now:,} encoded now at {summary.rows_per_second:,.1f} rows/s, {summary.resumed:,} resumed), "
        f"{summary.failed:,} failed"
        + (f" (see {summary.failures_path})" if summary.failures_path else "")
        + f"; dataset version {summary.version}"
        + (f"; on Ray: {summary.runner['actors']} actor(s) x {summary.runner['cpus_per_actor']} CPU"
           f"{' + 1 GPU' if summary.runner['gpus_per_actor'] else ''}, {summary.runner['fragments']} fragments "
           f"({summary.runner['fragments_resumed']} resumed)" if summary.runner.get("kind") == "ray" else "")
    )
    return 0


# --- eval ----------------------------------------------------------------------------------------

from cladebench.evaluate.run import EvalCommand  # noqa: E402


@verb("eval", EvalCommand, "run a task (zeroshot, fewshot) with a model; write run.json + predictions.parquet")
def _eval(config: EvalCommand) -> int:
    from cladebench.evaluate.run import format_metrics, label_set_sizes, run_eval

    record, path = run_eval(config)
    sizes = label_set_sizes(record)
    groups = record.provenance["groups"]
    if groups["column"] is not None:
        labels = (f"{len(groups['values'])} {groups['column']} groups evaluated separately"
                  + (": " + ", ".join(f"{g} {n} labels" for g, n in sizes.items()) if sizes else "") + "; ")
    else:
        labels = f"{sizes['all']} labels; " if "all" in sizes else ""
    print(f"{record.task} on {config.dataset} with {record.model_name()} "
          f"({labels}{record.provenance['dataset']['evaluated_rows']} images)")
    print(format_metrics(record))
    print(f"run record: {path}")
    return 0


# --- compare -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompareConfig:
    """Compare runs on the same examples: paired bootstrap differences against the first run, Holm-corrected."""

    runs: tuple[Path, ...]
    """run.json files (or the directories holding them); the first is the reference."""
    metric: str | None = None
    """Compare only this metric (e.g. top1_species); all of the reference's metrics when omitted."""
    json: bool = False
    """Print JSON instead of text."""
    resamples: int = 10_000
    """Bootstrap resamples per difference."""
    seed: int = 0
    """Seed of the resampling."""
    alpha: float = 0.05
    """Family-wise error rate of the Holm correction across the runs compared on each metric."""
    intersect: bool = False
    """Compare on the examples every run evaluated when their example sets differ (an error otherwise)."""


@verb("compare", CompareConfig, "paired bootstrap differences between runs on the same examples, Holm-corrected")
def _compare(config: CompareConfig) -> int:
    from cladebench.evaluate.compare import compare_runs, format_comparison

    if config.resamples < 1:
        raise UsageError(f"--resamples must be at least 1, got {config.resamples}")
    if config.seed < 0:
        raise UsageError(f"--seed must be at least 0, got {config.seed}")
    if not 0.0 < config.alpha < 1.0:
        raise UsageError(f"--alpha must be between 0 and 1, got {config.alpha}")
    comparison = compare_runs(config.runs, metric=config.metric, n_resamples=config.resamples, seed=config.seed,
                              alpha=config.alpha, intersect=config.intersect)
    print(comparison.to_json() if config.json else format_comparison(comparison))
    return 0


# --- report --------------------------------------------------------------------------------------

from cladebench.report import ReportConfig  # noqa: E402  (light: jinja2 and matplotlib load when it runs)


@verb("report", ReportConfig, "one self-contained HTML page (or Markdown tables) of run records: leaderboard with "
                              "ties, charts, calibration, galleries, provenance")
def _report(config: ReportConfig) -> int:
    from cladebench.report import run_report

    print(f"report: {run_report(config)}")
    return 0


# --- compare-columns ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompareColumnsCommand:
    """Compare embedding spaces stored side by side (e.g. BioCLIP generations): few-shot accuracy of each
    emb_* column on identical splits, and linear CKA between every pair of columns."""

    dataset: str
    """Path or URI of the Lance dataset."""
    columns: tuple[str, ...] = ()
    """emb_* columns to compare (default: all of them); only rows with a vector in every one are used."""
    rank: str = "species"
    """Rank of the few-shot classes."""
    shots: tuple[int, ...] = (1, 5)
    """Support images per class."""
    repetitions: int = 5
    """Seeded splits per shot count, shared by every column."""
    seed: int = 0
    """Seed of the splits."""
    methods: tuple[str, ...] = ("simpleshot",)
    """Few-shot classifiers: simpleshot (BioCLIP's protocol: each vector L2-normalised, centred on the support
    mean, normalised again), simpleshot-biobench (BioBench's: raw vectors centred), linear, knn."""
    where: str | None = None
    """SQL filter (e.g. challenge_group = 'Peromyscus')."""
    json: bool = False
    """Print JSON instead of tables."""


@verb("compare-columns", CompareColumnsCommand, "few-shot accuracy per emb_* column on the same splits, and CKA")
def _compare_columns(command: CompareColumnsCommand) -> int:
    from cladebench import store
    from cladebench.evaluate.compare_columns import compare_columns

    result = compare_columns(store.open_dataset(command.dataset), command.columns or None, rank=command.rank,
                             shots=command.shots, repetitions=command.repetitions, seed=command.seed,
                             methods=command.methods, where=command.where)
    if command.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
        return 0
    columns = list(result.columns)
    width = max(len(c) for c in columns)
    metrics = list(result.accuracy[columns[0]])
    print(f"{result.rows:,} rows with every column; splits {result.split.get('fingerprint', '')[:16]}… "
          f"({result.split.get('repetitions')} repetitions, seed {result.split.get('seed')})")
    print(f"{'column':<{width}}  {'model':<28} " + " ".join(f"{m:>24}" for m in metrics))
    for column in columns:
        cells = []
        for metric in metrics:
            estimate = result.accuracy[column][metric]
            low, high = estimate.get("low"), estimate.get("high")
            interval = f" [{100 * low:.1f}, {100 * high:.1f}]" if low is not None and high is not None else ""
            cells.append(f"{100 * estimate['value']:.1f}%{interval}".rjust(24))
        print(f"{column:<{width}}  {str(result.models.get(column))[:28]:<28} " + " ".join(cells))
    print("linear CKA")
    print(" " * (width + 2) + " ".join(f"{c[:12]:>12}" for c in columns))
    for a in columns:
        print(f"{a:<{width}}  " + " ".join(f"{result.cka[a][b]:>12.3f}" for b in columns))
    return 0


# --- search --------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SearchCommand:
    """Search a dataset's images by text through the IVF index of the model's emb_* column; with --queries and
    --annotations, evaluate the search as INQUIRE's fullrank task and write a run record."""

    dataset: str
    """Path or URI of the Lance dataset (embedded with the model)."""
    text: str | None = field(default=None, metadata=POSITIONAL)
    """What to look for (e.g. "a mongoose standing upright alert")."""
    model: str = field(metadata=OPTION)
    """The model whose text tower encodes the query (same forms as for `embed`)."""
    k: int | None = None
    """Hits to show (default 20); with --queries, the cutoff of the fullrank evaluation (default 50, as INQUIRE)."""
    where: str | None = None
    """SQL filter applied before the top-k."""
    column: str | None = None
    """Embedding column; by default the one whose metadata names the model."""
    templates: str = "raw"
    """Query templates: 'raw' (the text as written, as INQUIRE) or a template set."""
    queries: Path | None = None
    """INQUIRE query CSV (query_id, query_text, ...) for a fullrank evaluation."""
    annotations: Path | None = None
    """INQUIRE annotation CSV (query_id, image_id, image_path): every row a positive."""
    match_column: str = "inat24_file_name"
    """Dataset column holding the key that annotations name (INQUIRE: the iNat24 file name)."""
    out: Path | None = None
    """Directory for the fullrank run record."""
    revision: str | None = None
    """Model revision instead of the pinned one."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where the text tower runs."""


@verb("search", SearchCommand, "text-to-image search through the vector index; INQUIRE fullrank with annotations")
def _search(command: SearchCommand) -> int:
    from cladebench import store
    from cladebench.models import load_encoder

    dataset = store.open_dataset(command.dataset)
    encoder = load_encoder(command.model, revision=command.revision, device=command.device)
    if command.queries is None and command.annotations is None:
        if not command.text:
            raise UsageError("give the text to search for, or --queries and --annotations for a fullrank evaluation")
        return _print_search(dataset, encoder, command)
    if command.queries is None or command.annotations is None or command.out is None:
        raise UsageError("a fullrank evaluation needs --queries, --annotations and --out")
    from cladebench.evaluate.fullrank import write_fullrank_record

    record, path = write_fullrank_record(dataset, encoder, command)
    for name, estimate in record.metrics.items():
        if "=" not in name:
            print(f"  {name:<16} {estimate['value']:8.2f}  [{estimate['low']:.2f}, {estimate['high']:.2f}]  "
                  f"n={estimate['n']}")
    print(f"run record: {path}")
    return 0


def _print_search(dataset: Any, encoder: Any, command: SearchCommand) -> int:
    from cladebench.tasks.text_search import SEARCH_K, search_text

    names = dataset.schema.names
    shown = [c for c in ("uuid", "scientific_name", "common_name", "source_url") if c in names]
    result = search_text(dataset, encoder, [command.text], k=SEARCH_K if command.k is None else command.k,
                         where=command.where, column=command.column,
                         templates=command.templates, columns=shown)
    if result.index_built:
        print(f"(built an IVF_FLAT index on {result.column}; later searches reuse it)", file=sys.stderr)
    if result.hits.num_rows == 0:
        scope = f"matching {command.where!r}" if command.where else "in the dataset"
        print(f"no hits: no row {scope} has an embedding in {result.column}", file=sys.stderr)
        return 0
    for row in result.hits.to_pylist():
        details = "  ".join(str(row[c]) for c in shown[1:] if row.get(c) is not None)
        print(f"{row['rank']:>3}  {row['cosine_similarity']:.4f}  {row['uuid']}  {details}")
    return 0


# --- load ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadCommand:
    """Build a Lance dataset from a published benchmark's metadata file, fetching its images."""

    source: str
    """Registered source: crypticbio (a Common, CommonUnseen, Endangered or Invasive CSV) or inquire-rerank
    (the Parquet files of evendrow/INQUIRE-Rerank, or their folder)."""
    path: Path
    """The source's metadata file or folder (e.g. CrypticBio-Common.csv)."""
    out: Path = field(metadata=OPTION)
    """Where to write the Lance dataset (must not exist); failures go to OUT.failures.parquet beside it."""
    lookup: Path | None = None
    """Cryptic-group lookup (anchor<TAB>comma-separated look-alikes) to attach as cryptic_group."""
    queries: tuple[Path, ...] = ()
    """INQUIRE query CSVs, to fill query_id by exact text when the Parquet files lack it (inquire-rerank)."""
    limit: int | None = None
    """Only the first N rows (a quick sample)."""
    download_dir: Path | None = None
    """Content-addressed download store, reused across builds (default: the cache folder's downloads/)."""
    concurrency: int = 16
    """Simultaneous downloads."""
    retries: int = 5
    """Attempts per image (timeouts, 429 and 5xx are retried with backoff; 404 is not)."""
    image_deadline_s: float = 60.0
    """Seconds one image may take in all, attempts and waits between them included; a host that never answers
    or trickles bytes costs this much, then the image is a failure with reason ``deadline``."""
    ray: str | None = field(default=None, metadata=bare_value(DEFAULT_ADDRESS))
    """Fetch on a Ray cluster, in shards of images: --ray alone lets ray.init find it (RAY_ADDRESS, the latest
    cluster here, else a new local one); --ray auto|local|ray://HOST:10001 names it. The download dir must be on
    a filesystem every node sees."""

    def __post_init__(self) -> None:
        from cladebench.config import at_least, positive

        at_least("--concurrency", self.concurrency, 1)
        at_least("--retries", self.retries, 1)
        positive("--image-deadline-s", self.image_deadline_s)
        if self.limit is not None:
            at_least("--limit", self.limit, 1)


@verb("load", LoadCommand, "build a dataset from a published benchmark's files (images fetched, failures recorded)")
def _load(command: LoadCommand) -> int:
    import inspect

    from cladebench.curate.fetch import DownloadConfig
    from cladebench.curate.sources import get_source

    source = get_source(command.source)
    builder = source.load(source.builder)
    offered = {"lookup": command.lookup, "limit": command.limit, "download_dir": command.download_dir,
               "download_config": DownloadConfig(concurrency=command.concurrency, max_attempts=command.retries,
                                                 item_deadline_s=command.image_deadline_s, progress=True,
                                                 ray=command.ray)}
    accepted = inspect.signature(builder).parameters
    given = {"lookup": command.lookup, "limit": command.limit, "download_dir": command.download_dir,
             "queries": command.queries or None}
    offered["queries"] = list(command.queries) or None
    unused = [f"--{k.replace('_', '-')}" for k, v in given.items() if v is not None and k not in accepted]
    if command.ray is not None and "download_config" not in accepted:
        unused.append("--ray")  # a source that fetches nothing has nothing to spread over a cluster
    if unused:
        raise CladebenchError(f"source {source.name!r} does not take {', '.join(unused)}")
    build = builder(command.path, command.out, **{k: v for k, v in offered.items() if k in accepted})
    if hasattr(build, "download"):
        print(f"{build.dataset_path}: {build.written:,} of {build.rows:,} rows written; downloads: "
              f"{build.download.summary()}")
    else:
        print(f"{build.dataset_path}: {build.rows:,} rows written")
    for note in getattr(build, "notes", ()):
        print(note)
    if getattr(build, "failed", 0):
        print(f"{build.failed:,} rows left out, listed with their reasons in {build.failures_path}")
    return 0


# --- demo-model --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoModelCommand:
    """Train the tiny CLIP of the synthetic world (for demos and tests only) and save it as local-dir:."""

    action: Literal["train"]
    """What to do: train."""
    out: Path | None = None
    """Folder for the checkpoint; by default the cache folder that `cladebench demo` and the tests reuse."""
    seed: int = 0
    """Seed of the weights, the training draw, the batch order and the captions."""
    world_seed: int = 0
    """Seed of the synthetic world (the demo's world is seed 0)."""
    steps: int | None = None
    """Optimizer steps (default: the full recipe)."""
    overwrite: bool = False
    """Replace an existing checkpoint in --out."""


@verb("demo-model", DemoModelCommand, "train the demo model: a tiny CLIP of the synthetic world")
def _demo_model(command: DemoModelCommand) -> int:
    import dataclasses as dc

    from cladebench.demo.model import DemoModelConfig, demo_model_id, train_demo_model

    config = DemoModelConfig(seed=command.seed, world_seed=command.world_seed)
    if command.steps is not None:
        config = dc.replace(config, steps=command.steps)
    if command.out is None:
        model_id = demo_model_id(config=config)
        path = Path(model_id.removeprefix("local-dir:"))
    else:
        path = train_demo_model(config, command.out, overwrite=command.overwrite)
    record = json.loads((path / "training.json").read_text())
    evaluation = record.get("evaluation") or {}
    print(f"demo model: local-dir:{path}")
    if evaluation:
        print("held-out zero-shot top-1: " + ", ".join(
            f"{rank} {100 * value:.1f}%" for rank, value in evaluation.get("top1", evaluation).items()
            if isinstance(value, (int, float))))
    print("a model of a synthetic world: useful for demos and tests only")
    return 0


# --- demo ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoConfig:
    """Build the offline sample suite from the synthetic world and run every task on it."""

    out: Path = Path("cladebench-demo")
    """Directory for the demo's datasets and results."""
    seed: int = 0
    """Seed of the synthetic world and of every sampling step."""
    images: int = 384
    """Number of single-organism images in the sample suite."""
    pairs: int = 96
    """Number of two-organism images."""
    overwrite: bool = False
    """Kept for scripts: a previous demo's folder (finished or killed midway) is always replaced, so the
    demo reruns as written, and a folder that is not a demo's is never touched, with or without it."""


@verb("demo", DemoConfig, "build the offline sample suite and run every task on it")
def _demo(config: DemoConfig) -> int:
    from cladebench import demo

    demo.run_demo(config)
    return 0


# --- entry point ---------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse's parser, but a mistake on the command line is one line (the option and what is wrong with it)
    and exit 2, like every other usage error, instead of the whole usage block; ``--help`` still shows it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser with one sub-command per registered verb (sub-parsers are :class:`_Parser` too)."""
    parser = _Parser(
        prog="cladebench",
        description="Curate, store, evaluate and inspect benchmarks for biological vision(-language) models.",
        epilog="Exit codes: 0 ok, 1 failure, 2 usage, 3 no dataset, 4 schema error, 5 remote unreachable, "
        "6 model cannot be built, 70 bug, 130 interrupted, 141 output pipe closed.",
    )
    parser.add_argument("--version", action="version", version=f"cladebench {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name in sorted({*VERBS, *FAMILIES}):
        if name in FAMILIES:
            family = FAMILIES[name]
            family_parser = sub.add_parser(name, help=family.help, description=family.help)
            kinds = family_parser.add_subparsers(dest="kind", metavar=family.metavar, required=True)
            for kind, member in sorted(family.members().items()):
                member_parser = kinds.add_parser(kind, help=member.help,
                                                 description=(member.config.__doc__ or member.help).strip())
                add_config_arguments(member_parser, member.config)
            continue
        v = VERBS[name]
        verb_parser = sub.add_parser(name, help=v.help, description=(v.config.__doc__ or v.help).strip())
        add_config_arguments(verb_parser, v.config)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (``cladebench`` exits with it)."""
    try:
        parser = build_parser()  # imports every builder's module: a Ctrl-C here is an interrupt too
        args, extra = parser.parse_known_args(argv)
    except KeyboardInterrupt:
        print("cladebench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    debug = args.debug or os.environ.get("CLADEBENCH_DEBUG") == "1"
    chosen = FAMILIES[args.verb].members()[args.kind] if args.verb in FAMILIES else VERBS[args.verb]
    extra = take_late_positionals(chosen.config, args, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        config = config_from_args(chosen.config, args)
        return int(chosen.run(config) or 0)
    except CladebenchError as exc:
        if debug:
            traceback.print_exc()
        print(f"cladebench {args.verb}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"cladebench {args.verb}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (`| head`): stop quietly, and point stdout at nothing so the
        # interpreter's final flush does not fail on the same closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        if debug:
            traceback.print_exc()
        # A safety net under the checks each verb makes: a read-only or full disk, a file where a folder
        # should be (or the reverse) is the environment's doing, not a bug, wherever it surfaces.
        environment = environment_error(exc)
        if environment is not None:
            print(f"cladebench {args.verb}: error: {environment}", file=sys.stderr)
            return environment.exit_code
        print(
            f"cladebench {args.verb}: internal error (a bug, please report it): {type(exc).__name__}: {exc}\n"
            "rerun with --debug for the traceback",
            file=sys.stderr,
        )
        return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
