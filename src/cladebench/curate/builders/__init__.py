"""Builders: benchmarks made from raw sources (an iNaturalist open-data export, ...), one module per benchmark.

A source module (:mod:`cladebench.curate.sources`) reads a benchmark someone published; a builder makes one
from raw material, choosing its rows. Each builder is a frozen config, its stages
(:class:`cladebench.curate.skeleton.Builder`) and a function ``build(config) -> summary`` that runs them through
:func:`~cladebench.curate.skeleton.run_build`, and registers here by name, so the CLI can offer ``build <name>`` with
the config's fields as options without importing every builder (and DuckDB) up front.

A benchmark family registers its builder from its own folder (:mod:`cladebench.benchmarks`), named like the
benchmark it builds (``build inat-coobserved``, as ``eval inat-coobserved``), the former names as aliases: the
registry holds them once :mod:`cladebench.benchmarks` is imported (the command line imports it first).

Example:
    >>> import cladebench.benchmarks  # each family registers its builder
    >>> get_builder("cameratrap").config_name
    'CameraTrapBuildConfig'
    >>> try:
    ...     get_builder("camera-trap")
    ... except Exception as error:
    ...     print(str(error).split(";")[0])
    unknown builder 'camera-trap'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cladebench.curate.sources import look_up_registered
from cladebench.registry import Registry

if TYPE_CHECKING:
    from cladebench.curate.skeleton import Builder as SkeletonBuilder
    from cladebench.curate.skeleton import Summary


@dataclass(frozen=True)
class Builder:
    """Where a builder's config and function live; imported only when used."""

    name: str
    """Registry name, the CLI's ``build <name>``."""
    module: str
    """Module of its ``(config) -> summary`` function."""
    config_name: str
    """Its frozen config class."""
    function_name: str
    """Its ``(config) -> summary`` function."""
    doc: str
    """One line on what it builds."""
    config_module: str | None = None
    """Module of its config class, when not ``module`` (a builder that is a package keeps them apart)."""
    stages_name: str = ""
    """Its stages in ``module``: ``(config) ->`` a :class:`cladebench.curate.skeleton.Builder`, which
    :func:`~cladebench.curate.skeleton.run_build` runs."""

    def config(self) -> type:
        return getattr(importlib.import_module(self.config_module or self.module), self.config_name)

    def function(self) -> Callable[[object], object]:
        return getattr(importlib.import_module(self.module), self.function_name)

    def build(self, config: object) -> object:
        return self.function()(config)

    def stages(self, config: object) -> SkeletonBuilder[object, object, Summary]:
        """The builder's stages for ``config``, for :func:`~cladebench.curate.skeleton.run_build`."""
        stages: SkeletonBuilder[object, object, Summary] = getattr(
            importlib.import_module(self.module), self.stages_name)(config)
        return stages


BUILDERS: Registry[Builder] = Registry("builder")
"""Registry of builders by name."""


def register(builder: Builder) -> Builder:
    """Add a builder to :data:`BUILDERS`."""
    return BUILDERS.add(builder.name, builder)


def get_builder(name: str) -> Builder:
    """Look a builder up by name; an unknown name lists the known ones and the closest. The benchmark families' builders
    are registered by ``import cladebench.benchmarks``, which this layer may not import; before it, an unknown
    name says so
    (:func:`~cladebench.curate.sources.look_up_registered`)."""
    return look_up_registered(BUILDERS, name)


__all__ = ["BUILDERS", "Builder", "get_builder", "register"]
