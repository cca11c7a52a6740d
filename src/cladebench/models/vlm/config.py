"""How to ask a VLM: transport, retry policy, sampling, image preparation, prompt and cache (:class:`VLMConfig`)."""

from __future__ import annotations

import string
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cladebench.environment import variable
from cladebench.errors import CladebenchError, UsageError
from cladebench.retry import RetryPolicy

DEFAULT_PROMPT_TEMPLATE = "Does this picture show {query}? Answer Yes or No."


def check_prompt_template(template: str, option: str) -> None:
    """A Yes/No question must hold ``{query}`` and no other field: without it every candidate of every query is
    asked the same question, and another field fails at the first request. A :class:`UsageError` naming
    ``option``, raised where a config is made, before any dataset is read or request sent."""
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:  # an unmatched brace
        raise UsageError(f"{option} {template!r} is not a template: {exc} (write {{{{ and }}}} for braces)") from None
    if fields != {"query"}:
        raise UsageError(f"{option} must contain {{query}} (where the query text goes) and no other field, got "
                         f"fields {sorted(fields)} in {template!r}")


@dataclass(frozen=True)
class VLMConfig:
    """How to ask: transport, retry policy, sampling, image preparation, prompt and cache."""

    concurrency: int = 8
    """Requests in flight at once (a semaphore, and the client's connection-pool size)."""
    connect_timeout_s: float = 10.0
    """Seconds to establish a connection before the attempt counts as timed out."""
    read_timeout_s: float = 30.0
    """Seconds to wait for the next bytes of the answer; a loaded vLLM server queues requests before it
    generates (a 7B VLM answers one Yes/No question in well under a second once it starts)."""
    request_deadline_s: float | None = 60.0
    """Seconds one request may take in all, by the wall clock: its attempts and the waits between them (not
    the time it queues behind ``concurrency`` other requests). The read timeout restarts with every byte, so
    without this a server that trickles, or never answers, costs ``max_attempts`` x ``read_timeout_s``.
    ``None``: no limit."""
    max_response_bytes: int = 2**20
    """Largest response body read (1 MiB); a bigger one is refused as ``invalid_response`` and never cached.
    A Yes/No answer with 20 top logprobs is a few KB, a 1024-token chat answer some tens of KB."""
    max_attempts: int = 5
    """Attempts per request, the first included; transient failures are retried until this many."""
    backoff_base_s: float = 1.0
    """Delay before the second attempt; doubled for each further attempt."""
    backoff_max_s: float = 60.0
    """Ceiling on the exponential delay."""
    jitter: float = 0.5
    """Fraction of each delay drawn at random (0 to 1), so many clients do not retry in lockstep."""
    max_retry_after_s: float = 30.0
    """Longest ``Retry-After`` honoured; a longer one is shortened to this (the request deadline still
    applies)."""
    temperature: float = 0.0
    """Sampling temperature; 0 makes answers (and so the cache) deterministic."""
    max_tokens: int = 1
    """Tokens generated for Yes/No scoring: only the first one is read."""
    top_logprobs: int = 20
    """Alternatives returned for the first token (OpenAI allows up to 20; vLLM up to its ``--max-logprobs``)."""
    chat_max_tokens: int = 1024
    """Default ``max_tokens`` for :meth:`VLMClient.chat`."""
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE
    """Yes/No question; ``{query}`` is replaced by the item's query text."""
    max_image_side: int | None = None
    """Longest image side sent, in pixels; larger images are downscaled (``None``: sent at full size)."""
    jpeg_quality: int = 90
    """Quality of images re-encoded as JPEG (see :mod:`cladebench.models.vlm` for when that happens)."""
    cache_dir: str | Path | None = None
    """Where responses are kept; ``None`` means ``cache_dir("vlm")`` under the cladebench cache root."""
    use_cache: bool = True
    """Read and write the response cache; off, every call goes to the server."""
    api_key: str | None = field(default=None, repr=False)
    """Bearer token; ``None`` reads the ``api_key_env`` variable. Sent only: never hashed, cached or recorded."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable that holds the key when ``api_key`` is not given (vLLM needs none by default)."""
    max_error_body_chars: int = 500
    """How much of an error response's body goes into the exception message."""
    progress: bool = False
    """Show a tqdm progress bar on stderr while scoring."""

    def __post_init__(self) -> None:
        checks = (
            (self.concurrency >= 1, f"concurrency must be at least 1, got {self.concurrency}"),
            (self.max_attempts >= 1, f"max_attempts must be at least 1, got {self.max_attempts}"),
            (0.0 <= self.jitter <= 1.0, f"jitter is a fraction in [0, 1], got {self.jitter}"),
            (self.max_tokens >= 1, f"max_tokens must be at least 1, got {self.max_tokens}"),
            (self.top_logprobs >= 1, f"top_logprobs must be at least 1 to score Yes/No, got {self.top_logprobs}"),
            (self.max_image_side is None or self.max_image_side >= 1,
             f"max_image_side must be positive or None, got {self.max_image_side}"),
            (1 <= self.jpeg_quality <= 95, f"jpeg_quality must be in [1, 95], got {self.jpeg_quality}"),
            (self.max_response_bytes >= 1, f"max_response_bytes must be positive, got {self.max_response_bytes}"),
            (self.max_retry_after_s >= 0, f"max_retry_after_s must be at least 0, got {self.max_retry_after_s}"),
            *((value is None or value > 0, f"{name} must be positive (seconds), got {value}")
              for name, value in (("connect_timeout_s", self.connect_timeout_s),
                                  ("read_timeout_s", self.read_timeout_s),
                                  ("request_deadline_s", self.request_deadline_s))),
        )
        for ok, message in checks:
            if not ok:
                raise CladebenchError(message)
        check_prompt_template(self.prompt_template, "prompt_template")

    @property
    def retry_policy(self) -> RetryPolicy:
        """The retry fields (``max_attempts``, the backoff, ``max_retry_after_s``, ``request_deadline_s``) as
        the :class:`~cladebench.retry.RetryPolicy` every request follows, the one downloads follow too."""
        return RetryPolicy(max_attempts=self.max_attempts, backoff_base_s=self.backoff_base_s,
                           backoff_max_s=self.backoff_max_s, jitter=self.jitter,
                           max_retry_after_s=self.max_retry_after_s, deadline_s=self.request_deadline_s)

    def resolved_api_key(self) -> str | None:
        return self.api_key or variable(self.api_key_env)

    def provenance(self) -> dict[str, object]:
        """The settings that shape answers, for a results record (no key, no local paths)."""
        skip = {"api_key", "api_key_env", "cache_dir", "use_cache", "progress", "max_error_body_chars"}
        return {name: value for name, value in asdict(self).items() if name not in skip}
