"""The metric definitions and the display rules are cladebench.registry.Registry tables. (That the metrics modules
import one another, never the package ``__init__`` that presents the API, is a rule for every package:
``tests/test_shape.py``.)"""

from __future__ import annotations

import pytest

from cladebench.metrics import DISPLAY_SCALES, METRIC_DEFINITIONS, define_metric, display_scale, register_display
from cladebench.registry import Registry


def test_definitions_and_display_rules_are_registries() -> None:
    assert isinstance(METRIC_DEFINITIONS, Registry) and isinstance(DISPLAY_SCALES, Registry)
    assert "Wilson" in METRIC_DEFINITIONS.get_named("top1")


def test_a_definition_may_be_repeated_but_not_changed() -> None:
    assert define_metric("top1", METRIC_DEFINITIONS["top1"]) == "top1"
    with pytest.raises(ValueError, match="defined twice"):
        define_metric("top1", "something else")


def test_display_rules_match_the_metric_s_own_name_and_shares_default_to_percent() -> None:
    import cladebench.metrics.retrieval  # noqa: F401  (registers ap@k and mrr@k)

    assert display_scale("supercategory=Fungi/ap@50") == (1.0, "") and display_scale("top1_species") == (100.0, "%")
    register_display(r"made_up_score", 1.0, " pts")
    try:
        assert display_scale("group=a/made_up_score") == (1.0, " pts")
    finally:
        del DISPLAY_SCALES[r"made_up_score"]
    assert display_scale("made_up_score") == (100.0, "%")



def test_counts_print_as_counts_in_a_process_that_never_imported_their_task() -> None:
    """A report reads lineage and geo run records without importing those tasks: depths stay counts, not 237.50%."""
    import subprocess
    import sys

    code = ("import cladebench.report\n"
            "from cladebench.metrics.display import display_scale\n"
            "print([display_scale(n) for n in ('hint_depth', 'g/nohint_lca_distance', 'image_weight')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[(1.0, ''), (1.0, ''), (1.0, '')]"


def test_a_difference_that_rounds_to_zero_reads_plus_zero() -> None:
    """Two identical runs differ by -0.0 once negated for display; the sign of a zero says nothing, so it reads
    +0.00, as does anything that rounds to it."""
    from cladebench.metrics import signed

    assert [signed(v) for v in (-0.0, -0.001, 0.004, 1.236, -1.234)] == ["+0.00", "+0.00", "+0.00", "+1.24", "-1.23"]
