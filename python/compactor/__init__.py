"""Compacts an LLM agent's message history to a token budget; every output is a request the
provider accepts, and no failed tool call reads as a success.

Plain Python values in and out: a request body is a ``dict`` (Anthropic Messages
``{"system", "messages"}``, OpenAI Chat ``{"messages"}``, OpenAI Responses ``{"input"}``) or a
bare ``list`` of messages; the format is detected unless given (``"anthropic"``,
``"openai-chat"``, ``"openai-responses"``). Budgets and the report's ``tokens_before`` /
``tokens_after`` are in the target model's tokens: for a model with a ``[tokens.models]``
rule (``claude-*``: ``ceil((o200k + 156 per tool call) x 1.105)``, see docs/calibration.md),
else the configured tokenizer's (``o200k_base`` by default) as counted. :func:`count` gives
both: the breakdown in counted tokens and ``model_tokens``, the figure compaction budgets
with.

>>> import compactor
>>> c = compactor.Compactor()
>>> body, report = c.compact([{"role": "user", "content": "hi"}], budget=1000)
>>> report["status"]
'unchanged'
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterator, Union

from . import _native
from .errors import CompactorError, ConfigError, FormatError, InvalidInputError, RecallError
from .violation import Violation

__all__ = [
    "Compactor",
    "Compacted",
    "Loaded",
    "Violation",
    "CompactorError",
    "ConfigError",
    "FormatError",
    "InvalidInputError",
    "RecallError",
    "compact",
    "count",
    "count_text",
    "validate",
    "convert",
    "load",
    "__version__",
]

__version__: str = _native.__version__

Body = Union[dict, list]
"""A request body (dict) or a bare list of messages."""

Config = Union[None, str, "os.PathLike[str]", dict]


def _shape(body: Body) -> str:
    """``3 messages`` / ``a dict of 3 messages``: the size of a body, for reprs."""
    if isinstance(body, list):
        return f"{len(body)} messages"
    items = body.get("messages", body.get("input", []))
    n = len(items) if isinstance(items, list) else 0
    return f"a dict of {n} messages"


@dataclass(frozen=True, repr=False)
class Compacted:
    """The result of :meth:`Compactor.compact`.

    Unpacks as ``body, report = result``.

    Attributes:
        body: the compacted request, in the shape (dict or list) and format it was given; the
            input object itself when ``changed`` is false.
        report: what happened, as a dict: ``status`` (``unchanged``, ``compacted``,
            ``over_budget``, ``degraded``, ``repaired``), ``tokens_before``, ``tokens_after``,
            ``budget``, ``trigger``, ``target`` (tokens), ``messages_before``,
            ``messages_after``, ``tiers`` (each strategy's run with its typed ``edits``),
            ``notes``, ``timings`` (ms), ``repairs`` (the unusable inline images, base64 data
            empty or not decodable, replaced by a text placeholder: ``path``, ``message``,
            ``block``, ``nested``, ``reason``, ``media_type``).
        changed: whether ``body`` differs from the input.
    """

    body: Body
    report: dict[str, Any]
    changed: bool

    def __iter__(self) -> Iterator[Any]:
        yield self.body
        yield self.report

    @property
    def status(self) -> str:
        """``report["status"]``."""
        return self.report["status"]

    @property
    def tokens_after(self) -> int:
        """``report["tokens_after"]``: tokens of the output."""
        return self.report["tokens_after"]

    def __repr__(self) -> str:
        r = self.report
        return (
            f"Compacted(status={r.get('status')!r}, tokens {r.get('tokens_before')} -> "
            f"{r.get('tokens_after')}, body={_shape(self.body)}, changed={self.changed})"
        )


@dataclass(frozen=True, repr=False)
class Loaded:
    """A file read by :func:`load`.

    Attributes:
        body: the conversation as a request body of ``format``.
        format: ``anthropic``, ``openai-chat`` or ``openai-responses``.
        source: ``request`` (a request body), ``claude-code`` (a Claude Code session log,
            imported as Anthropic), ``codex-rollout`` (as OpenAI Responses) or ``trajectory``
            (a mini-swe-agent trajectory, as OpenAI Chat).
    """

    body: Body
    format: str
    source: str

    def __repr__(self) -> str:
        return f"Loaded(format={self.format!r}, source={self.source!r}, body={_shape(self.body)})"


class Compactor:
    """A configured compaction pipeline: policy -> strategy tiers -> guard.

    Keep one per agent and reuse it across turns: its token cache stays warm, and it remembers
    its recent compactions so that the next turn continues from the same compacted prefix
    (the provider's prompt cache keeps hitting). Safe to share between threads.

    Args:
        config: ``None`` for the built-in defaults, a path to a config file (TOML, as
            ``config/compactor.toml`` documents), or a dict of the same sections, e.g.
            ``{"budget": {"tokens": 20000}, "truncate": {"max_tool_result_tokens": 500}}``.
            ``COMPACTOR__SECTION__KEY`` environment variables apply on top, as for the CLI.
        strategy: a preset name (``default``, ``truncate``, ``microcompact``, ``summary``) or
            the path of a preset file.

    Raises:
        ConfigError: an unknown key, a value out of range, an unknown preset, or a preset
            that cannot run here (``summary`` without an ``[llm]`` section: ``.key ==
            "llm"``); a dict config is named ``config dict`` in the message.
    """

    def __init__(self, config: Config = None, strategy: str = "default"):
        if config is not None and not isinstance(config, (dict, str, os.PathLike)):
            raise TypeError(f"config must be None, a path or a dict, not {type(config).__name__}")
        self._native = _native.Compactor(config, strategy)

    @property
    def strategy(self) -> str:
        """The preset in force."""
        return self._native.strategy

    @property
    def skipped_tiers(self) -> list[str]:
        """Tiers of the settings that cannot run here, with the reason (``summary`` without an LLM)."""
        return self._native.skipped_tiers

    def budget(self, budget: int | None = None) -> tuple[int, int]:
        """``(limit, target)`` in tokens: ``budget`` (at least 1), or the configured one, and
        the target the pipeline compacts down to once over the trigger."""
        return self._native.budget(budget)

    def compact(self, body: Body, budget: int | None = None, format: str | None = None) -> Compacted:
        """Compacts ``body`` to ``budget`` tokens (or the configured budget when ``None``).

        Under the trigger (``budget.trigger`` x budget, 0.8 by default) nothing changes; over
        it, the tiers run until the output is under the target (``budget.target`` x budget,
        0.6 by default). The GIL is released while compacting.

        Raises:
            ValueError: ``budget`` below 1 (as ``compactor compact --budget 0``).
            InvalidInputError: the input itself breaks the provider's rules (``.violations``).
            FormatError: the input is not a request of the format (``.path``).
            TypeError: ``body`` holds values with no JSON form.
        """
        out, report, changed = self._native.compact(body, budget, format)
        return Compacted(out, report, changed)

    def count(self, body: Body, format: str | None = None, model: str | None = None) -> dict[str, Any]:
        """Tokens of ``body`` with this pipeline's cached counters, as :func:`compactor.count`
        (same keys; ``model_tokens`` counted with this pipeline's ``[tokens]`` settings and any
        ratio it learned): ``model_tokens["total"]`` is the ``tokens_before``
        :meth:`compact` reports for the same body and model."""
        return self._native.count(body, format, model)

    def recall(self, id: str) -> dict[str, Any]:
        """The original a recall id names (``recall rc_…`` in a cleared placeholder or a
        dropped-messages marker this pipeline wrote): ``{"id", "kind": "block"|"span",
        "original"}``, ``original`` the block's JSON or the list of dropped messages, as the
        input had them. Raises :class:`RecallError` (``.kind``: ``evicted``, ``unknown``,
        ``malformed``, ``disabled``)."""
        return self._native.recall(id)

    def validate(self, body: Body, format: str | None = None, strict: bool = False) -> list[Violation]:
        """As :func:`compactor.validate`."""
        return validate(body, format=format, strict=strict)

    def convert(self, body: Body, to: str, format: str | None = None) -> Body:
        """As :func:`compactor.convert`."""
        return convert(body, to, format=format)


def compact(
    body: Body,
    budget: int | None = None,
    format: str | None = None,
    *,
    config: Config = None,
    strategy: str = "default",
) -> Compacted:
    """One-shot :meth:`Compactor.compact` with a fresh pipeline (nothing stays warm: in a loop,
    keep a :class:`Compactor`)."""
    return Compactor(config, strategy).compact(body, budget=budget, format=format)


def count(
    body: Body, format: str | None = None, tokenizer: str | None = None, model: str | None = None
) -> dict[str, Any]:
    """Tokens of ``body``, split up, and its size in the target model's tokens.

    Returns a dict: ``total`` = ``system`` + ``tools`` + ``messages``, ``message_count``,
    ``by_role``, ``by_block_type``, ``by_tool``, ``largest`` (counted tokens of
    ``model_tokens["counting"]["tokenizer"]``, no per-call framing), and ``model_tokens``:

    - ``total``: model tokens, ``ceil(counted x ratio) + overhead``: what ``compactor count``
      reports and what :meth:`Compactor.compact` budgets with (its ``tokens_before``);
    - ``counted``: counted tokens plus the rule's per-call framing,
      ``ceil(tool_call / ratio)`` per tool_use block (= ``total`` of the breakdown +
      ``tool_calls`` x that framing);
    - ``tool_calls``: the tool_use blocks of the messages;
    - ``counting``: ``model``, ``pattern``, ``tokenizer``, ``ratio``, ``rule_ratio``,
      ``overhead``, ``tool_call`` and ``source`` (``config``, ``learned``, or ``counter`` when
      the model tokens are the counted ones: no model named, ``model`` is ``None``, or a model
      no rule names).

    ``model``: the model to count for; default the body's own ``model``, else ``[tokens]
    model`` of the environment (``COMPACTOR__TOKENS__MODEL``). ``tokenizer`` (``o200k_base``
    or ``cl100k_base``) sets ``[tokens] tokenizer``: the vocabulary of no model and of a model
    no rule names (a rule names its own). A fresh pipeline of the built-in configuration and
    the environment counts, as ``compactor count`` does; :meth:`Compactor.count` keeps one warm.

    Raises:
        ValueError: an unknown ``tokenizer``.
        ConfigError: a bad ``COMPACTOR__…`` environment variable (``.key``).
        FormatError: ``body`` is not a request of the format (``.path``).
    """
    return _native.count(body, format, tokenizer, model)


def count_text(text: str, tokenizer: str | None = None) -> int:
    """Tokens of a plain text (BPE; special-token markers count as ordinary text)."""
    return _native.count_text(text, tokenizer)


def validate(body: Body, format: str | None = None, strict: bool = False) -> list[Violation]:
    """The guard's verdict: every broken provider rule, in message order; empty when the
    provider accepts ``body``. ``strict``: the history may not end with tool calls still
    waiting for their results (by default an agent mid-turn is accepted).

    Raises:
        FormatError: ``body`` is not a request of the format at all (``.path``).
    """
    return [Violation.from_dict(v) for v in _native.validate(body, format, strict)]


def convert(body: Body, to: str, format: str | None = None) -> Body:
    """``body`` written as a request of format ``to`` (tool calls, tool results and their
    failure flags mapped; unknown fields kept where the target has a place for them)."""
    return _native.convert(body, to, format)


def load(
    source: Union[str, "os.PathLike[str]", bytes],
    format: str | None = None,
    whole_log: bool = False,
) -> Loaded:
    """Reads a file (path) or its bytes: a request body, or a session log imported as a request
    (Claude Code JSONL, Codex rollout, mini-swe-agent trajectory). ``whole_log``: a Claude Code
    log from its first line rather than from its last compaction.

    Raises:
        FormatError: not JSON/JSONL, an unknown format, or a malformed entry (``.path``:
            the JSON path or ``line N``).
        OSError: the file cannot be read.
    """
    body, fmt, origin = _native.load(source, format, whole_log)
    return Loaded(body, fmt, origin)
