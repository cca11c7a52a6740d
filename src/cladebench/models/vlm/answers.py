"""What an answer means: Yes/No scores from the first token's logprobs, and chat text; the result types.

The scoring rules are in the package docstring (:mod:`cladebench.models.vlm`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cladebench.models.endpoint import EndpointSpec
from cladebench.models.vlm.errors import EndpointError, InvalidResponseError, LogprobsUnsupportedError

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
    "invalid_response": "the answer failed validation (a logprob NaN, +Infinity or above 0, top probabilities "
                        "summing over 1, or a body over max_response_bytes); it was not cached; score is None",
    "no_logprobs": "the answer came without logprobs for the first token; it was not cached; score is None",
}
"""Every outcome a :class:`YesNoResult` can have, with what it means."""

LOGPROB_TOLERANCE = 1e-4
"""Largest logprob accepted: 0 is probability 1, and servers may round a certain token a hair above it."""

SUM_TOLERANCE = 1e-3
"""How far above 1 the probabilities of the first token's distinct alternatives may sum: servers round each
logprob, and a sum above that is no distribution (a P(Yes) of 1.98 is not a probability)."""



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
    data: object
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


def _first_token(response: Mapping[str, object], spec: EndpointSpec) -> Mapping[str, Any]:
    """The first generated token's logprob entry, or a clear error when the server sent none."""
    choice = _first_choice(response, spec)
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    first = content[0] if isinstance(content, list) and content else None
    top = first.get("top_logprobs") if isinstance(first, Mapping) else None
    if not isinstance(first, Mapping) or not isinstance(top, list) or not top:
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


def checked_first_token(response: Mapping[str, object], spec: EndpointSpec) -> Mapping[str, object]:
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
    tokens = _token_logprobs(first)  # distinct tokens of the vocabulary: their probabilities sum to at most 1
    total = math.exp(_logsumexp([logprob for _, logprob in tokens]))
    if total > 1.0 + SUM_TOLERANCE:
        p_yes = math.exp(_logsumexp([lp for t, lp in tokens if normalise_token(t) in YES_FORMS]))
        raise InvalidResponseError(f"endpoint {spec.display_url} (model {spec.name!r}) answered with top logprobs "
                                   f"whose probabilities sum to {total:.2f} (P(Yes) {p_yes:.2f}): not a probability "
                                   "distribution; the answer was not cached")
    return first


def _first_choice(response: Mapping[str, object], spec: EndpointSpec) -> Mapping[str, object]:
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


def yes_no_from_response(response: Mapping[str, object], spec: EndpointSpec, key: str = "", *,
                         cached: bool = False, request_key: str | None = None) -> YesNoResult:
    """Score one chat-completions response by the rules in :mod:`cladebench.models.vlm`."""
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


def chat_from_response(response: Mapping[str, object], spec: EndpointSpec, *, json_mode: bool, cached: bool = False,
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
