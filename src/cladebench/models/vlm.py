"""Ask a vision-language model behind an OpenAI-compatible chat endpoint (vLLM, OpenAI) about images.

Generative VLMs are not encoders: they are served, usually by vLLM on a GPU box, and asked questions over
HTTP. Two questions are asked here:

- **Yes/No scoring** (INQUIRE-style rerank): "Does this picture show {query}? Answer Yes or No." with
  ``max_tokens=1``, ``temperature=0``, ``logprobs=true`` and ``top_logprobs=N``. The score is
  ``P(Yes) / (P(Yes) + P(No))`` from the top log-probabilities of the *first* generated token, so a
  candidate list can be ranked by it (a bare "Yes"/"No" answer would give ties everywhere).
- **Free chat** (:meth:`VLMClient.chat`), optionally in JSON mode, for prompts that want text back
  (lineage completion). It shares the transport, retries and cache.

Scoring rules, exactly:

- A token counts as Yes (No) when ``normalise_token(token) == "yes"`` (``"no"``). :func:`normalise_token`
  strips whitespace, then a leading tokenizer word-boundary marker (SentencePiece ``\\u2581``, byte-level BPE
  ``\\u0120``; some servers return raw vocabulary strings), then whitespace again, and casefolds. So
  ``"Yes"``, ``" Yes"``, ``"yes"``, ``"YES"`` and ``"\\u2581Yes"`` are all Yes; ``"Yes."`` and ``"Yeah"`` are not.
- Every matching entry of ``top_logprobs`` adds its probability (they are distinct tokens of the
  vocabulary); the generated token itself is added when the server left it out of ``top_logprobs``.
  Sums are done in log space (log-sum-exp), so tiny probabilities do not underflow to 0/0.
- A side with no entry contributes 0: with Yes among the top tokens and No not, the score is 1.0.
  Nothing is imputed for the mass below the top-N cut.
- Neither Yes nor No among the top tokens: the outcome is ``no_yes_no`` with ``score=None`` and a reason
  that names the tokens seen; never a silent 0.5, which would rank the item mid-list as if the model
  were unsure.
- No logprobs at all in the response (the field missing or null, or no ``top_logprobs``): a
  :class:`LogprobsUnsupportedError` naming the endpoint and model. The server must return logprobs
  (vLLM does; some proxies and gateways strip them). Such a response is never cached.
- A logprob that is not a number, NaN, +Infinity or above 0 (a probability above 1), in any entry of
  ``top_logprobs`` or the generated token: the outcome is ``invalid_response`` with ``score=None`` and a
  reason naming the value. ``-Infinity`` is a probability of 0 and is accepted. Such an answer is never
  cached (a rerun asks again), and one in the cache from an earlier version is asked again too, so a bad
  answer cannot poison later runs.
- An image that does not decode: the outcome is ``bad_image`` with the decoder's reason, and no request
  is sent (the server would answer 400 and stop the whole batch).

Images go in as bytes. They are sent as they are when the server will see the same upright RGB picture
that every other consumer gets from :func:`cladebench.images.decode_image`: a PNG, JPEG, WebP or GIF
(the formats the OpenAI API accepts), with no EXIF rotation to apply, no transparency, not animated,
and no longer side than ``max_image_side``. Anything else is re-encoded as JPEG from ``decode_image``'s
output (rotated upright, alpha flattened on white, downscaled with Lanczos when too large): servers
differ on EXIF and alpha, and a sideways camera-trap photo would be a different question.

Transport: one pooled async httpx client; a semaphore bounds requests in flight; connect and read
timeouts; timeouts, connection errors, 408, 429 and 5xx are retried with exponential backoff and jitter,
honouring ``Retry-After`` up to ``max_retry_after_s`` (:class:`cladebench.retry.RetryPolicy`, the
policy downloads follow, built by :attr:`VLMConfig.retry_policy`);
any other 4xx is not retried and raises :class:`EndpointError` with the start of the response body.
Each request has a deadline by the wall clock (``request_deadline_s``, its attempts and the waits between
them), because the read timeout restarts with every byte and a server that never answers would
otherwise cost ``max_attempts`` read timeouts; when it passes, or the next wait would pass it,
:class:`EndpointError` says so. A response body over ``max_response_bytes`` is not read further: it is
an ``invalid_response`` (Yes/No) or an :class:`InvalidResponseError` (chat), and never cached.

Credentials in the endpoint URL (``http://user:pass@host/v1``) are used for the request (HTTP basic
auth) and appear nowhere else: :attr:`~cladebench.models.endpoint.EndpointSpec.id`, error messages and the
cache key use the URL with them stripped (:func:`cladebench.provenance.redact_url`).

Cache: every usable response is kept as one small JSON file under ``cache_dir``, named by the SHA-256 of
the model name, the base URL, the request payload with the image replaced by a placeholder, the SHA-256
of the image bytes as given, and the image preparation options. A rerun is served from disk without a
request, and results say ``cached=True``. The API key is sent but never hashed or written anywhere.
Files are written to a temporary name and renamed, so a reader never sees half a file; a file that does
not parse is ignored and replaced by a fresh answer.

Example:
    >>> normalise_token(" YES"), normalise_token("\\u2581No")
    ('yes', 'no')
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import math
import os
import string
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cladebench.errors import CladebenchError
from cladebench.models.endpoint import EndpointSpec, parse_endpoint
from cladebench.retry import RETRYABLE_STATUSES, RetryPolicy, parse_retry_after

if TYPE_CHECKING:
    import httpx

DEFAULT_PROMPT_TEMPLATE = "Does this picture show {query}? Answer Yes or No."

YES_FORMS = frozenset({"yes"})
"""Normalised token strings that count as Yes (see :func:`normalise_token`)."""
NO_FORMS = frozenset({"no"})
"""Normalised token strings that count as No."""

# SentencePiece (U+2581) and byte-level BPE (U+0120) mark a word boundary at the start of a raw token.
_WORD_BOUNDARY_MARKERS = "\u2581\u0120"

OUTCOMES: dict[str, str] = {
    "scored": "Yes or No among the first token's top logprobs; score = P(Yes) / (P(Yes) + P(No))",
    "no_yes_no": "neither Yes nor No among the first token's top logprobs; score is None",
    "bad_image": "the image did not decode; no request was sent; score is None",
    "invalid_response": "the answer failed validation (a logprob NaN, +Infinity or above 0, or a body over "
                        "max_response_bytes); it was not cached; score is None",
}
"""Every outcome a :class:`YesNoResult` can have, with what it means."""

ACCEPTED_IMAGE_TYPES: dict[str, str] = {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp",
                                        "gif": "image/gif"}
"""Formats sent as they are (those the OpenAI API accepts) -> their MIME type."""

IMAGE_PLACEHOLDER = "<image>"
"""Stands in for the image's data URL in the payload that is hashed and cached."""

