"""The verbs that make datasets: ``build <builder>`` and ``load <source>``, one config per builder or source.

The configs live beside what they configure (each builder's module, ``curate/sources/load_config.py``); each
benchmark family registers its builder and source from its folder (:mod:`cladebench.benchmarks`); this module only
turns the registries into verbs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cladebench.cli.verbs import FAMILIES, Family, Verb


def _with_families() -> None:
    """Register every benchmark family's builder and source (each family registers its own, from its folder)."""
    import cladebench.benchmarks  # noqa: F401


# --- build ---------------------------------------------------------------------------------------


def _builders() -> dict[str, Verb]:
    from cladebench.curate.builders import BUILDERS

    _with_families()
    def run(builder: Any) -> Callable[[object], int]:
        def build(config: object) -> int:
            summary = builder.build(config)
            print(summary.describe() if hasattr(summary, "describe") else summary)
            return 0

        return build

    # each config named by where it lives: only the builder the command line names is imported
    return {name: Verb(name=name, help=b.doc, config=f"{b.config_module or b.module}:{b.config_name}", run=run(b))
            for name, b in BUILDERS.items()}


def _builder_aliases() -> dict[str, str]:
    from cladebench.curate.builders import BUILDERS

    _with_families()
    return dict(BUILDERS.aliases)


FAMILIES.add("build", Family(help="build a benchmark from raw sources (an iNaturalist export, a catalog, a config)",
                             metavar="BENCHMARK", members=_builders, aliases=_builder_aliases))


# --- load ---------------------------------------------------------------------------------------


def _run_load(name: str) -> Callable[[object], int]:
    def load(command: Any) -> int:
        from cladebench.curate.sources import get_source

        _with_families()
        build = get_source(name).build(command.path, command.out, **command.builder_options())
        if hasattr(build, "written"):
            downloads = getattr(build, "download", None)
            print(f"{build.dataset_path}: {build.written:,} of {build.rows:,} rows written"
                  + ("" if downloads is None else f"; downloads: {downloads.summary()}"))
        else:
            print(f"{build.dataset_path}: {build.rows:,} rows written")
        for note in getattr(build, "notes", ()):
            print(note)
        if getattr(build, "failed", 0):
            print(f"{build.failed:,} rows left out, listed with their reasons in {build.failures_path}")
        return 0

    return load


def _sources() -> dict[str, Verb]:
    from cladebench.curate.sources import SOURCES

    _with_families()
    return {name: Verb(name=name, help=source.doc, config=source.config(), run=_run_load(name))
            for name, source in SOURCES.items()}


FAMILIES.add("load", Family(help="build a dataset from a published benchmark's files (images fetched, failures "
                                 "recorded)", metavar="SOURCE", members=_sources))
