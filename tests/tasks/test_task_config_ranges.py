"""Rerank and lineage configs refuse their own settings out of range when built, as every task config does,
so a config made in code (not only through `cladebench eval`) is checked the same way."""

from __future__ import annotations

from typing import Any

import pytest

from cladebench.errors import UsageError
from cladebench.tasks.fewshot import FewShotConfig
from cladebench.tasks.geo.config import GeoPriorConfig
from cladebench.tasks.lineage.config import LineageConfig
from cladebench.tasks.rerank import RerankConfig

CASES: list[tuple[type, dict[str, Any], str]] = [
    (RerankConfig, {"rerank_k": 0}, "--rerank-k must be at least 1, got 0"),
    (RerankConfig, {"vlm_concurrency": 0}, "--vlm-concurrency must be at least 1, got 0"),
    (RerankConfig, {"vlm_max_response_bytes": 0}, "--vlm-max-response-bytes must be at least 1, got 0"),
    (RerankConfig, {"vlm_deadline_s": float("nan")}, "--vlm-deadline-s must be a positive number"),
    (LineageConfig, {"vlm_concurrency": -1}, "--vlm-concurrency must be at least 1, got -1"),
    (LineageConfig, {"vlm_max_response_bytes": 1.5}, "--vlm-max-response-bytes must be an integer"),
    (LineageConfig, {"vlm_deadline_s": 0}, "--vlm-deadline-s must be a positive finite number, got 0"),
    # The logit scale is checked once, when any config that has one is made (not again when it is used).
    (LineageConfig, {"logit_scale": "nan"}, "--logit-scale must be 'learned' or a positive finite number"),
    (GeoPriorConfig, {"logit_scale": "0"}, "--logit-scale must be 'learned' or a positive finite number"),
    (GeoPriorConfig, {"logit_scale": "big"}, "--logit-scale must be 'learned' or a positive number"),
]


@pytest.mark.parametrize(("config_class", "settings", "says"), CASES,
                         ids=[f"{c.__name__}-{next(iter(s))}" for c, s, _ in CASES])
def test_config_refuses_a_setting_out_of_range(config_class: type, settings: dict[str, Any], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        config_class(**settings)


def test_defaults_pass() -> None:
    assert RerankConfig().rerank_k == 100 and LineageConfig().vlm_concurrency == 8


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), float("nan"), True, "1"])
def test_fewshot_fallback_c_must_be_a_positive_finite_number(value: object) -> None:
    """A flag or a string is refused as a usage error too, not accepted as 1 or left to fail as a bug."""
    with pytest.raises(UsageError, match=r"^--linear-fallback-c must be a positive"):
        FewShotConfig(linear_fallback_c=value)  # type: ignore[arg-type]
