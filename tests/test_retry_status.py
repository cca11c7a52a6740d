"""Which HTTP statuses are retried is decided in one place (``cladebench.retry.retryable_status``), for downloads
and the VLM client alike."""

from __future__ import annotations

import cladebench.curate.fetch.core as fetch_core
import cladebench.models.vlm.client as vlm_client
from cladebench.retry import retryable_status


def test_408_429_and_every_5xx_are_retried_and_no_other_status() -> None:
    retried = [status for status in range(100, 600) if retryable_status(status)]
    assert retried == [408, 429, *range(500, 600)]


def test_downloads_and_the_vlm_client_ask_the_same_predicate() -> None:
    assert fetch_core.retryable_status is retryable_status
    assert vlm_client.retryable_status is retryable_status
    for module in (fetch_core, vlm_client):
        assert not hasattr(module, "RETRYABLE_STATUSES"), f"{module.__name__} still reads the status set itself"
