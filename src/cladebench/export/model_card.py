"""``cladebench export model-card``: a model's checked results as the ``model-index`` of a Hugging Face model card.

The card is written through huggingface_hub's own :class:`~huggingface_hub.ModelCard`, ``ModelCardData`` and
``EvalResult``, so the Hub parses it as it parses every card, and ``ModelCard.load(path).data.eval_results`` reads
back the values written. One entry per metric of the model's latest run of each benchmark and protocol (pooled and
per challenge group; breakdowns by an attribute stay in the run records): task type (the nearest Hub task), the
benchmark (its Hub dataset as type, the challenge group as config, the split, the release), the metric as
``results --format json`` gives it with its interval, n and interval method as arguments, and cladebench and its
version as the source. An existing card keeps its body and every other metadata field; entries of other sources
stay, and cladebench's own entries for the same dataset, group, split, task and metric are replaced. Nothing is
uploaded: pushing the card is ``huggingface-cli upload``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cladebench import __version__
from cladebench.errors import CladebenchError, UsageError
from cladebench.export.checked import Exported, ExportedRun, exported_results
from cladebench.export.configs import ModelCardConfig
from cladebench.paths import atomic_write
from cladebench.tasks import known_task

if TYPE_CHECKING:
    from huggingface_hub import EvalResult

SOURCE_NAME = f"cladebench {__version__}"
"""The source every entry names: the tool and its version."""
SOURCE_URL = "https://github.com/cladebench/cladebench"
_HUB_DATASET = re.compile(r"hf://datasets/([^/\s]+/[^/\s@()]+)")
_ONE_SPLIT = re.compile(r"^\(?\s*split\s*=\s*'([^']+)'\s*\)?$")


def _hub_task(name: str) -> str:
    """The nearest Hub task type of a cladebench task (:attr:`~cladebench.tasks.Task.hub_task`); a task that names
    none, or one this version does not know, gives its own name."""
    task = known_task(name)
    return task.hub_task if task is not None and task.hub_task else name


def _require_hub() -> None:
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        raise CladebenchError("model cards need huggingface_hub: pip install 'cladebench[hub]'") from None


def card_entries(exported: Exported) -> tuple[list[EvalResult], list[str]]:
    """One ``EvalResult`` per metric with a value of the latest run of each benchmark and protocol, and a line for
    each run or metric left out (an older run, a metric without a value)."""
    from huggingface_hub import EvalResult

    latest: dict[tuple[str, str], ExportedRun] = {}
    left_out: list[str] = []
    for run in sorted(exported.runs, key=lambda r: str(r.first.get("recorded_at") or "")):
        key = (str(run.first["benchmark"]), str(run.first["protocol"]))
        if key in latest:
            left_out.append(f"{key[0]} ({key[1]}): the run of {latest[key].first['recorded_at']} is not on the card: "
                            "the latest run stands for the model, as in `cladebench results`")
        latest[key] = run
    entries = []
    for run in latest.values():
        dataset = run.record.provenance.get("dataset") or {}
        source = dataset.get("benchmark_source") or {}
        hub = _HUB_DATASET.search(str(source.get("source") or ""))
        split = _ONE_SPLIT.match(str(dataset.get("where") or ""))
        without = 0
        for row in run.rows:
            group, _, metric = str(row["metric"]).rpartition("/")
            if "=" in group:  # a breakdown by an attribute: the run record keeps it
                continue
            if row["value"] is None:
                without += 1
                continue
            estimate = run.estimate(row["metric"])
            arguments = {"low": row["low"], "high": row["high"], "n": row["n"],
                         "confidence": estimate.get("confidence"),
                         "interval": str(estimate.get("interval") or "").partition(":")[0] or None}
            entries.append(EvalResult(
                task_type=_hub_task(str(row["task"])), task_name=str(row["protocol"]),
                dataset_type=hub.group(1) if hub else str(row["benchmark"]), dataset_name=str(row["benchmark"]),
                dataset_config=group or None, dataset_split=split.group(1) if split else None,
                dataset_revision=source.get("release") or source.get("pinned_release"),
                dataset_args={"fingerprint": dataset.get("evaluated_fingerprint"),
                              "rows": dataset.get("evaluated_rows")},
                metric_type=metric, metric_value=row["value"], metric_name=str(row["metric"]),
                metric_args={k: v for k, v in arguments.items() if v is not None},
                source_name=SOURCE_NAME, source_url=SOURCE_URL))
        if without:
            left_out.append(f"{run.first['benchmark']} ({run.first['protocol']}): {without} metrics without a value "
                            "(left-out groups, undefined values) are not on the card; `cladebench results` says why")
    return entries, left_out


def _entry_key(entry: EvalResult) -> tuple[object, ...]:
    return (entry.dataset_type, entry.dataset_name, entry.dataset_config, entry.dataset_split, entry.task_type,
            entry.task_name, entry.metric_type)


def check_card_target(out: Path, inputs: Sequence[Path]) -> str | None:
    """Refuse, before any work, an ``out`` that is a folder, a file the export reads, a file that is not a model
    card (only a Markdown card is updated) or a place that cannot be written; the existing card's text, if any."""
    from cladebench.evaluate.record import PREDICTIONS_FILE, RUN_FILE
    from cladebench.evaluate.suite.results import RESULTS_FILE
    from cladebench.paths import check_not_an_input
    from cladebench.store.files import check_writable

    if out.is_dir():
        raise CladebenchError(f"--out-file {out} is a folder; the card is one file: give its name (e.g. "
                              f"{out / 'README.md'})")
    read = []
    for given in inputs:
        folder = given if given.is_dir() else given.parent
        read += [folder / RESULTS_FILE, folder / RUN_FILE, folder / PREDICTIONS_FILE, given]
    check_not_an_input(out, [p for p in read if p.exists() and p.is_file()], "--out-file")
    check_writable(out)
    if not out.exists():
        return None
    refusal = f"--out-file {out} is not a model card"
    if out.suffix.lower() != ".md":
        raise UsageError(f"{refusal} (a card is a Markdown file, README.md); the export would replace it: name "
                         "another file")
    try:
        text = out.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise UsageError(f"{refusal} (not UTF-8 text); the export would replace it: name another file") from None
    except OSError as exc:
        raise CladebenchError(f"cannot read {out}: {exc.strerror}") from None
    from huggingface_hub import ModelCard

    try:
        ModelCard(text)
    except Exception as exc:  # huggingface_hub raises ValueError or yaml's errors for a bad front matter
        from cladebench.evaluate.labels import one_line

        raise UsageError(f"{refusal}: its metadata does not parse ({one_line(str(exc))[:200]}); fix it or name "
                         "another file") from None
    return text


