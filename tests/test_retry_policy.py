"""One retry policy for downloads and the VLM client (:mod:`cladebench.retry`): both configs build it from their
own fields."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from cladebench.curate.fetch import DownloadConfig
from cladebench.errors import CladebenchError
from cladebench.models.vlm import VLMConfig
from cladebench.retry import RetryPolicy, parse_retry_after


def test_download_config_builds_its_policy_from_its_fields() -> None:
    config = DownloadConfig(max_attempts=3, backoff_base_s=0.5, backoff_max_s=4.0, jitter=0.25,
                            max_retry_after_s=7.0, item_deadline_s=20.0)
    assert config.retry_policy == RetryPolicy(max_attempts=3, backoff_base_s=0.5, backoff_max_s=4.0, jitter=0.25,
                                              max_retry_after_s=7.0, deadline_s=20.0)
    assert DownloadConfig(item_deadline_s=None).retry_policy.deadline_s is None


def test_vlm_config_builds_its_policy_from_its_fields() -> None:
    config = VLMConfig(max_attempts=2, backoff_base_s=0.1, backoff_max_s=3.0, jitter=0.0, max_retry_after_s=9.0,
                       request_deadline_s=15.0)
    assert config.retry_policy == RetryPolicy(max_attempts=2, backoff_base_s=0.1, backoff_max_s=3.0, jitter=0.0,
                                              max_retry_after_s=9.0, deadline_s=15.0)


def test_default_configs_share_one_policy_but_their_deadline() -> None:
    # The defaults of the two configs' retry fields agree with each other and with RetryPolicy's.
    download, vlm = DownloadConfig().retry_policy, VLMConfig().retry_policy
    assert download == vlm == RetryPolicy(deadline_s=60.0)


def test_backoff_delay_is_the_same_through_either_config() -> None:
    fields = {"backoff_base_s": 1.0, "backoff_max_s": 5.0, "jitter": 0.5, "max_retry_after_s": 30.0}
    download, vlm = DownloadConfig(**fields), VLMConfig(**fields)
    for attempt in (1, 2, 3, 4):
        for retry_after in (None, 2.5, 3600.0):
            expected = download.retry_policy.backoff_delay(attempt, retry_after, random.Random(attempt))
            assert vlm.retry_policy.backoff_delay(attempt, retry_after, random.Random(attempt)) == expected


def test_parse_retry_after() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == pytest.approx(10.0)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0


def test_backoff_is_exponential_capped_jittered_and_honours_retry_after() -> None:
    policy = DownloadConfig(backoff_base_s=1.0, backoff_max_s=5.0, jitter=0.0, max_retry_after_s=30.0).retry_policy
    assert [policy.backoff_delay(a) for a in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    assert policy.backoff_delay(1, retry_after=12.0) == 12.0
    assert policy.backoff_delay(1, retry_after=3600.0) == 30.0
    jittered = replace(policy, jitter=0.5)
    rng = random.Random(0)
    delays = [jittered.backoff_delay(3, rng=rng) for _ in range(200)]
    assert 2.0 <= min(delays) < max(delays) <= 4.0


def test_no_model_module_imports_curation() -> None:
    # The VLM client takes its policy from the foundation, not from the download stage above it.
    import ast
    from pathlib import Path

    import cladebench.models

    for path in Path(cladebench.models.__path__[0]).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.startswith("cladebench.curate")], f"{path} imports curate"


def test_deadline_check() -> None:
    policy = RetryPolicy(deadline_s=10.0)
    assert policy.time_left(4.0) == 6.0
    assert policy.time_left(12.0) == 0.0
    assert not policy.would_pass_deadline(spent=4.0, delay=5.9)
    assert policy.would_pass_deadline(spent=4.0, delay=6.0)
    unlimited = RetryPolicy()
    assert unlimited.time_left(1e9) is None
    assert not unlimited.would_pass_deadline(spent=1e9, delay=1e9)


@pytest.mark.parametrize(("fields", "message"), [
    ({"max_attempts": 0}, "max_attempts must be at least 1, got 0"),
    ({"jitter": 1.5}, "jitter is a fraction in [0, 1], got 1.5"),
    ({"max_retry_after_s": -1.0}, "max_retry_after_s must be at least 0, got -1.0"),
    ({"deadline_s": 0.0}, "deadline_s must be positive (seconds), got 0.0"),
])
def test_policy_refuses_bad_fields(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(CladebenchError) as raised:
        RetryPolicy(**fields)
    assert str(raised.value) == message
