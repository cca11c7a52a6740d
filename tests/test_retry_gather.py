"""``retry.gather_or_cancel``: the one way a batch of endpoint requests is awaited (the VLM client's yes/no
scoring and the lineage task's questions): results in order, and one failure cancels the rest."""

from __future__ import annotations

import asyncio

import pytest

from cladebench.retry import gather_or_cancel


def test_results_come_in_the_order_asked() -> None:
    async def value(i: int) -> int:
        await asyncio.sleep(0)
        return i * i

    assert asyncio.run(gather_or_cancel([value(i) for i in range(5)])) == [0, 1, 4, 9, 16]


def test_one_failure_cancels_the_others_and_is_raised() -> None:
    cancelled: list[str] = []

    async def never_done(name: str) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise

    async def refused() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("HTTP 400")

    async def run() -> None:
        await gather_or_cancel([never_done("a"), refused(), never_done("b")])

    with pytest.raises(RuntimeError, match="HTTP 400"):
        asyncio.run(run())
    assert sorted(cancelled) == ["a", "b"]  # cancelled and awaited before the error came out