LOGPROB_TOLERANCE = 1e-4
"""Largest logprob accepted: 0 is probability 1, and servers may round a certain token a hair above it."""

_EXIF_ORIENTATION = 0x0112
_T = TypeVar("_T")
_PREPARATION_VERSION = 1  # bump when prepare_image changes what it sends, so old cache entries are not reused


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


# --- configuration -------------------------------------------------------------------------------


def _as_spec(spec: EndpointSpec | str) -> EndpointSpec:
    return spec if isinstance(spec, EndpointSpec) else parse_endpoint(spec)


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
    """Quality of images re-encoded as JPEG (see the module docstring for when that happens)."""
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
        fields = {name for _, name, _, _ in string.Formatter().parse(self.prompt_template) if name is not None}
        if fields != {"query"}:
            raise CladebenchError(f"prompt_template must contain {{query}} and no other field, got fields "
                                  f"{sorted(fields)} in {self.prompt_template!r}")

    @property
    def retry_policy(self) -> RetryPolicy:
        """The retry fields (``max_attempts``, the backoff, ``max_retry_after_s``, ``request_deadline_s``) as
        the :class:`~cladebench.retry.RetryPolicy` every request follows, the one downloads follow too."""
        return RetryPolicy(max_attempts=self.max_attempts, backoff_base_s=self.backoff_base_s,
                           backoff_max_s=self.backoff_max_s, jitter=self.jitter,
                           max_retry_after_s=self.max_retry_after_s, deadline_s=self.request_deadline_s)

    def resolved_api_key(self) -> str | None:
        return self.api_key or os.environ.get(self.api_key_env) or None

    def provenance(self) -> dict[str, Any]:
        """The settings that shape answers, for a results record (no key, no local paths)."""
        skip = {"api_key", "api_key_env", "cache_dir", "use_cache", "progress", "max_error_body_chars"}
        return {name: value for name, value in asdict(self).items() if name not in skip}


