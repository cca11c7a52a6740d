"""The offline demo: build a sample suite from the synthetic world and run every registered step on it.

The demo is what a new user runs first, with no network and no model weights. It is built from the
same public functions a researcher calls (synthetic world -> canonical tables -> Lance datasets ->
indices, tags, subsets -> embeddings -> tasks -> report), so when it runs, the flow works end to end.
Its steps register themselves in :data:`DEMO_STEPS` and run in registration order, the order this package
imports their modules: :mod:`.suite` (the datasets and their embeddings), :mod:`.finegrained` (zero-shot,
few-shot and retrieval per challenge group, two models ranked), :mod:`.other_tasks` (rerank, geo,
Co-Observed from an export, lineage) and :mod:`.summary` (the report, and the summary printed at the end).

This ``__init__`` presents the package's API on purpose (:func:`run_demo`, :data:`DEMO_STEPS`,
:class:`DemoContext`), each name imported from its module on first use (:mod:`.run` registers the steps); the
modules import :mod:`.steps`, never this package.
"""

from typing import TYPE_CHECKING

from cladebench.lazy import present_lazily

if TYPE_CHECKING:  # what present_lazily presents, as the type checker sees it (nothing imported at run time)
    from cladebench.demo.run import DEMO_STEPS, WRITER, run_demo  # noqa: F401
    from cladebench.demo.steps import DemoContext  # noqa: F401

__all__ = present_lazily(__name__, {"run": ("DEMO_STEPS", "WRITER", "run_demo"), "steps": ("DemoContext",)})
