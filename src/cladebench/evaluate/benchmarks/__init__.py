"""Named benchmarks: ``cladebench eval fine-grained-challenges --task fewshot`` without knowing a URI, its columns
or its protocol.

A benchmark name stands for a published dataset (its source and pinned release), the task(s) it is evaluated with,
and the settings its card or paper reports (:class:`~.base.Protocol`). Settings the user gives win over the
protocol's; those left at their defaults take the protocol's. Its data is read from a local mirror when one is
given (``--data DIR``, or ``$CLADEBENCH_MIRROR/<name>``), else from where it is published: opened remotely at its
release (Fine-Grained Challenges), or fetched once and built into the cache (CrypticBio, INQUIRE-Rerank,
iNat Co-Observed). One module per family says where its data lives: :mod:`.finegrained`, :mod:`.crypticbio`,
:mod:`.hub`; :mod:`.base` what a benchmark is.

This ``__init__`` presents the package's API on purpose (:data:`BENCHMARKS`, :func:`resolve`, ...) and imports
the family modules so that every benchmark is registered; the modules import :mod:`.base`, never this file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from cladebench.errors import UsageError
from cladebench.evaluate.benchmarks import crypticbio, finegrained, hub  # noqa: F401  (each registers its own)
from cladebench.evaluate.benchmarks.base import (
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

__all__ = ["BENCHMARKS", "MIRROR_ENV", "Benchmark", "Headline", "Located", "Protocol", "PublishedFigure",
           "get_benchmark", "register_benchmark", "resolve", "with_benchmark_defaults"]


def get_benchmark(name: str) -> Benchmark | None:
    """The benchmark named ``name``, or None when ``name`` is a path or URI."""
    return BENCHMARKS.get(name)


def _named(config: Any) -> Benchmark | None:
    """The benchmark the config's dataset names; None for a path or URI, including a local folder that happens to
    bear a benchmark's name."""
    benchmark = get_benchmark(config.dataset)
    return None if benchmark is None or Path(config.dataset).exists() else benchmark


def with_benchmark_defaults(config: Any) -> Any:
    """The config with its benchmark's protocol filled in where the user left a setting at its default (reads
    nothing, so it runs before any check that needs those settings). A task the benchmark is not evaluated with is
    a usage error, and so is ``--data`` for a dataset that is no benchmark."""
    benchmark = _named(config)
    if benchmark is None:
        if getattr(config, "data", None) is not None:
            raise UsageError(f"--data names a local mirror of a named benchmark ({', '.join(BENCHMARKS)}); "
                             f"{config.dataset!r} is a path or URI: drop --data")
        return config
    protocol = benchmark.protocol(config.task or benchmark.task)
    fields = {f.name: f for f in dataclasses.fields(config) if f.init}
    changes: dict[str, Any] = {}
    # A field the config's class fixes (the task of `eval rerank ...`) is the user's choice, never replaced.
    for name, value in {"task": protocol.task, **protocol.settings}.items():
        if name == "column" and getattr(config, "model", None) is not None:
            continue  # the model names the column holding its vectors
        spec = fields.get(name)
        if spec is not None and getattr(config, name) == _default(spec) and value != getattr(config, name):
            changes[name] = value
    return dataclasses.replace(config, **changes) if changes else config


def resolve(config: Any) -> tuple[str, Any, Located | None]:
    """The dataset URI to open, the config with the benchmark's protocol filled in, and where the benchmark's data
    was found (None for a path or URI). A benchmark built from files is built here on first use; a published
    dataset's embeddings are checked against their pinned revisions before any model loads."""
    config = with_benchmark_defaults(config)
    benchmark = _named(config)
    if benchmark is None:
        return config.dataset, config, None
    located = benchmark.locate(mirror_folder(benchmark, getattr(config, "data", None)))
    if benchmark.publishes_embeddings:
        _check_model_has_column(benchmark, located, config)
    return located.uri, config, located


def _check_model_has_column(benchmark: Benchmark, located: Located, config: Any) -> None:
    """A benchmark that publishes embeddings is never embedded into: a --model without a column there is refused
    before it loads, with the commands that make a local copy to embed."""
    if getattr(config, "model", None) is None or getattr(config, "column", None) is not None:
        return
    from cladebench import store
    from cladebench.errors import CladebenchError
    from cladebench.models.registry import resolve_model
    from cladebench.tasks.common import find_embedding_column

    spec = resolve_model(config.model, revision=getattr(config, "revision", None))
    if spec.kind != "clip":
        return
    try:
        find_embedding_column(store.open_dataset(located.uri), spec.id)
    except CladebenchError:
        published = ", ".join(sorted(located.provenance.get("published_embeddings", {}))) or "none"
        raise UsageError(f"{benchmark.name} publishes image embeddings in {published}, none of them of "
                         f"{config.model}; to evaluate it, copy the dataset (`cladebench subset {located.uri} --out "
                         f"DIR`), embed the copy (`cladebench embed DIR --model {config.model}`) and evaluate DIR"
                         ) from None


def _default(spec: dataclasses.Field) -> Any:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return spec.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING
