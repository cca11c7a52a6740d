"""The errors an endpoint can cause: one refused answer, a missing feature, or an endpoint that failed."""

from __future__ import annotations

from cladebench.errors import CladebenchError


class EndpointError(CladebenchError):
    """An endpoint that failed to answer usefully: a non-retryable status, retries exhausted, or a bad body."""


class LogprobsUnsupportedError(EndpointError):
    """An endpoint that answered without the logprobs Yes/No scoring needs."""


class InvalidResponseError(EndpointError):
    """One answer that cannot be used (impossible logprobs, a body over the size cap): never cached. Yes/No
    scoring records it as the outcome ``invalid_response``; the batch goes on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.request_key: str | None = None
