"""Named benchmarks: ``cladebench eval fewshot fine-grained-challenges`` without knowing a URI, its columns or its
protocol.

A benchmark name stands for a published dataset (its source and pinned release), the task(s) it is evaluated with,
and the settings its card or paper reports (:class:`~.base.Protocol`). Settings the user gives win over the
protocol's (the run is marked off protocol); those not given take the protocol's. Its data is read from a local
mirror when one is given (``--data DIR``, or ``$CLADEBENCH_MIRROR/<name>``), else from where it is published: opened
remotely at its
release (Fine-Grained Challenges), or fetched once and built into the cache (CrypticBio, INQUIRE-Rerank,
iNat Co-Observed). One folder per family holds all of it (where its data lives, how it is built, its offline
mirror, its protocols and headline): :mod:`.crypticbio`, :mod:`.finegrained`, :mod:`.inquire`, :mod:`.coobserved`;
:mod:`.base` says what a benchmark is, :mod:`.hub` what the Hub's Parquet benchmarks share.

This ``__init__`` presents the package's API on purpose (:data:`BENCHMARKS`, :func:`named_benchmark`, ...) and imports
the family modules so that every benchmark is registered; the modules import :mod:`.base`, never this file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cladebench.benchmarks.base import (
    BENCHMARKS,
    MIRROR_ENV,
    Benchmark,
    Headline,
    Located,
    Protocol,
    PublishedFigure,
    mirror_folder,
    register_benchmark,
)
from cladebench.errors import UsageError

# Each family registers its benchmarks, source and builder, in this order: the order `cladebench benchmarks` lists.
# isort: off
from cladebench.benchmarks.crypticbio import benchmark as _crypticbio  # noqa: F401
from cladebench.benchmarks.finegrained import benchmark as _finegrained  # noqa: F401
from cladebench.benchmarks.inquire import benchmark as _inquire  # noqa: F401
from cladebench.benchmarks.coobserved import benchmark as _coobserved  # noqa: F401
# isort: on

__all__ = ["BENCHMARKS", "MIRROR_ENV", "Benchmark", "Headline", "Located", "Protocol", "PublishedFigure",
           "apply_protocol", "check_model_has_column", "get_benchmark", "locate", "named_benchmark",
           "register_benchmark"]

if TYPE_CHECKING:
    import lance


def get_benchmark(name: str) -> Benchmark | None:
    """The benchmark named ``name``, or None when ``name`` is a path or URI."""
    return BENCHMARKS.get(name)


def named_benchmark(dataset: str, *, data: object = None) -> Benchmark | None:
    """The benchmark ``dataset`` names, or None for a path or URI (a local folder that happens to bear a
    benchmark's name is a path). The one place this is decided; ``--data`` for a path or URI is a usage error."""
    benchmark = get_benchmark(dataset)
    if benchmark is not None and not Path(dataset).exists():
        return benchmark
    if data is not None:
        raise UsageError(f"--data names a local mirror of a named benchmark ({', '.join(BENCHMARKS)}); "
                         f"{dataset!r} is a path or URI: drop --data")
    return None


def apply_protocol(config: Any, benchmark: Benchmark | None, given: frozenset[str]
                   ) -> tuple[object, dict[str, dict[str, object]]]:
    """The config with the benchmark's protocol filled in where the user gave no setting, and each given setting
    that departs from the protocol, that is, from every one of its runs (name -> the protocol's value and the one
    run). Reads nothing. A task the
    benchmark is not evaluated with is a usage error."""
    if benchmark is None:
        return config, {}
    protocol = benchmark.protocol(config.task or benchmark.task)
    fields = {f.name for f in dataclasses.fields(config) if f.init}
    changes: dict[str, object] = {}
    departures: dict[str, dict[str, object]] = {}
    for name, value in {"task": protocol.task, **protocol.settings}.items():
        if name == "column" and getattr(config, "model", None) is not None:
            continue  # the model names the column holding its vectors
        if name == "task" and "task" not in fields:
            continue  # `eval rerank ...`: the config's class fixes its task (checked against the benchmark above)
        if name not in fields:
            continue
        current = getattr(config, name)
        if name in given:
            # one of the protocol's own runs (FGC's 1-shot run, CrypticBio's common names) is on protocol
            if all(_plain(current) != _plain({name: value, **run}[name]) for run in protocol.runs):
                departures[name] = {"protocol": _plain(value), "run": _plain(current)}
        elif current != value:
            changes[name] = value
    return (dataclasses.replace(config, **changes) if changes else config), departures


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def locate(benchmark: Benchmark, config: object) -> Located:
    """Where the benchmark's data is (built once when it is built from files); a published dataset's embeddings
    are checked against their pinned revisions."""
    return benchmark.locate(mirror_folder(benchmark, getattr(config, "data", None)))


def check_model_has_column(benchmark: Benchmark, located: Located, config: object, spec: Any,
                           dataset: lance.LanceDataset) -> None:
    """A benchmark that publishes embeddings is never embedded into: a --model without a column there is refused
    before it loads, with the commands that make a local copy to embed. Asked by the evaluation plan, on the dataset
    it opened, for ``eval`` and every run of a suite alike."""
    if not benchmark.publishes_embeddings or spec is None or getattr(config, "column", None) is not None:
        return
    from cladebench.errors import CladebenchError
    from cladebench.models.spec import EMBEDS_IMAGES
    from cladebench.tasks.common import find_embedding_column

    if not spec.can(EMBEDS_IMAGES):  # a model that makes no vectors looks for none
        return
    try:
        find_embedding_column(dataset, spec.id)
    except CladebenchError:
        published = ", ".join(sorted(located.provenance.get("published_embeddings", {}))) or "none"
        model = getattr(config, "model", None) or spec.id  # a model handed in through the Python API has no name
        raise UsageError(f"{benchmark.name} publishes image embeddings in {published}, none of them of "
                         f"{model}; to evaluate it, copy the dataset (`cladebench subset {located.uri} --out "
                         f"DIR`), embed the copy (`cladebench embed DIR --model {model}`) and evaluate DIR"
                         ) from None