# --- tokens and scores ---------------------------------------------------------------------------


def normalise_token(token: str) -> str:
    """Whitespace and a leading word-boundary marker stripped, then casefolded: how Yes/No variants are matched."""
    return token.strip().lstrip(_WORD_BOUNDARY_MARKERS).strip().casefold()


def _logsumexp(values: list[float]) -> float:
    if not values:
        return -math.inf
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values))


def _share(log_yes: float, log_no: float) -> float:
    """``exp(log_yes) / (exp(log_yes) + exp(log_no))`` without overflow or 0/0 (one side may be -inf)."""
    difference = log_no - log_yes
    if difference >= 0:
        odds = math.exp(-difference)
        return odds / (1.0 + odds)
    return 1.0 / (1.0 + math.exp(difference))


@dataclass(frozen=True)
class YesNoItem:
    """One image and the question to ask about it."""

    key: str
    """Caller's id for the item (a candidate uuid); copied to the result."""
    image: bytes
    """Encoded image bytes (JPEG, PNG, WebP, GIF, or anything Pillow decodes)."""
    query: str
    """Text put into the prompt template's ``{query}``."""


@dataclass(frozen=True)
class YesNoResult:
    """The answer for one item."""

    key: str
    outcome: str
    """One of :data:`OUTCOMES`."""
    score: float | None
    """``P(Yes) / (P(Yes) + P(No))`` in [0, 1] when ``outcome == "scored"``, else ``None``."""
    p_yes: float
    """Summed probability of the Yes variants among the top tokens (0 when none)."""
    p_no: float
    """Summed probability of the No variants among the top tokens (0 when none)."""
    token: str | None
    """The first token the model generated, as the server spelled it."""
    reason: str | None
    """Why there is no score, for a person; ``None`` when scored."""
    cached: bool
    """Served from the on-disk cache without a request."""
    request_key: str | None
    """SHA-256 naming the request (its cache file); ``None`` when no request was made."""


@dataclass(frozen=True)
class ChatResult:
    """The answer to one :meth:`VLMClient.chat` call."""

    text: str
    """The message content the model returned."""
    data: Any
    """``text`` parsed as JSON in JSON mode (``None`` when not JSON mode or when it did not parse)."""
    json_error: str | None
    """Why ``text`` did not parse as JSON in JSON mode; ``None`` otherwise."""
    finish_reason: str | None
    """``stop``, ``length`` (cut by ``max_tokens``), ... as the server reported it."""
    cached: bool
    request_key: str


def _describe_logprobs(value: object) -> str:
    if isinstance(value, Mapping):
        return f"an object with keys {sorted(value)}"
    return "null" if value is None else type(value).__name__


def _first_token(response: Mapping[str, Any], spec: EndpointSpec) -> Mapping[str, Any]:
    """The first generated token's logprob entry, or a clear error when the server sent none."""
    choice = _first_choice(response, spec)
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    first = content[0] if isinstance(content, list) and content else None
    top = first.get("top_logprobs") if isinstance(first, Mapping) else None
    if not isinstance(top, list) or not top:
        found = (f"choices[0].logprobs was {_describe_logprobs(logprobs)}" if not isinstance(first, Mapping)
                 else "its top_logprobs were missing or empty")
        raise LogprobsUnsupportedError(
            f"endpoint {spec.display_url} (model {spec.name!r}) returned no logprobs for the first generated token "
            f"({found}). Yes/No scoring needs a server that returns logprobs with "
            "top_logprobs for chat completions: vLLM does; some proxies and gateways strip them.")
    return first


