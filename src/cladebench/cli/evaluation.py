"""The verbs on results: ``eval <task>`` (or ``eval <benchmark>``), ``compare``, ``compare-columns``, ``report``.

``eval`` is a family: its second word is a task, each with its own config (the options every evaluation shares
plus the task's own, nothing of another task's), or a named benchmark, which knows its task and its dataset.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cladebench.cli.verbs import FAMILIES, Family, Verb, verb
from cladebench.config import at_least
from cladebench.errors import UsageError

if TYPE_CHECKING:
    from cladebench.evaluate.configs import EvalConfig
    from cladebench.report import ReportConfig

# --- eval ----------------------------------------------------------------------------------------


def _eval(config: EvalConfig) -> int:
    from cladebench.evaluate.run import format_metrics, label_notes, label_set_sizes, rows_line, run_eval

    record, path = run_eval(config)
    sizes = label_set_sizes(record)
    groups = record.provenance["groups"]
    if groups["column"] is not None:
        left_out = groups.get("left_out") or {}
        labels = (f"{len(groups['values']) - len(left_out)} {groups['column']} groups evaluated separately"
                  + (": " + ", ".join(f"{g} {n} labels" for g, n in sizes.items()) if sizes else "")
                  + (f", {len(left_out)} left out (why: below)" if left_out else "") + "; ")
    else:
        labels = f"{sizes['all']} labels; " if "all" in sizes else ""
    print(f"{record.task} on {config.dataset} with {record.model_name()} "
          f"({labels}{record.provenance['dataset']['evaluated_rows']} images)")
    left_out = rows_line(record)
    if left_out is not None:
        print(left_out)
    for note in label_notes(record):
        print(note)
    print(format_metrics(record))
    print(f"run name: {record.label}")
    print(f"run record: {path}")
    return 0


@functools.cache
def benchmark_config(name: str) -> type[EvalConfig]:
    """The eval config of the benchmark ``name``'s task with the dataset fixed to the benchmark (no DATASET
    argument); one class per benchmark, made when its command is the one run."""
    from cladebench.benchmarks import BENCHMARKS
    from cladebench.evaluate.configs import EVAL_CONFIGS

    benchmark = BENCHMARKS[name]
    base = EVAL_CONFIGS.get_named(benchmark.task)
    return dataclasses.make_dataclass(
        base.__name__, [("dataset", str, dataclasses.field(default=benchmark.name, init=False))], bases=(base,),
        frozen=True, kw_only=True,
        namespace={"__doc__": f"{benchmark.description}. Tasks {', '.join(benchmark.tasks)} (default "
                              f"{benchmark.task}; `eval TASK {benchmark.name}` runs another); read from --data "
                              "DIR (a mirror) or the published source; the benchmark's reporting settings apply "
                              "where no option is given."})


def _eval_members() -> dict[str, Verb]:
    from cladebench.benchmarks import BENCHMARKS
    from cladebench.evaluate.configs import EVAL_CONFIGS

    members = {name: Verb(name=name, help=(config.__doc__ or name).split(";")[0].strip(), config=config, run=_eval)
               for name, config in EVAL_CONFIGS.items()}
    for name, benchmark in BENCHMARKS.items():
        members[name] = Verb(name=name, help=f"benchmark: {benchmark.description.split(':')[0]} (task "
                                             f"{benchmark.task})",
                             config=functools.partial(benchmark_config, name), run=_eval)
    return members


FAMILIES.add("eval", Family(help="run a task (zeroshot, fewshot, retrieval, rerank, lineage, geo) or a named "
                                 "benchmark with a model; write run.json + predictions.parquet",
                            metavar="TASK|BENCHMARK", members=_eval_members))


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
    all_metrics: bool = False
    """Print every metric of every group and breakdown, not only the verdict and the metrics it is about (the global
    --verbose is what the libraries underneath log)."""

    def __post_init__(self) -> None:
        at_least("--resamples", self.resamples, 1)
        at_least("--seed", self.seed, 0)
        if not (isinstance(self.alpha, (int, float)) and 0.0 < self.alpha < 1.0):
            raise UsageError(f"--alpha must be between 0 and 1, got {self.alpha}")


@verb("compare", CompareConfig, "paired bootstrap differences between runs on the same examples, Holm-corrected")
def _compare(config: CompareConfig) -> int:
    from cladebench.evaluate.compare import compare_runs
    from cladebench.evaluate.compare_text import format_comparison

    comparison = compare_runs(config.runs, metric=config.metric, n_resamples=config.resamples, seed=config.seed,
                              alpha=config.alpha, intersect=config.intersect)
    print(comparison.to_json() if config.json else format_comparison(comparison, verbose=config.all_metrics))
    return 0


# --- report --------------------------------------------------------------------------------------

@verb("report", "cladebench.report:ReportConfig",
      "one self-contained HTML page (or Markdown tables) of run records: leaderboard with ties, charts, "
      "calibration, galleries, provenance")
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
    group_by: str = "auto"
    """Partition column whose groups are separate few-shot problems, as in eval: auto (challenge_group when
    present), none (pool every row on purpose), or a column name."""
    json: bool = False
    """Print JSON instead of tables."""

    def __post_init__(self) -> None:
        from cladebench.store import check_filter
        from cladebench.taxonomy import Rank

        Rank.parse(self.rank)
        for shots in self.shots:
            at_least("--shots", shots, 1)
        at_least("--repetitions", self.repetitions, 1)
        at_least("--seed", self.seed, 0)
        check_filter(self.where)


@verb("compare-columns", CompareColumnsCommand, "few-shot accuracy per emb_* column on the same splits, and CKA")
def _compare_columns(command: CompareColumnsCommand) -> int:
    from cladebench import store
    from cladebench.evaluate.compare_columns import compare_columns, format_column_comparison

    result = compare_columns(store.open_dataset(command.dataset), command.columns or None, rank=command.rank,
                             shots=command.shots, repetitions=command.repetitions, seed=command.seed,
                             methods=command.methods, where=command.where, group_by=command.group_by)
    print(json.dumps(result.to_dict(), indent=2, default=str) if command.json else format_column_comparison(result))
    return 0
