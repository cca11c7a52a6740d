"""The errors an endpoint can cause: one refused answer, a missing feature, or an endpoint that failed."""

from __future__ import annotations

from cladebench.errors import CladebenchError, RemoteUnavailableError


class EndpointError(CladebenchError):
    """An endpoint that failed to answer usefully: a non-retryable status, retries exhausted, or a bad body."""


class EndpointUnreachableError(EndpointError, RemoteUnavailableError):
    """An endpoint that never answered over HTTP (refused or lost connections, timeouts) until the retries or the
    deadline ran out: a remote out of reach (exit 5), not a bad answer."""

    exit_code = RemoteUnavailableError.exit_code


class InvalidResponseError(EndpointError):
    """One answer that cannot be used (impossible logprobs, a body over the size cap): never cached. Yes/No
    scoring records it as the outcome ``invalid_response``; the batch goes on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.request_key: str | None = None


class LogprobsUnsupportedError(InvalidResponseError):
    """An answer without the logprobs Yes/No scoring needs. One such answer among others is the outcome
    ``no_logprobs`` (some gateways drop them now and then); an endpoint that sends them for no answer at all is
    raised as this error, since it cannot score anything."""