def _bad_logprob(value: object) -> str | None:
    """Why ``value`` is not a usable logprob (a number, not NaN, at most 0; -inf is probability 0), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"a logprob that is not a number ({value!r})"
    if math.isnan(value):
        return "a NaN logprob"
    if value > LOGPROB_TOLERANCE:
        return f"a logprob above 0 ({value!r}: a probability above 1)"
    return None


def _checked_first_token(response: Mapping[str, Any], spec: EndpointSpec) -> Mapping[str, Any]:
    """:func:`_first_token`, and every logprob in it usable; :class:`InvalidResponseError` otherwise.

    Run before an answer is cached and when one is read from the cache, so an impossible answer is
    neither kept nor reused.
    """
    first = _first_token(response, spec)
    entries = [("the generated token", first)] if "logprob" in first else []
    entries += [(f"top_logprobs[{i}]", e) for i, e in enumerate(first["top_logprobs"])]
    for where, entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("token"), str):
            raise InvalidResponseError(f"endpoint {spec.display_url} (model {spec.name!r}) answered with "
                                       f"{where} without a token string: {json.dumps(entry, default=str)[:200]}")
        problem = _bad_logprob(entry.get("logprob"))
        if problem is not None:
            raise InvalidResponseError(f"endpoint {spec.display_url} (model {spec.name!r}) answered with {problem} "
                                       f"for {where} {entry['token']!r}; the answer was not cached")
    return first


def _first_choice(response: Mapping[str, Any], spec: EndpointSpec) -> Mapping[str, Any]:
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise EndpointError(f"endpoint {spec.display_url} (model {spec.name!r}) answered without choices: "
                            f"{json.dumps(response)[:300]}")
    return choices[0]


def _token_logprobs(first: Mapping[str, Any]) -> list[tuple[str, float]]:
    """(token, logprob) of every top alternative, plus the generated token when the server left it out."""
    entries = [(e["token"], float(e["logprob"])) for e in first["top_logprobs"]
               if isinstance(e, Mapping) and isinstance(e.get("token"), str)
               and isinstance(e.get("logprob"), (int, float))]
    chosen, chosen_logprob = first.get("token"), first.get("logprob")
    if isinstance(chosen, str) and isinstance(chosen_logprob, (int, float)) and all(t != chosen for t, _ in entries):
        entries.append((chosen, float(chosen_logprob)))
    return [(token, min(logprob, 0.0)) for token, logprob in entries if not math.isnan(logprob)]


def yes_no_from_response(response: Mapping[str, Any], spec: EndpointSpec, key: str = "", *,
                         cached: bool = False, request_key: str | None = None) -> YesNoResult:
    """Score one chat-completions response by the rules in the module docstring."""
    first = _first_token(response, spec)
    token = first.get("token") if isinstance(first.get("token"), str) else None
    entries = _token_logprobs(first)
    log_yes = _logsumexp([lp for t, lp in entries if normalise_token(t) in YES_FORMS])
    log_no = _logsumexp([lp for t, lp in entries if normalise_token(t) in NO_FORMS])
    p_yes, p_no = math.exp(log_yes), math.exp(log_no)
    if log_yes == log_no == -math.inf:
        seen = ", ".join(repr(t) for t, _ in entries[:8]) + (", ..." if len(entries) > 8 else "")
        reason = (f"neither Yes nor No (with probability above 0) among the {len(entries)} top tokens of the first "
                  f"generated token {token!r}: {seen}")
        return YesNoResult(key, "no_yes_no", None, p_yes, p_no, token, reason, cached, request_key)
    return YesNoResult(key, "scored", _share(log_yes, log_no), p_yes, p_no, token, None, cached, request_key)


def chat_from_response(response: Mapping[str, Any], spec: EndpointSpec, *, json_mode: bool, cached: bool = False,
                       request_key: str = "") -> ChatResult:
    """The text (and, in JSON mode, the parsed JSON) of one chat-completions response."""
    choice = _first_choice(response, spec)
    message = choice.get("message")
    text = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(text, str):
        raise EndpointError(f"endpoint {spec.display_url} (model {spec.name!r}) answered without message text: "
                            f"{json.dumps(choice)[:300]}")
    data, json_error = None, None
    if json_mode:
        try:
            data = json.loads(text)
        except ValueError as exc:
            json_error = f"not JSON: {exc}"
    finish_reason = choice.get("finish_reason")
    return ChatResult(text, data, json_error, finish_reason if isinstance(finish_reason, str) else None, cached,
                      request_key)


# --- images --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedImage:
    """Bytes as they go over the wire."""

    data: bytes
    mime_type: str
    reencoded_because: str | None
    """Why the image was re-encoded as JPEG; ``None`` when sent as given."""

    def data_url(self) -> str:
        return f"data:{self.mime_type};base64,{base64.b64encode(self.data).decode('ascii')}"


def _reencode_reason(data: bytes, image_format: str | None, max_side: int | None) -> str | None:
    """Why the server would not see what ``decode_image`` sees if the bytes went as they are; ``None`` if it would."""
    from cladebench.images import open_image

    if image_format not in ACCEPTED_IMAGE_TYPES:
        return f"format {image_format or 'unknown'} is not one the API accepts"
    with open_image(data) as raw:
        if raw.getexif().get(_EXIF_ORIENTATION, 1) not in (0, 1):
            return "EXIF orientation to apply"
        if raw.mode in ("RGBA", "LA", "PA") or "transparency" in raw.info:
            return "transparency to flatten"
        if getattr(raw, "is_animated", False):
            return "animated"
        if max_side is not None and max(raw.size) > max_side:
            return f"longer side {max(raw.size)} px exceeds {max_side} px"
    return None


def prepare_image(data: bytes, max_side: int | None = None, jpeg_quality: int = 90) -> PreparedImage:
    """Check that ``data`` decodes and decide what to send (see the module docstring).

    Raises :class:`cladebench.images.ImageDecodeError` when it does not decode.
    """
    from PIL import Image

    from cladebench.images import decode_image, sniff_format

    image = decode_image(data)  # a full decode: a corrupt file is caught here, not by the server
    image_format = sniff_format(data)
    reason = _reencode_reason(data, image_format, max_side)
    if reason is None:
        return PreparedImage(data, ACCEPTED_IMAGE_TYPES[image_format], None)  # type: ignore[index]
    if max_side is not None and max(image.size) > max_side:
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=jpeg_quality)
    return PreparedImage(buffer.getvalue(), "image/jpeg", reason)


# --- the cache -----------------------------------------------------------------------------------


class ResponseCache:
    """One JSON file per request key: ``<root>/<key[:2]>/<key>.json`` holding the response body."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored response, or ``None`` when absent or unreadable (a damaged file only costs a refetch)."""
        try:
            entry = json.loads(self.path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("response"), dict):
            return None
        return entry["response"]

    def put(self, key: str, request: Mapping[str, Any], response: Mapping[str, Any]) -> None:
        """Store a response (with the image-free request, for a person reading the file); temp file + rename."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"key": key, "request": request, "response": response}, ensure_ascii=False)
        descriptor, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(body)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def request_key(spec: EndpointSpec, payload: Mapping[str, Any], image_sha256: str | None,
                config: VLMConfig) -> str:
    """SHA-256 naming a request: endpoint, image-free payload, image digest and preparation; never the API key."""
    identity = {
        "model": spec.name,
        "base_url": spec.display_url,  # credentials are neither hashed nor kept, like the API key
        "payload": payload,
        "image_sha256": image_sha256,
        "image_preparation": None if image_sha256 is None else {
            "version": _PREPARATION_VERSION, "max_side": config.max_image_side, "jpeg_quality": config.jpeg_quality,
        },
    }
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# --- the client ----------------------------------------------------------------------------------


def _payload(spec: EndpointSpec, text: str, image_url: str | None, params: Mapping[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if image_url is not None:
        content.append({"type": "image_url", "image_url": {"url": image_url}})
    content.append({"type": "text", "text": text})
    return {"model": spec.name, "messages": [{"role": "user", "content": content}], **params}


def _retryable_transport_errors() -> tuple[type[Exception], ...]:
    """Transport failures worth another attempt (as in :mod:`cladebench.curate.fetch`): timeouts, lost connections."""
    import httpx

    return (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


def _response_text(body: bytes, limit: int, *, cut: bool = False) -> str:
    """The start of a response body for a message: ``limit`` characters, and how long it was."""
    text = body.decode("utf-8", errors="replace").strip()
    if len(text) <= limit and not cut:
        return text
    return text[:limit] + f"... ({'more than ' if cut else ''}{len(text)} characters)"


@dataclass(frozen=True)
class _Answer:
    """One HTTP answer as read: at most ``max_response_bytes`` of its body."""

    status: int
    reason_phrase: str
    retry_after: str | None
    body: bytes
    cut: bool
    """The body was longer than the cap and was not read to its end."""


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """The body up to ``limit`` bytes, and whether there was more (refused before it is all in memory)."""
    declared = response.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        return b"", True
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            chunks.append(chunk[: max(0, limit - (size - len(chunk)))])
            return b"".join(chunks), True
        chunks.append(chunk)
    return b"".join(chunks), False


Validator = Callable[[dict[str, Any]], object]


class VLMClient:
    """Asks one endpoint, over one pooled connection, with retries and the response cache.

    Use as ``async with VLMClient(spec, config) as vlm: ...``. ``client`` replaces the httpx client built
    from ``config`` (the caller then owns it).
    """

    def __init__(self, spec: EndpointSpec | str, config: VLMConfig | None = None, *,
                 client: httpx.AsyncClient | None = None) -> None:
        from cladebench.cache import cache_dir

        self.spec = _as_spec(spec)
        self.config = config or VLMConfig()
        root = self.config.cache_dir
        self.cache = (ResponseCache(Path(root) if root is not None else cache_dir("vlm"))
                      if self.config.use_cache else None)
        self._client = client
        self._owns_client = client is None
        self._semaphore = asyncio.Semaphore(self.config.concurrency)
        # Twice the requests in flight: the next images are decoded while the current requests run.
        self._preparing = asyncio.Semaphore(2 * self.config.concurrency)
        self._retryable = _retryable_transport_errors()

    async def __aenter__(self) -> VLMClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            config = self.config
            timeout = httpx.Timeout(connect=config.connect_timeout_s, read=config.read_timeout_s,
                                    write=config.read_timeout_s, pool=None)
            limits = httpx.Limits(max_connections=config.concurrency, max_keepalive_connections=config.concurrency)
            self._client = httpx.AsyncClient(timeout=timeout, limits=limits)
        return self._client

    def _headers(self) -> dict[str, str]:
        key = self.config.resolved_api_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _body_text(self, body: bytes, *, cut: bool = False) -> str:
        """The start of a response body for an error message, without the credentials this client sends: some
        servers echo the request (its key, its URL) in their errors, and the message reaches the console."""
        from cladebench.provenance import redact_text, url_secrets

        text = redact_text(_response_text(body, self.config.max_error_body_chars, cut=cut))
        key = self.config.resolved_api_key()
        for secret in sorted({*url_secrets(self.spec.base_url), *([key] if key else [])}, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text

    # --- asking ---

    async def score_yes_no(self, item: YesNoItem) -> YesNoResult:
        """P(Yes) for one item (see the module docstring for the rules and outcomes)."""
        from cladebench.images import ImageDecodeError

        config = self.config
        params = {"max_tokens": config.max_tokens, "temperature": config.temperature, "logprobs": True,
                  "top_logprobs": config.top_logprobs}
        text = config.prompt_template.format(query=item.query)
        try:
            response, cached, key = await self._complete(text, item.image, params,
                                                         lambda r: _checked_first_token(r, self.spec))
        except ImageDecodeError as exc:
            return YesNoResult(item.key, "bad_image", None, 0.0, 0.0, None, exc.reason, False, None)
        except InvalidResponseError as exc:
            return YesNoResult(item.key, "invalid_response", None, 0.0, 0.0, None, exc.reason, False,
                               exc.request_key)
        return yes_no_from_response(response, self.spec, item.key, cached=cached, request_key=key)

    async def score_many(self, items: Iterable[YesNoItem | tuple[str, bytes, str]]) -> list[YesNoResult]:
        """:meth:`score_yes_no` for every item, concurrently, in the order given.

        The first error (a 4xx, retries exhausted or the deadline passed, no logprobs) cancels the rest and
        is raised; every answer that arrived before it is already cached, so a rerun resumes where this one
        stopped. An unusable answer (``invalid_response``) is an outcome, not an error: the rest go on.
        """
        wanted = [i if isinstance(i, YesNoItem) else YesNoItem(*i) for i in items]
        from tqdm import tqdm

        with tqdm(total=len(wanted), desc="asking", unit="item", disable=not self.config.progress,
                  leave=False) as bar:

            async def one(item: YesNoItem) -> YesNoResult:
                result = await self.score_yes_no(item)
                bar.update(1)
                return result

            return await _gather_or_cancel([one(i) for i in wanted])

    async def chat(self, prompt: str, image: bytes | None = None, *, json_mode: bool = False,
                   max_tokens: int | None = None) -> ChatResult:
        """The model's text answer to ``prompt`` (with an image, if given); JSON mode asks for a JSON object.

        An image that does not decode raises :class:`cladebench.images.ImageDecodeError`; an answer over
        ``max_response_bytes`` raises :class:`InvalidResponseError` (and is not cached).
        """
        params: dict[str, Any] = {"max_tokens": max_tokens or self.config.chat_max_tokens,
                                  "temperature": self.config.temperature}
        if json_mode:
            params["response_format"] = {"type": "json_object"}
        response, cached, key = await self._complete(
            prompt, image, params, lambda r: chat_from_response(r, self.spec, json_mode=json_mode))
        return chat_from_response(response, self.spec, json_mode=json_mode, cached=cached, request_key=key)

    async def _complete(self, text: str, image: bytes | None, params: Mapping[str, Any],
                        validate: Validator) -> tuple[dict[str, Any], bool, str]:
        """(response body, whether it came from the cache, request key); ``validate`` raises on an unusable body."""
        image_sha256 = hashlib.sha256(image).hexdigest() if image is not None else None
        keyed = _payload(self.spec, text, IMAGE_PLACEHOLDER if image is not None else None, params)
        key = request_key(self.spec, keyed, image_sha256, self.config)
        if self.cache is not None:
            stored = self.cache.get(key)
            if stored is not None:
                try:
                    validate(stored)
                    return stored, True, key
                except EndpointError:
                    pass  # written by a looser version, or damaged: ask again
        # Prepared images wait here in bounded number: a batch of 25,000 photos must not be base64-encoded
        # into memory at once while the requests trickle out concurrency at a time.
        async with self._preparing:
            image_url = None
            if image is not None:
                prepared = await asyncio.to_thread(prepare_image, image, self.config.max_image_side,
                                                   self.config.jpeg_quality)
                image_url = prepared.data_url()
            try:
                response = await self._post(_payload(self.spec, text, image_url, params))
                validate(response)  # an unusable answer is raised, never cached
            except InvalidResponseError as exc:
                exc.request_key = key
                raise
        if self.cache is not None:
            self.cache.put(key, keyed, response)
        return response, False, key

    async def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        """POST with retries, within the request deadline; the parsed JSON body of the 200 answer."""
        import httpx

        policy, url = self.config.retry_policy, self.spec.chat_url
        deadline = policy.deadline_s
        where = f"endpoint {self.spec.display_url} (model {self.spec.name!r})"
        shown = f"{self.spec.display_url}/chat/completions"
        attempt, spent = 0, 0.0  # spent: seconds in attempts and waits, not queued for the semaphore
        while True:
            attempt += 1
            retry_after: float | None = None
            try:
                async with self._semaphore:
                    started = time.monotonic()
                    try:
                        answer = await asyncio.wait_for(self._send(url, payload), policy.time_left(spent))
                    finally:
                        spent += time.monotonic() - started
            except asyncio.TimeoutError:
                raise EndpointError(f"{where}: POST {shown} gave up after {attempt} attempts in {spent:.1f} s: "
                                    f"no complete answer within the request deadline of {deadline} s "
                                    "(VLMConfig.request_deadline_s)") from None
            except self._retryable as exc:
                last = f"{type(exc).__name__}: {exc}".rstrip(": ")
            except httpx.HTTPError as exc:
                raise EndpointError(f"{where}: POST {shown} failed: {type(exc).__name__}: {exc}") from None
            else:
                if answer.status == 200:
                    return self._json_body(answer, where)
                body = self._body_text(answer.body, cut=answer.cut)
                last = f"HTTP {answer.status} {answer.reason_phrase}: {body}"
                if answer.status not in RETRYABLE_STATUSES and answer.status < 500:
                    raise EndpointError(f"{where}: POST {shown} answered {last}")
                retry_after = parse_retry_after(answer.retry_after)
            if attempt >= policy.max_attempts:
                raise EndpointError(f"{where}: POST {shown} gave up after {attempt} attempts; last: {last}")
            delay = policy.backoff_delay(attempt, retry_after)
            if policy.would_pass_deadline(spent, delay):
                raise EndpointError(f"{where}: POST {shown} gave up after {attempt} attempts in {spent:.1f} s: "
                                    f"waiting {delay:.1f} s for another would pass the request deadline of "
                                    f"{deadline} s (VLMConfig.request_deadline_s); last: {last}")
            # Sleep outside the semaphore: a waiting request must not hold a slot another could use.
            await asyncio.sleep(delay)
            spent += delay

    async def _send(self, url: str, payload: dict[str, Any]) -> _Answer:
        """One POST, its body read up to ``max_response_bytes`` (the rest is not read)."""
        async with self._http().stream("POST", url, json=payload, headers=self._headers()) as response:
            body, cut = await _read_capped(response, self.config.max_response_bytes)
            return _Answer(response.status_code, response.reason_phrase, response.headers.get("retry-after"),
                           body, cut)

    def _json_body(self, answer: _Answer, where: str) -> dict[str, Any]:
        if answer.cut:
            raise InvalidResponseError(f"{where} answered with a body over max_response_bytes="
                                       f"{self.config.max_response_bytes} bytes; it was not read further nor cached")
        try:
            body = json.loads(answer.body)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise EndpointError(f"{where} answered 200 with a body that is not a JSON object: "
                                f"{self._body_text(answer.body)}")
        return body


async def _gather_or_cancel(coroutines: list[Coroutine[Any, Any, _T]]) -> list[_T]:
    """``asyncio.gather`` that cancels the other tasks when one fails, so none runs on after the error."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


