"""Lineage completion with a generative VLM behind an OpenAI-compatible endpoint: prompts, requests, parsed answers.

Why a module of its own: the VLM path asks for the ranks below each hint as JSON and reads the answer
tolerantly (:mod:`cladebench.tasks.lineage.parse`); its prompts, request fan-out and caching are separate from
the contrastive path's candidate tree.
"""

from __future__ import annotations

import asyncio
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cladebench import store
from cladebench.errors import CladebenchError
from cladebench.tasks.lineage.config import LineageConfig
from cladebench.tasks.lineage.parse import parse_lineage_answer
from cladebench.tasks.lineage.targets import (
    CONDITIONS,
    NOTHING,
    Completion,
    Predicted,
    Target,
    pair_columns,
    read_targets,
)
from cladebench.taxonomy import RANKS, Rank

if TYPE_CHECKING:
    import lance

    from cladebench.models.spec import Model


# --- VLMs ----------------------------------------------------------------------------------------


def ranks_in_words(ranks: Sequence[Rank]) -> str:
    """'order, family, genus and species'."""
    words = [r.column for r in ranks]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def json_schema_text(ranks: Sequence[Rank]) -> str:
    """The object a VLM is asked for: '{"order": "...", "family": "...", ...}'."""
    return "{" + ", ".join(f'"{r.column}": "..."' for r in ranks) + "}"


PROMPT_FIELDS: dict[str, set[str]] = {"lineage_prompt": {"hint", "ranks", "schema"},
                                      "lineage_nohint_prompt": {"ranks", "schema"}}
"""Config field -> the placeholders its template may use."""


def check_prompts(config: LineageConfig) -> None:
    """Every prompt uses only its own placeholders, and the hinted one gives the hint."""
    for name, allowed in PROMPT_FIELDS.items():
        template = getattr(config, name)
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
        except ValueError as exc:
            raise CladebenchError(f"{name}: {exc} in {template!r} (write literal braces as {{{{ and }}}})") from None
        if not fields <= allowed:
            raise CladebenchError(f"{name} may use {sorted(allowed)}, got {sorted(fields)} in {template!r}")
    if "hint" not in {f for _, f, _, _ in string.Formatter().parse(config.lineage_prompt) if f}:
        raise CladebenchError(f"lineage_prompt must give the hint with {{hint}}: {config.lineage_prompt!r}")


def vlm_prompt(target: Target, condition: str, config: LineageConfig) -> str:
    """The question for one target under one condition."""
    spec = CONDITIONS[condition]
    ranks = spec.asked(target)
    template = getattr(config, spec.prompt_field)
    return template.format(hint=target.hint_text, ranks=ranks_in_words(ranks), schema=json_schema_text(ranks))


@dataclass(frozen=True)
class Reply:
    """A VLM's answer to one question."""

    text: str | None
    cached: bool
    failure: str | None
    """Why no answer exists, as ``status: reason`` (``bad_image``: the image does not decode;
    ``invalid_response``: an answer the client refused, such as one over its size cap); ``None`` when answered."""


async def ask_all(questions: Sequence[tuple[str, bytes]], model_id: str, config: LineageConfig) -> list[Reply]:
    """Every (prompt, image) question, concurrently, answers in order; the first endpoint error is raised."""
    from cladebench.images import ImageDecodeError
    from cladebench.models.endpoint import parse_endpoint
    from cladebench.models.vlm import InvalidResponseError, VLMClient, VLMConfig
    from cladebench.progress import progress_bar
    from cladebench.retry import gather_or_cancel

    vlm_config = VLMConfig(concurrency=config.vlm_concurrency, request_deadline_s=config.vlm_deadline_s,
                           max_response_bytes=config.vlm_max_response_bytes)
    async with VLMClient(parse_endpoint(model_id), vlm_config) as vlm:
        with progress_bar(total=len(questions), desc="asking", unit="question", leave=False) as bar:

            async def one(prompt: str, image: bytes) -> Reply:
                try:
                    result = await vlm.chat(prompt, image, json_mode=config.vlm_json)
                except ImageDecodeError as exc:
                    return Reply(None, False, f"bad_image: {exc.reason}")
                except InvalidResponseError as exc:  # one refused answer, not a reason to stop every question
                    return Reply(None, False, f"invalid_response: {exc.reason}")
                finally:
                    bar.update(1)
                return Reply(result.text, result.cached, None)

            return await gather_or_cancel([one(p, i) for p, i in questions])


def _parsed(reply: Reply, asked: Sequence[Rank]) -> Completion:
    if reply.text is None:
        return Completion((None,) * len(RANKS), (reply.failure or "bad_image").partition(":")[0],
                          answer=reply.failure)
    parsed = parse_lineage_answer(reply.text, asked)
    names = tuple(parsed.names[r.column] if r in asked else None for r in RANKS)
    return Completion(names, parsed.status, answer=reply.text)


def predict_vlm(dataset: lance.LanceDataset, encoder: Model, config: LineageConfig,
                conditions: Sequence[str]) -> Predicted:
    """Completions of a VLM behind an OpenAI-compatible endpoint (see the module docstring)."""
    check_prompts(config)
    rows = store.read(dataset, columns=[*pair_columns(dataset), "image"], where=config.where)
    if rows.num_rows == 0:
        raise CladebenchError(f"no photos of {dataset.uri} match the filter {config.where!r}")
    found = read_targets(rows)
    images = rows.column("image")
    keys = {c: [(t.row, vlm_prompt(t, c, config)) if t.scored_ranks else None for t in found.targets]
            for c in conditions}
    unique = sorted({k for ks in keys.values() for k in ks if k is not None})
    replies = dict(zip(unique, asyncio.run(ask_all([(p, images[r].as_py()) for r, p in unique], encoder.model_id,
                                                   config)), strict=True))
    completions = {c: [NOTHING if k is None else _parsed(replies[k], CONDITIONS[c].asked(t))
                       for t, k in zip(found.targets, keys[c], strict=True)] for c in conditions}
    info = {
        "vlm_prompts": {c: getattr(config, CONDITIONS[c].prompt_field) for c in conditions},
        "vlm_json_mode": config.vlm_json, "vlm_concurrency": config.vlm_concurrency,
        "questions": len(unique), "answered": sum(r.text is not None for r in replies.values()),
        "cached": sum(r.cached for r in replies.values()),
    }
    return Predicted(found, completions, info, [])
