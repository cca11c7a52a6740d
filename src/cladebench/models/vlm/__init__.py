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
- No logprobs in the response (the field missing or null, or no ``top_logprobs``): the outcome is
  ``no_logprobs`` with ``score=None``, and the response is never cached (a rerun asks again). When no answer
  of a batch has logprobs, the endpoint cannot score at all: :class:`LogprobsUnsupportedError` naming the
  endpoint and model is raised. The server must return logprobs (vLLM does; some proxies and gateways strip
  them).
- The probabilities of the first token's distinct alternatives summing over 1 (beyond rounding,
  ``SUM_TOLERANCE``): the answer is no distribution, so it is an ``invalid_response``, never cached.
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
any other 4xx or 3xx is not retried and raises :class:`EndpointError` with the start of the response body (and,
for a redirect, where it points). When no attempt got an HTTP answer at all (refused or lost connections,
timeouts), the error is :class:`EndpointUnreachableError`: a remote out of reach, exit 5.
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

The package presents its public API here on purpose (``from cladebench.models.vlm import VLMClient``); its
modules, one job each, import each other directly: :mod:`.config` (how to ask), :mod:`.errors`,
:mod:`.answers` (Yes/No scores and chat text from a response), :mod:`.images` (what is sent),
:mod:`.cache` (answers on disk) and :mod:`.client` (the transport and the entry points). The endpoint's
name is parsed in :mod:`cladebench.models.endpoint`.

Example:
    >>> normalise_token(" YES"), normalise_token("\\u2581No")
    ('yes', 'no')
"""

from __future__ import annotations

from cladebench.models.vlm.answers import (
    NO_FORMS,
    OUTCOMES,
    YES_FORMS,
    ChatResult,
    YesNoItem,
    YesNoResult,
    chat_from_response,
    normalise_token,
    yes_no_from_response,
)
from cladebench.models.vlm.cache import ResponseCache, request_key
from cladebench.models.vlm.client import (
    VLMClient,
    chat,
    chat_async,
    gather_or_cancel,
    score_yes_no,
    score_yes_no_async,
)
from cladebench.models.vlm.config import DEFAULT_PROMPT_TEMPLATE, VLMConfig
from cladebench.models.vlm.errors import (
    EndpointError,
    EndpointUnreachableError,
    InvalidResponseError,
    LogprobsUnsupportedError,
)
from cladebench.models.vlm.images import ACCEPTED_IMAGE_TYPES, PreparedImage, prepare_image

__all__ = [
    "ACCEPTED_IMAGE_TYPES",
    "DEFAULT_PROMPT_TEMPLATE",
    "NO_FORMS",
    "OUTCOMES",
    "YES_FORMS",
    "ChatResult",
    "EndpointError",
    "EndpointUnreachableError",
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
    "gather_or_cancel",
    "normalise_token",
    "prepare_image",
    "request_key",
    "score_yes_no",
    "score_yes_no_async",
    "yes_no_from_response",
]
