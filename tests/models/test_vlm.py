"""The VLM client against a real HTTP server on 127.0.0.1 that answers like vLLM's chat completions.

The server decodes every image it is sent and derives the Yes/No logprobs from a hash of the prompt
and the image bytes, so each test knows the exact score to expect. It counts requests and the most in
flight at once, so the tests assert what went over the wire, not what the client believes it did.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import math
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from cladebench.errors import CladebenchError, UsageError
from cladebench.models.endpoint import EndpointSpec, parse_endpoint
from cladebench.models.vlm import (
    EndpointError,
    InvalidResponseError,
    LogprobsUnsupportedError,
    VLMClient,
    VLMConfig,
    YesNoItem,
    chat,
    normalise_token,
    prepare_image,
    score_yes_no,
    yes_no_from_response,
)
from helpers.http_local import send_json, serving
from helpers.vlm_server import (
    JPEGS,
    ChatHandler,
    ChatServer,
    completion,
    decode_request,
    default_top,
    expected_score,
    image_bytes,
    logprobs_for,
)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    httpd = ChatServer()
    with serving(httpd):
        yield httpd


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> VLMConfig:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return VLMConfig(concurrency=4, connect_timeout_s=1.0, read_timeout_s=2.0, max_attempts=3, backoff_base_s=0.01,
                     backoff_max_s=0.05, cache_dir=tmp_path / "vlm")


PROMPT = "Does this picture show {}? Answer Yes or No."


# --- names and scoring rules ---------------------------------------------------------------------


def test_endpoint_ids_parse_and_bad_ones_say_the_form() -> None:
    spec = parse_endpoint("openai-compatible:Qwen/Qwen2-VL-7B-Instruct@https://host.example:8443/v1/")
    assert spec == EndpointSpec("Qwen/Qwen2-VL-7B-Instruct", "https://host.example:8443/v1")
    assert spec.chat_url == "https://host.example:8443/v1/chat/completions"
    assert parse_endpoint(spec.id) == spec
    for bad in ("hf-hub:imageomics/bioclip", "openai-compatible:Qwen2-VL", "openai-compatible:@http://h/v1",
                "openai-compatible:m@ftp://h/v1"):
        with pytest.raises(CladebenchError, match="NAME@URL"):
            parse_endpoint(bad)


def test_token_normalisation_is_strip_then_casefold() -> None:
    assert {normalise_token(t) for t in ("Yes", " Yes", "yes", "YES", "\tyes\n", "\u2581Yes", "\u0120yes")} == {"yes"}
    assert normalise_token("Yes.") != "yes" and normalise_token("Yeah") != "yes"


def test_config_rejects_a_template_without_query() -> None:
    with pytest.raises(CladebenchError, match="query"):
        VLMConfig(prompt_template="Is this a fox?")
    with pytest.raises(CladebenchError, match="top_logprobs"):
        VLMConfig(top_logprobs=0)
    assert "sk-secret" not in repr(VLMConfig(api_key="sk-secret"))
    assert "sk-secret" not in json.dumps(VLMConfig(api_key="sk-secret").provenance(), default=str)


def test_generated_token_missing_from_top_logprobs_still_counts() -> None:
    response = {"choices": [{"logprobs": {"content": [{"token": "No", "logprob": -0.5, "top_logprobs": [
        {"token": "Yes", "logprob": -1.0}, {"token": "The", "logprob": -2.0}]}]}}]}
    result = yes_no_from_response(response, EndpointSpec("m", "http://h/v1"))
    assert result.score == pytest.approx(math.exp(-1.0) / (math.exp(-1.0) + math.exp(-0.5)), rel=1e-12)


# --- scoring over HTTP ---------------------------------------------------------------------------


def test_score_is_the_yes_share_of_the_first_token(server: ChatServer, config: VLMConfig) -> None:
    queries = ["a red fox", "a barn owl", "a fox's den {with braces}"]
    items = [YesNoItem(f"k{i}", JPEGS[i], q) for i, q in enumerate(queries)]
    results = score_yes_no(items, server.model_id(), config)

    assert [r.key for r in results] == ["k0", "k1", "k2"]
    for result, query, image in zip(results, queries, JPEGS, strict=True):
        assert result.outcome == "scored" and result.reason is None and not result.cached
        assert result.score == pytest.approx(expected_score(PROMPT.format(query), image), rel=1e-12)
        yes, no = logprobs_for(PROMPT.format(query), image)
        assert (result.p_yes, result.p_no) == (pytest.approx(math.exp(yes)), pytest.approx(math.exp(no)))
    seen = {s.prompt: s for s in server.state.seen}
    assert set(seen) == {PROMPT.format(q) for q in queries}
    first = seen[PROMPT.format("a red fox")]
    assert first.image == JPEGS[0] and first.mime_type == "image/jpeg"  # a JPEG goes as it is
    assert {k: first.payload[k] for k in ("model", "max_tokens", "temperature", "logprobs", "top_logprobs")} == {
        "model": "Qwen2-VL-7B", "max_tokens": 1, "temperature": 0.0, "logprobs": True, "top_logprobs": 20}
    assert [part["type"] for part in first.payload["messages"][0]["content"]] == ["image_url", "text"]


def test_token_variants_are_summed(server: ChatServer, config: VLMConfig) -> None:
    # Yes and No lowered by 1.5, so that the variants and the near misses still sum to at most 1.
    server.state.top_for = lambda yes, no: [
        ("Yes", yes - 1.5), (" yes", yes - 2.5), ("YES", yes - 3.5), ("\u2581Yes", -4.0), ("No", no - 1.5),
        (" no", no - 3.0), ("Yes.", -1.9), ("Nope", -2.1)]
    (result,) = score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    yes, no = (value - 1.5 for value in logprobs_for(PROMPT.format("a fox"), JPEGS[0]))
    p_yes = math.exp(yes) + math.exp(yes - 1) + math.exp(yes - 2) + math.exp(-4.0)
    p_no = math.exp(no) + math.exp(no - 1.5)
    assert result.score == pytest.approx(p_yes / (p_yes + p_no), rel=1e-12)
    assert (result.p_yes, result.p_no) == (pytest.approx(p_yes, rel=1e-12), pytest.approx(p_no, rel=1e-12))


def test_only_yes_among_the_top_tokens_scores_one(server: ChatServer, config: VLMConfig) -> None:
    server.state.top_for = lambda yes, no: [("Yes", yes), ("The", -3.0)]
    (result,) = score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    assert (result.outcome, result.score, result.p_no) == ("scored", 1.0, 0.0)


def test_neither_yes_nor_no_is_an_explicit_outcome(server: ChatServer, config: VLMConfig) -> None:
    server.state.top_for = lambda yes, no: [("The", -0.3), ("This", -1.9), ("Yeah", -2.5)]
    (result,) = score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    assert (result.outcome, result.score, result.token) == ("no_yes_no", None, "The")
    assert "neither Yes nor No" in result.reason and "'This'" in result.reason


@pytest.mark.parametrize("logprobs", ["absent", None, {"content": None}, "empty_top"])
def test_missing_logprobs_is_a_clear_error_and_not_cached(server: ChatServer, config: VLMConfig, logprobs: Any) -> None:
    def strip_logprobs(handler: ChatHandler, number: int, body: dict[str, Any]) -> bool:
        answer = completion(server.state.seen[-1], server.state.top_for)
        choice = answer["choices"][0]
        if logprobs == "absent":
            del choice["logprobs"]
        elif logprobs == "empty_top":
            choice["logprobs"]["content"][0]["top_logprobs"] = []
        else:
            choice["logprobs"] = logprobs
        send_json(handler, 200, answer)
        return True

    server.state.reply = strip_logprobs
    with pytest.raises(LogprobsUnsupportedError) as caught:
        score_yes_no([("a", JPEGS[0], "a fox")], server.model_id("Qwen2-VL-7B"), config)
    message = str(caught.value)
    assert "Qwen2-VL-7B" in message and f"127.0.0.1:{server.server_address[1]}/v1" in message
    assert "logprobs" in message and "vLLM" in message
    assert server.state.requests == 1  # a server that strips logprobs will not start sending them on a retry

    server.state.reply = None  # the server is fixed: the bad answer was not cached, so it is asked again
    (result,) = score_yes_no([("a", JPEGS[0], "a fox")], server.model_id("Qwen2-VL-7B"), config)
    assert result.outcome == "scored" and not result.cached and server.state.requests == 2


# --- transport -----------------------------------------------------------------------------------


def fail_first(times: int, status: int, body: str = "busy", headers: dict[str, str] | None = None):
    def reply(handler: ChatHandler, number: int, request: dict[str, Any]) -> bool:
        if number <= times:
            send_json(handler, status, body, headers)
            return True
        return False

    return reply


def test_server_errors_are_retried(server: ChatServer, config: VLMConfig) -> None:
    server.state.reply = fail_first(2, 500)
    (result,) = score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    assert result.score == pytest.approx(expected_score(PROMPT.format("a fox"), JPEGS[0]), rel=1e-12)
    assert server.state.requests == 3


def test_retries_give_up_with_the_last_error(server: ChatServer, config: VLMConfig) -> None:
    server.state.reply = fail_first(10, 503, "overloaded")
    with pytest.raises(EndpointError, match=r"gave up after 3 attempts; last: HTTP 503.*overloaded"):
        score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    assert server.state.requests == 3


def test_429_waits_for_retry_after(server: ChatServer, config: VLMConfig) -> None:
    server.state.reply = fail_first(1, 429, "slow down", {"Retry-After": "1"})
    started = time.monotonic()
    (result,) = score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    assert result.outcome == "scored" and server.state.requests == 2
    assert time.monotonic() - started >= 0.95  # the backoff alone would be 0.01 s


def test_client_errors_are_not_retried_and_carry_the_body(server: ChatServer, config: VLMConfig) -> None:
    body = json.dumps({"error": {"message": "The model `Qwen2-VL-7B` does not exist. " + "x" * 3000}})
    server.state.reply = fail_first(10, 400, body)
    with pytest.raises(EndpointError) as caught:
        score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    message = str(caught.value)
    assert "HTTP 400" in message and "does not exist" in message
    assert f"({len(body)} characters)" in message and len(message) < 900  # truncated
    assert server.state.requests == 1


def test_timeouts_are_retried(server: ChatServer, config: VLMConfig) -> None:
    def slow_first(handler: ChatHandler, number: int, request: dict[str, Any]) -> bool:
        if number == 1:
            time.sleep(0.6)
        return False

    server.state.reply = slow_first
    (result,) = score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), replace(config, read_timeout_s=0.2))
    assert result.outcome == "scored" and server.state.requests == 2


def test_concurrency_limit_is_respected(server: ChatServer, config: VLMConfig) -> None:
    server.state.hold_s = 0.08
    items = [(f"k{i}", image_bytes("JPEG", i), "a fox") for i in range(12)]
    results = score_yes_no(items, server.model_id(), replace(config, concurrency=3))
    assert len(results) == 12 and server.state.requests == 12
    assert server.state.max_in_flight == 3


# --- the cache -----------------------------------------------------------------------------------


def test_rerun_is_served_from_the_cache(server: ChatServer, config: VLMConfig) -> None:
    items = [(f"k{i}", JPEGS[i], "a fox") for i in range(3)]
    first = score_yes_no(items, server.model_id(), config)
    second = score_yes_no(items, server.model_id(), config)
    assert server.state.requests == 3  # nothing new went over the wire
    assert all(r.cached for r in second) and not any(r.cached for r in first)
    assert [r.score for r in second] == [r.score for r in first]
    assert [r.request_key for r in second] == [r.request_key for r in first]


def test_cache_key_follows_prompt_model_and_image_not_the_api_key(server: ChatServer, config: VLMConfig,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def ask(query: str = "a fox", image: bytes = JPEGS[0], model: str = "m1", cfg: VLMConfig = config) -> bool:
        before = server.state.requests
        (result,) = score_yes_no([("a", image, query)], server.model_id(model), cfg)
        assert result.cached == (server.state.requests == before)
        return result.cached

    assert not ask(cfg=replace(config, api_key="sk-first"))
    assert server.state.seen[-1].authorization == "Bearer sk-first"
    assert ask(cfg=replace(config, api_key="sk-second"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert ask()
    assert not ask(query="a wolf")
    assert not ask(cfg=replace(config, prompt_template="Is {query} visible? Yes or No."))
    assert not ask(model="m2")
    assert not ask(image=JPEGS[1])
    assert not ask(cfg=replace(config, max_image_side=16))
    assert server.state.seen[-1].authorization == "Bearer sk-from-env"
    cached_text = "".join(p.read_text() for p in Path(config.cache_dir).rglob("*.json"))
    assert "sk-" not in cached_text and "base64" not in cached_text  # neither the key nor the image is stored


def test_a_corrupt_cache_file_is_refetched(server: ChatServer, config: VLMConfig) -> None:
    (first,) = score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    (path,) = Path(config.cache_dir).rglob("*.json")
    assert path.name == f"{first.request_key}.json"
    path.write_text('{"key": "trunc')
    (second,) = score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    assert not second.cached and second.score == first.score and server.state.requests == 2
    (third,) = score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    assert third.cached and server.state.requests == 2
    assert not list(Path(config.cache_dir).rglob("*.tmp"))


# --- chat ----------------------------------------------------------------------------------------


def test_json_mode_chat_returns_parsed_text(server: ChatServer, config: VLMConfig) -> None:
    result = chat("Complete the lineage as JSON.", JPEGS[0], server.model_id(), config, json_mode=True,
                  max_tokens=64)
    assert result.data == {"genus": "Vulpes", "prompt": "Complete the lineage as JSON."}
    assert result.text == json.dumps(result.data) and result.json_error is None and not result.cached
    payload = server.state.seen[-1].payload
    assert payload["response_format"] == {"type": "json_object"} and payload["max_tokens"] == 64
    assert "logprobs" not in payload

    again = chat("Complete the lineage as JSON.", JPEGS[0], server.model_id(), config, json_mode=True, max_tokens=64)
    assert again.cached and again.data == result.data and server.state.requests == 1

    plain = chat("Say hello.", None, server.model_id(), config)
    assert (plain.text, plain.data, plain.json_error) == ("echo: Say hello.", None, None)
    assert server.state.seen[-1].image is None


def test_json_mode_text_that_is_not_json_is_recorded(server: ChatServer, config: VLMConfig) -> None:
    def not_json(handler: ChatHandler, number: int, request: dict[str, Any]) -> bool:
        answer = completion(server.state.seen[-1], server.state.top_for)
        answer["choices"][0]["message"]["content"] = '{"genus": "Vulp'
        send_json(handler, 200, answer)
        return True

    server.state.reply = not_json
    result = chat("Lineage?", JPEGS[0], server.model_id(), config, json_mode=True)
    assert result.data is None and result.json_error.startswith("not JSON")


def test_sync_wrapper_refuses_a_running_loop(server: ChatServer, config: VLMConfig) -> None:
    async def inside() -> None:
        score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)

    with pytest.raises(CladebenchError, match="score_yes_no_async"):
        asyncio.run(inside())


def test_async_client_shares_one_connection_pool(server: ChatServer, config: VLMConfig) -> None:
    async def run() -> list[Any]:
        async with VLMClient(server.model_id(), config) as vlm:
            return await asyncio.gather(vlm.score_yes_no(YesNoItem("a", JPEGS[0], "a fox")),
                                        vlm.chat("Say hi.", JPEGS[1]))

    score, text = asyncio.run(run())
    assert score.outcome == "scored" and text.text == "echo: Say hi."


# --- images --------------------------------------------------------------------------------------


def test_accepted_formats_go_as_they_are_others_become_jpeg(server: ChatServer, config: VLMConfig) -> None:
    png, webp, bmp = image_bytes("PNG", 1), image_bytes("WEBP", 2), image_bytes("BMP", 3)
    score_yes_no([("png", png, "a"), ("webp", webp, "b"), ("bmp", bmp, "c")], server.model_id(), config)
    seen = {s.prompt: s for s in server.state.seen}
    assert (seen[PROMPT.format("a")].mime_type, seen[PROMPT.format("a")].image) == ("image/png", png)
    assert (seen[PROMPT.format("b")].mime_type, seen[PROMPT.format("b")].image) == ("image/webp", webp)
    assert seen[PROMPT.format("c")].mime_type == "image/jpeg" and seen[PROMPT.format("c")].image_size == (40, 30)


def test_max_image_side_downscales(server: ChatServer, config: VLMConfig) -> None:
    large = image_bytes("PNG", 1, size=(200, 100))
    score_yes_no([("a", large, "a fox")], server.model_id(), replace(config, max_image_side=50))
    assert (server.state.seen[-1].mime_type, server.state.seen[-1].image_size) == ("image/jpeg", (50, 25))


def test_exif_rotated_and_transparent_images_are_sent_as_decoded() -> None:
    image = Image.new("RGB", (40, 20), (200, 10, 10))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees on display
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", exif=exif)
    rotated = prepare_image(buffer.getvalue())
    assert rotated.mime_type == "image/jpeg" and "EXIF" in rotated.reencoded_because
    assert Image.open(io.BytesIO(rotated.data)).size == (20, 40)

    clear = prepare_image(image_bytes("PNG", mode="RGBA", size=(8, 8)))
    assert clear.mime_type == "image/jpeg" and clear.reencoded_because == "transparency to flatten"
    assert Image.open(io.BytesIO(clear.data)).getpixel((4, 4)) == pytest.approx((255, 255, 255), abs=2)


def test_an_image_that_does_not_decode_is_an_outcome_without_a_request(server: ChatServer, config: VLMConfig) -> None:
    truncated = JPEGS[0][: len(JPEGS[0]) // 2]
    bad, good = score_yes_no([("bad", truncated, "a fox"), ("good", JPEGS[1], "a fox")], server.model_id(), config)
    assert (bad.outcome, bad.score, bad.request_key) == ("bad_image", None, None)
    assert "truncated" in bad.reason or "corrupt" in bad.reason
    assert good.outcome == "scored" and server.state.requests == 1


# --- answers that must not be kept, and waits that must end ----------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, 1e308, 0.7])
def test_an_impossible_logprob_is_an_outcome_never_cached(server: ChatServer, config: VLMConfig, bad: Any) -> None:
    server.state.top_for = lambda yes, no: [("Yes", bad), ("No", no)]
    items = [("a", JPEGS[0], "a fox")]
    (result,) = score_yes_no(items, server.model_id(), config)
    assert (result.outcome, result.score, result.cached) == ("invalid_response", None, False)
    assert "'Yes'" in result.reason and "not cached" in result.reason and result.request_key
    assert not list(Path(config.cache_dir).rglob("*.json"))

    (again,) = score_yes_no(items, server.model_id(), config)  # asked again, not served a poisoned cache
    assert again.outcome == "invalid_response" and server.state.requests == 2

    server.state.top_for = default_top  # the server is fixed: the next run scores and caches
    (fixed,) = score_yes_no(items, server.model_id(), config)
    assert fixed.outcome == "scored" and 0 < fixed.score < 1 and server.state.requests == 3
    (cached,) = score_yes_no(items, server.model_id(), config)
    assert cached.cached and server.state.requests == 3


def test_one_bad_answer_does_not_stop_the_batch(server: ChatServer, config: VLMConfig) -> None:
    def reply(handler: ChatHandler, number: int, body: dict[str, Any]) -> bool:
        seen = decode_request(body, None)  # this request's, whatever else is in flight
        top = (lambda y, n: [("Yes", math.nan), ("No", n)]) if "owl" in seen.prompt else default_top
        send_json(handler, 200, completion(seen, top))
        return True

    server.state.reply = reply
    results = score_yes_no([("fox", JPEGS[0], "a fox"), ("owl", JPEGS[1], "an owl"), ("elk", JPEGS[2], "an elk")],
                           server.model_id(), config)
    assert [r.outcome for r in results] == ["scored", "invalid_response", "scored"]
    assert "NaN" in results[1].reason


def test_a_poisoned_cache_entry_is_asked_again(server: ChatServer, config: VLMConfig) -> None:
    (first,) = score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    (path,) = Path(config.cache_dir).rglob("*.json")
    entry = json.loads(path.read_text())
    entry["response"]["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["logprob"] = math.inf
    path.write_text(json.dumps(entry))  # as an earlier version cached it: Infinity in the file
    (second,) = score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    assert (second.outcome, second.cached, second.score) == ("scored", False, first.score)
    assert server.state.requests == 2 and "Infinity" not in path.read_text()


def test_an_oversized_answer_is_refused_and_not_cached(server: ChatServer, config: VLMConfig) -> None:
    padding = "x" * 200_000

    def huge(handler: ChatHandler, number: int, body: dict[str, Any]) -> bool:
        answer = completion(decode_request(body, None), server.state.top_for)
        answer["padding"] = padding
        if number % 2:
            send_json(handler, 200, answer)
            return True
        data = json.dumps(answer).encode()  # no Content-Length: the cap applies while reading
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(data)
        handler.close_connection = True
        return True

    server.state.reply = huge
    small = replace(config, max_response_bytes=50_000)
    results = score_yes_no([("a", JPEGS[0], "a fox"), ("b", JPEGS[1], "a fox")], server.model_id(), small)
    for result in results:
        assert (result.outcome, result.score) == ("invalid_response", None)
        assert "max_response_bytes=50000" in result.reason
    with pytest.raises(InvalidResponseError, match="max_response_bytes"):
        chat("Say hi.", None, server.model_id(), small)
    assert not list(Path(config.cache_dir).rglob("*.json")) and server.state.requests == 3
    assert score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)[0].outcome == "scored"


def test_a_server_that_never_answers_fails_at_the_request_deadline(server: ChatServer, config: VLMConfig) -> None:
    server.state.hold_s = 30.0
    quick = replace(config, read_timeout_s=0.3, request_deadline_s=1.0, max_attempts=50)
    started = time.monotonic()
    with pytest.raises(EndpointError, match=r"request deadline of 1.0 s"):
        score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), quick)
    assert time.monotonic() - started < 10
    assert 1 <= server.state.requests < 50


def test_a_trickling_answer_is_cut_by_the_wall_clock(server: ChatServer, config: VLMConfig) -> None:
    def trickle(handler: ChatHandler, number: int, body: dict[str, Any]) -> bool:
        data = json.dumps(completion(decode_request(body, None), server.state.top_for)).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        for byte in data:  # each read returns within the read timeout; the whole answer would take minutes
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.1)
        return True

    server.state.reply = trickle
    quick = replace(config, read_timeout_s=2.0, request_deadline_s=1.0)
    started = time.monotonic()
    with pytest.raises(EndpointError, match=r"no complete answer within the request deadline of 1.0 s"):
        score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), quick)
    assert time.monotonic() - started < 10 and server.state.requests == 1


def test_a_huge_retry_after_is_capped_and_bounded_by_the_deadline(server: ChatServer, config: VLMConfig) -> None:
    server.state.reply = fail_first(99, 429, "slow down", {"Retry-After": "100000"})
    started = time.monotonic()
    with pytest.raises(EndpointError, match=r"gave up after 3 attempts; last: HTTP 429"):
        score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(),
                     replace(config, max_retry_after_s=0.2, request_deadline_s=None))
    assert time.monotonic() - started < 10 and server.state.requests == 3

    with pytest.raises(EndpointError, match=r"waiting 30.0 s for another would pass the request deadline of 2.0 s"):
        score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(),
                     replace(config, max_retry_after_s=30.0, request_deadline_s=2.0))
    assert server.state.requests == 4  # one attempt, then no hopeless wait


def test_limits_have_short_defaults_and_are_validated() -> None:
    defaults = VLMConfig()
    assert defaults.request_deadline_s is not None and defaults.request_deadline_s <= 60
    assert defaults.max_retry_after_s <= 60 and defaults.max_response_bytes <= 16 * 2**20
    for name in ("request_deadline_s", "read_timeout_s", "max_response_bytes"):
        with pytest.raises(CladebenchError, match=name):
            VLMConfig(**{name: 0})


# --- credentials and schemes ---------------------------------------------------------------------


def test_credentials_in_the_endpoint_url_are_used_but_never_shown(server: ChatServer, config: VLMConfig) -> None:
    port = server.server_address[1]
    spec = parse_endpoint(f"openai-compatible:m@http://alice:s3cret@127.0.0.1:{port}/v1")
    assert spec.id == f"openai-compatible:m@http://127.0.0.1:{port}/v1" and "s3cret" not in repr(spec)
    (result,) = score_yes_no([("a", JPEGS[0], "a fox")], spec, config)
    assert result.outcome == "scored"
    assert server.state.seen[-1].authorization == "Basic " + base64.b64encode(b"alice:s3cret").decode()
    assert "s3cret" not in "".join(p.read_text() for p in Path(config.cache_dir).rglob("*.json"))
    clean = parse_endpoint(f"openai-compatible:m@http://127.0.0.1:{port}/v1")
    (same,) = score_yes_no([("a", JPEGS[0], "a fox")], clean, config)
    assert same.cached  # the password is not part of the cache key, as the API key is not

    server.state.reply = fail_first(10, 400, "bad request")
    with pytest.raises(EndpointError) as caught:
        score_yes_no([("b", JPEGS[1], "a fox")], spec, config)
    assert "s3cret" not in str(caught.value) and "alice" not in str(caught.value)


@pytest.mark.parametrize("scheme", ["ftp", "file", "ws"])
def test_an_unsupported_scheme_is_a_usage_error_naming_it(scheme: str) -> None:
    with pytest.raises(UsageError, match=f"the scheme {scheme}:// is not supported"):
        parse_endpoint(f"openai-compatible:m@{scheme}://u:pw@host/v1")
    with pytest.raises(UsageError) as caught:
        parse_endpoint(f"openai-compatible:m@{scheme}://u:pw@host/v1")
    assert "pw" not in str(caught.value) and caught.value.exit_code == 2


def test_docstring_examples_run() -> None:
    import doctest

    import cladebench.models.vlm

    result = doctest.testmod(cladebench.models.vlm)
    assert result.attempted > 0 and result.failed == 0


def test_a_server_that_echoes_the_credentials_in_its_error_does_not_put_them_on_the_console(
        server: ChatServer, config: VLMConfig) -> None:
    """Some servers repeat the request in an error body: the key and the URL's password and query secret are
    blanked there too, as everywhere else a message shows the endpoint."""
    port = server.server_address[1]
    spec = parse_endpoint(f"openai-compatible:m@http://alice:pa55word@127.0.0.1:{port}/v1")

    def echo(handler: ChatHandler, number: int, request: dict[str, Any]) -> bool:
        send_json(handler, 401, f"bad credentials: {handler.headers.get('Authorization')} for user alice:pa55word "
                           f"at {handler.path}")
        return True

    server.state.reply = echo
    keyed = replace(config, api_key="sk-t0p-s3cret")
    with pytest.raises(EndpointError) as caught:
        score_yes_no([("a", JPEGS[0], "a fox")], spec, keyed)
    message = str(caught.value)
    assert "401" in message and "bad credentials" in message
    for secret in ("sk-t0p-s3cret", "pa55word"):
        assert secret not in message, message


# --- answers that cannot be probabilities, answers without logprobs, endpoints out of reach -------------------


def test_top_logprobs_summing_over_one_are_refused_and_never_cached(server: ChatServer, config: VLMConfig) -> None:
    """Three tokens at probability 0.99 each (P(Yes) 1.98 from two spellings of Yes) are no distribution: the answer
    is an unusable outcome, never a score, and never kept."""
    server.state.top_for = lambda yes, no: [("Yes", math.log(0.99)), (" Yes", math.log(0.99)), ("No", math.log(0.99))]
    items = [("a", JPEGS[0], "a fox")]
    (result,) = score_yes_no(items, server.model_id(), config)
    assert (result.outcome, result.score, result.cached) == ("invalid_response", None, False)
    assert "sum to 2.97" in result.reason and "not cached" in result.reason
    assert not list(Path(config.cache_dir).rglob("*.json"))
    server.state.top_for = lambda yes, no: [("Yes", math.log(0.6)), ("No", math.log(0.4000004))]  # rounding: kept
    (rounded,) = score_yes_no(items, server.model_id(), config)
    assert rounded.outcome == "scored" and rounded.score == pytest.approx(0.6, abs=1e-6)


def test_answers_without_logprobs_among_others_are_unscored_not_an_abort(server: ChatServer,
                                                                         config: VLMConfig) -> None:
    """An endpoint that leaves logprobs out of one answer in ten stopped the whole batch, and every rerun again.
    Such a candidate is an unusable answer like the others (outcome ``no_logprobs``), asked again next time;
    only an endpoint that sends logprobs for none of the answers is refused as one that cannot score."""
    def every_third_without(handler: ChatHandler, number: int, body: dict[str, Any]) -> bool:
        seen = decode_request(body, None)
        answer = completion(seen, default_top)
        if "owl" in seen.prompt:
            answer["choices"][0]["logprobs"] = None
        send_json(handler, 200, answer)
        return True

    server.state.reply = every_third_without
    items = [("fox", JPEGS[0], "a fox"), ("owl", JPEGS[1], "an owl"), ("elk", JPEGS[2], "an elk")]
    results = score_yes_no(items, server.model_id(), config)
    assert [r.outcome for r in results] == ["scored", "no_logprobs", "scored"]
    assert results[1].score is None and "logprobs" in results[1].reason
    again = score_yes_no(items, server.model_id(), config)
    assert [r.cached for r in again] == [True, False, True] and server.state.requests == 4


def test_an_endpoint_out_of_reach_is_remote_unavailable(config: VLMConfig) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(EndpointError) as caught:
        score_yes_no([("a", JPEGS[0], "a fox")], f"openai-compatible:m@http://127.0.0.1:{port}/v1", config)
    assert caught.value.exit_code == 5 and "gave up after 3 attempts" in str(caught.value)


def test_a_redirect_is_reported_with_where_it_points(server: ChatServer, config: VLMConfig) -> None:
    server.state.reply = fail_first(10, 302, "", {"Location": "https://gateway.example/v2/chat/completions"})
    with pytest.raises(EndpointError, match=r"HTTP 302 Found \(Location: https://gateway.example/v2/chat/completions\)$"):
        score_yes_no([("a", JPEGS[0], "a fox")], server.model_id(), config)
    assert server.state.requests == 1