@dataclass(frozen=True)
class CardWritten:
    """What ``export model-card`` wrote, to say it."""

    path: Path
    written: int
    kept: int
    runs: int
    left_out: list[str]


def write_model_card(runs: Sequence[str | Path], model: str, out: str | Path, *, name: str | None = None
                     ) -> CardWritten:
    """Write or update the card ``out`` with the checked results of ``model`` in ``runs``."""
    out = Path(out)
    inputs = [Path(p) for p in runs]
    _require_hub()
    existing = check_card_target(out, inputs)
    from huggingface_hub import ModelCard, ModelCardData

    exported = exported_results(inputs, model=model)
    entries, left_out = card_entries(exported)
    if not entries:
        raise CladebenchError(f"no metric of {model}'s runs has a value to put on the card:\n"
                              + "\n".join([*exported.left_out, *left_out]))
    card = ModelCard(existing) if existing is not None else None
    data: Any
    if card is None:
        data = ModelCardData()
        body = (f"\n# {name or model}\n\nBenchmark results in this card's metadata (`model-index`) were written by "
                f"{SOURCE_NAME} from run records checked against their predictions.\n")
        previous: list[EvalResult] = []
    else:
        data = card.data
        body = card.text
        previous = list(data.eval_results or [])
    replaced = {_entry_key(e) for e in entries}
    kept = [e for e in previous
            if not (str(e.source_name or "").startswith("cladebench") and _entry_key(e) in replaced)]
    data.eval_results = [*kept, *entries]
    data.model_name = name or data.model_name or model
    text = f"---\n{data.to_yaml()}\n---\n{body if body.startswith(chr(10)) else chr(10) + body}"
    ModelCard(text)  # what is written parses as the Hub parses it
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, text)
    except OSError as exc:
        from cladebench.errors import environment_error

        raise (environment_error(exc, out) or exc) from None
    return CardWritten(out, len(entries), len(kept), len({(e.dataset_name, e.task_name) for e in entries}),
                       [*exported.left_out, *left_out])


def run_model_card(config: ModelCardConfig) -> CardWritten:
    """The CLI verb's body."""
    return write_model_card(config.runs, config.model, config.out_file, name=config.name)
