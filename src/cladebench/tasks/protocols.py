"""What the functions every task shares read of a task's settings and of a model, as Protocols: each task's own
frozen config (and each model) meets them without naming them, and the checker sees a misspelt field.
"""

from __future__ import annotations

from typing import Protocol


class NamesModel(Protocol):
    """What finding a model's embedding column asks of the model: its id."""

    @property
    def model_id(self) -> str: ...


class ScalesLogits(Protocol):
    """A config with ``--logit-scale``: 'learned' or a positive number."""

    @property
    def logit_scale(self) -> str: ...


class ScoresLabels(ScalesLogits, Protocol):
    """The settings of a task that scores images against texts of label names."""

    @property
    def name_style(self) -> str: ...

    @property
    def templates(self) -> str: ...

    @property
    def candidates(self) -> str | None: ...


class AsksEndpoint(Protocol):
    """The settings of a task that sends requests to a VLM endpoint."""

    @property
    def vlm_concurrency(self) -> int: ...

    @property
    def vlm_max_response_bytes(self) -> int: ...

    @property
    def vlm_deadline_s(self) -> float: ...
