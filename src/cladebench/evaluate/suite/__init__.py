"""``cladebench suite``: every named benchmark's standard protocol for several models, resumable, into one folder
whose results table and report accumulate across suites.

:mod:`.plan` says which runs a suite makes and when two are the same run (a key over benchmark, task, settings,
model, revision and data source); :mod:`.runner` runs them through ``run_eval`` (reused, skipped with the reason,
or evaluated); :mod:`.results` keeps the table (one row per benchmark × protocol × model × metric), merged under a
lock so concurrent suites never lose rows. The report of a suite folder is written by
:mod:`cladebench.report.suite` (a higher layer).

This ``__init__`` presents the package's API on purpose; its modules import each other, never this file.
"""

from __future__ import annotations

from cladebench.evaluate.suite.plan import PlannedRun, SuiteConfig, plan_suite, protocol_name
from cladebench.evaluate.suite.results import RESULTS_FILE, format_results, read_results, require_results
from cladebench.evaluate.suite.runner import SuiteSummary, run_suite

__all__ = ["RESULTS_FILE", "PlannedRun", "SuiteConfig", "SuiteSummary", "format_results", "plan_suite",
           "protocol_name", "read_results", "require_results", "run_suite"]