# --- the entry points ----------------------------------------------------------------------------


async def score_yes_no_async(items: Iterable[YesNoItem | tuple[str, bytes, str]], spec: EndpointSpec | str,
                             config: VLMConfig | None = None, *,
                             client: httpx.AsyncClient | None = None) -> list[YesNoResult]:
    """Score every ``(key, image bytes, query)`` item against one endpoint; results in the order given."""
    async with VLMClient(spec, config, client=client) as vlm:
        return await vlm.score_many(items)


def score_yes_no(items: Iterable[YesNoItem | tuple[str, bytes, str]], spec: EndpointSpec | str,
                 config: VLMConfig | None = None) -> list[YesNoResult]:
    """Blocking :func:`score_yes_no_async`, for callers without an event loop of their own."""
    return _run_blocking(score_yes_no_async(items, spec, config), "score_yes_no")


async def chat_async(prompt: str, image: bytes | None, spec: EndpointSpec | str, config: VLMConfig | None = None,
                     *, json_mode: bool = False, max_tokens: int | None = None) -> ChatResult:
    """One :meth:`VLMClient.chat` call on a client of its own."""
    async with VLMClient(spec, config) as vlm:
        return await vlm.chat(prompt, image, json_mode=json_mode, max_tokens=max_tokens)


def chat(prompt: str, image: bytes | None, spec: EndpointSpec | str, config: VLMConfig | None = None, *,
         json_mode: bool = False, max_tokens: int | None = None) -> ChatResult:
    """Blocking :func:`chat_async`; for many prompts, use :class:`VLMClient` and ``asyncio.gather``."""
    return _run_blocking(chat_async(prompt, image, spec, config, json_mode=json_mode, max_tokens=max_tokens),
                         "chat")


def _run_blocking(coroutine: Coroutine[Any, Any, _T], name: str) -> _T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()
    raise CladebenchError(f"{name}() was called inside a running event loop; await {name}_async(...) instead")


__all__ = [
    "ACCEPTED_IMAGE_TYPES",
    "DEFAULT_PROMPT_TEMPLATE",
    "NO_FORMS",
    "OUTCOMES",
    "YES_FORMS",
    "ChatResult",
    "EndpointError",
    "InvalidResponseError",
    "LogprobsUnsupportedError",
    "PreparedImage",
    "ResponseCache",
    "VLMClient",
    "VLMConfig",
    "YesNoItem",
    "YesNoResult",
    "chat",
    "chat_async",
    "chat_from_response",
    "normalise_token",
    "prepare_image",
    "request_key",
    "score_yes_no",
    "score_yes_no_async",
    "yes_no_from_response",
]
