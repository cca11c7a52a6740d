"""``cladebench suite``: every named benchmark's standard protocol for several models, resumable, into one folder
whose results table and report accumulate across suites.

:mod:`.plan` says which runs a suite makes and when two are the same run (a key over benchmark, task, settings,
model, revision and data source); :mod:`.runner` runs them through ``run_eval`` (reused, skipped with the reason,
or evaluated); :mod:`.results` keeps the table (one row per benchmark × protocol × model × metric), merged under a
lock so concurrent suites never lose rows. The report of a suite folder is written by
:mod:`cladebench.report.suite` (a higher layer).

This ``__init__`` presents the package's API on purpose, each name imported from its module on first use (the
command line's ``suite --help`` reads the config alone); its modules import each other, never this file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cladebench.lazy import present_lazily

if TYPE_CHECKING:  # what present_lazily presents, as the type checker sees it (nothing imported at run time)
    from cladebench.evaluate.suite.plan import PlannedRun, SuiteConfig, plan_suite, protocol_name  # noqa: F401
    from cladebench.evaluate.suite.results import (  # noqa: F401
        RESULTS_FILE,
        format_results,
        read_results,
        require_results,
    )
    from cladebench.evaluate.suite.runner import SuiteSummary, run_suite  # noqa: F401

__all__ = present_lazily(__name__, {
    "plan": ("PlannedRun", "SuiteConfig", "plan_suite", "protocol_name"),
    "results": ("RESULTS_FILE", "format_results", "read_results", "require_results"),
    "runner": ("SuiteSummary", "run_suite"),
})
