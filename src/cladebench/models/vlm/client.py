"""The client: one pooled async httpx client, bounded concurrency, retries with a deadline, capped bodies; and
the blocking and async entry points that score or chat through it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from cladebench.errors import CladebenchError
from cladebench.models.endpoint import EndpointSpec, parse_endpoint
from cladebench.models.vlm.answers import (
    ChatResult,
    YesNoItem,
    YesNoResult,
    chat_from_response,
    checked_first_token,
    yes_no_from_response,
)
from cladebench.models.vlm.cache import IMAGE_PLACEHOLDER, ResponseCache, request_key
from cladebench.models.vlm.config import VLMConfig
from cladebench.models.vlm.errors import (
    EndpointError,
    EndpointUnreachableError,
    InvalidResponseError,
    LogprobsUnsupportedError,
)
from cladebench.models.vlm.images import prepare_image
from cladebench.retry import gather_or_cancel, parse_retry_after, retryable_status

if TYPE_CHECKING:
    import httpx

_T = TypeVar("_T")


def _as_spec(spec: EndpointSpec | str) -> EndpointSpec:
    return spec if isinstance(spec, EndpointSpec) else parse_endpoint(spec)




def _payload(spec: EndpointSpec, text: str, image_url: str | None, params: Mapping[str, object]) -> dict[str, object]:
    content: list[dict[str, object]] = []
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
    location: str | None
    """Where a redirect points (httpx does not follow one: a POST redirected is a misconfigured URL)."""
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


Validator = Callable[[dict[str, object]], object]


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
        """P(Yes) for one item (see :mod:`cladebench.models.vlm` for the rules and outcomes)."""
        from cladebench.images import ImageDecodeError

        config = self.config
        params = {"max_tokens": config.max_tokens, "temperature": config.temperature, "logprobs": True,
                  "top_logprobs": config.top_logprobs}
        text = config.prompt_template.format(query=item.query)
        try:
            response, cached, key = await self._complete(text, item.image, params,
                                                         lambda r: checked_first_token(r, self.spec))
        except ImageDecodeError as exc:
            return YesNoResult(item.key, "bad_image", None, 0.0, 0.0, None, exc.reason, False, None)
        except LogprobsUnsupportedError as exc:
            return YesNoResult(item.key, "no_logprobs", None, 0.0, 0.0, None, exc.reason, False, exc.request_key)
        except InvalidResponseError as exc:
            return YesNoResult(item.key, "invalid_response", None, 0.0, 0.0, None, exc.reason, False,
                               exc.request_key)
        return yes_no_from_response(response, self.spec, item.key, cached=cached, request_key=key)

    async def score_many(self, items: Iterable[YesNoItem | tuple[str, bytes, str]]) -> list[YesNoResult]:
        """:meth:`score_yes_no` for every item, concurrently, in the order given.

        The first error (a 4xx, retries exhausted or the deadline passed) cancels the rest and is raised; every
        answer that arrived before it is already cached, so a rerun resumes where this one stopped. An unusable
        answer (``invalid_response``, ``no_logprobs``) is an outcome, not an error: the rest go on. When no answer
        at all came with logprobs, the endpoint cannot score: :class:`LogprobsUnsupportedError` is raised.
        """
        wanted = [i if isinstance(i, YesNoItem) else YesNoItem(*i) for i in items]
        from cladebench.progress import progress_bar

        with progress_bar(total=len(wanted), desc="asking", unit="item", enabled=self.config.progress,
                  leave=False) as bar:

            async def one(item: YesNoItem) -> YesNoResult:
                result = await self.score_yes_no(item)
                bar.update(1)
                return result

            results = await gather_or_cancel([one(i) for i in wanted])
        answered = [r for r in results if r.outcome != "bad_image"]
        if answered and all(r.outcome == "no_logprobs" for r in answered):
            raise LogprobsUnsupportedError(str(answered[0].reason))
        return results

    async def chat(self, prompt: str, image: bytes | None = None, *, json_mode: bool = False,
                   max_tokens: int | None = None) -> ChatResult:
        """The model's text answer to ``prompt`` (with an image, if given); JSON mode asks for a JSON object.

        An image that does not decode raises :class:`cladebench.images.ImageDecodeError`; an answer over
        ``max_response_bytes`` raises :class:`InvalidResponseError` (and is not cached).
        """
        params: dict[str, object] = {"max_tokens": max_tokens or self.config.chat_max_tokens,
                                  "temperature": self.config.temperature}
        if json_mode:
            params["response_format"] = {"type": "json_object"}
        response, cached, key = await self._complete(
            prompt, image, params, lambda r: chat_from_response(r, self.spec, json_mode=json_mode))
        return chat_from_response(response, self.spec, json_mode=json_mode, cached=cached, request_key=key)

    async def _complete(self, text: str, image: bytes | None, params: Mapping[str, object],
                        validate: Validator) -> tuple[dict[str, object], bool, str]:
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

    async def _post(self, payload: dict[str, object]) -> dict[str, object]:
        """POST with retries, within the request deadline; the parsed JSON body of the 200 answer."""
        import httpx

        policy, url = self.config.retry_policy, self.spec.chat_url
        deadline = policy.deadline_s
        where = f"endpoint {self.spec.display_url} (model {self.spec.name!r})"
        shown = f"{self.spec.display_url}/chat/completions"
        attempt, spent = 0, 0.0  # spent: seconds in attempts and waits, not queued for the semaphore
        answered = False  # some attempt got an HTTP answer: the endpoint is reachable, whatever it said
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
            except TimeoutError:
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
                answered = True
                body = self._body_text(answer.body, cut=answer.cut)
                last = f"HTTP {answer.status} {answer.reason_phrase}{self._redirect_note(answer)}"
                last += f": {body}" if body else ""
                if not retryable_status(answer.status):
                    raise EndpointError(f"{where}: POST {shown} answered {last}")
                retry_after = parse_retry_after(answer.retry_after)
            # Out of reach (exit 5) when no attempt got an HTTP answer; an endpoint that answered errors is not.
            error = EndpointError if answered else EndpointUnreachableError
            if attempt >= policy.max_attempts:
                raise error(f"{where}: POST {shown} gave up after {attempt} attempts; last: {last}")
            delay = policy.backoff_delay(attempt, retry_after)
            if policy.would_pass_deadline(spent, delay):
                raise error(f"{where}: POST {shown} gave up after {attempt} attempts in {spent:.1f} s: "
                                    f"waiting {delay:.1f} s for another would pass the request deadline of "
                                    f"{deadline} s (VLMConfig.request_deadline_s); last: {last}")
            # Sleep outside the semaphore: a waiting request must not hold a slot another could use.
            await asyncio.sleep(delay)
            spent += delay

    async def _send(self, url: str, payload: dict[str, object]) -> _Answer:
        """One POST, its body read up to ``max_response_bytes`` (the rest is not read)."""
        async with self._http().stream("POST", url, json=payload, headers=self._headers()) as response:
            body, cut = await _read_capped(response, self.config.max_response_bytes)
            return _Answer(response.status_code, response.reason_phrase, response.headers.get("retry-after"),
                           response.headers.get("location"), body, cut)

    def _redirect_note(self, answer: _Answer) -> str:
        """Where a 3xx points, for the message: the endpoint URL to give instead (credentials left out)."""
        if not 300 <= answer.status < 400:
            return ""
        if not answer.location:
            return " (no Location)"
        return f" (Location: {self._body_text(answer.location.encode())})"

    def _json_body(self, answer: _Answer, where: str) -> dict[str, object]:
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


def _run_blocking(coroutine: Coroutine[object, object, _T], name: str) -> _T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()
    raise CladebenchError(f"{name}() was called inside a running event loop; await {name}_async(...) instead")
