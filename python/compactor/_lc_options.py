"""LangChain's own ``trim_messages`` keywords, for :func:`compactor.langchain.trim_messages`:
each is honoured or refused by name, never accepted and ignored.

- ``token_counter`` (a callable over a message list or over one message, a chat model, or
  ``"approximate"``): honoured. ``max_tokens`` is then in that counter's units; the budget
  compactor works with is scaled by the ratio of the two counts of the input, and the result is
  counted again with ``token_counter`` (see :func:`counter_of`).
- ``strategy``: ``"last"`` is what compactor does (the newest messages stay); ``"first"`` is
  refused; any other name is a compactor preset.
- ``include_system``: ``True`` is what compactor does (the system message always stays,
  counted in ``max_tokens``); ``False`` is refused.
- ``start_on``: honoured when it allows ``"human"`` (after the system message a request
  starts with the user's message, and compactor keeps it so); anything else is refused.
- ``end_on``: honoured when the input already ends on that type; otherwise refused (compactor
  never drops the newest messages, the agent's open turn).
- ``allow_partial``: ``True`` is what compactor does (oversized tool results and texts are cut
  to a head and tail with a marker, stale tool results cleared); ``False`` is refused.
- ``text_splitter``: refused (compactor cuts at line boundaries itself).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

UNSET: Any = object()
"""Default of the LangChain keywords: not given."""

MessageTypes = Any
"""A message type name (``"human"``), a ``BaseMessage`` class, or a sequence of them."""


def _types(spec: MessageTypes) -> list[Any]:
    if isinstance(spec, (str, type)):
        return [spec]
    return list(spec)


def _is(message: BaseMessage, types: list[Any]) -> bool:
    return any(
        message.type == t if isinstance(t, str) else isinstance(message, t) for t in types
    )


def _names(spec: MessageTypes) -> str:
    return ", ".join(t if isinstance(t, str) else t.__name__ for t in _types(spec))


def counter_of(token_counter: Any) -> Callable[[list[BaseMessage]], int]:
    """``token_counter`` as a function of a message list, as LangChain reads it: a chat model's
    ``get_num_tokens_from_messages``, ``"approximate"``'s ``count_tokens_approximately``, a
    callable whose first parameter is annotated ``BaseMessage`` summed over the messages, any
    other callable (``len`` counts messages) called with the list.

    Raises:
        TypeError: ``token_counter`` is none of these.
    """
    from langchain_core.language_models import BaseLanguageModel

    if isinstance(token_counter, BaseLanguageModel):
        return token_counter.get_num_tokens_from_messages
    if token_counter == "approximate":
        from langchain_core.messages.utils import count_tokens_approximately

        return count_tokens_approximately
    if not callable(token_counter):
        raise TypeError(
            "token_counter: expected a callable, a language model or 'approximate', "
            f"not {token_counter!r}"
        )
    try:
        params = list(inspect.signature(token_counter).parameters.values())
    except (TypeError, ValueError):
        params = []
    if params and params[0].annotation in (BaseMessage, "BaseMessage"):
        return lambda messages: sum(token_counter(m) for m in messages)
    return token_counter


def preset_of(strategy: str) -> str:
    """The compactor preset ``strategy`` names: ``"last"`` is the default one.

    Raises:
        ValueError: ``"first"``.
    """
    if strategy == "first":
        raise ValueError(
            "strategy='first': it keeps the oldest messages; compactor keeps the newest "
            "(LangChain's strategy='last') and replaces older turns by a digest. Leave "
            "strategy out, or name a compactor preset (default, truncate, microcompact)"
        )
    return "default" if strategy == "last" else strategy


def check_before(
    messages: Sequence[BaseMessage],
    *,
    include_system: Any,
    start_on: Any,
    end_on: Any,
    allow_partial: Any,
    text_splitter: Any,
) -> None:
    """Refuses, by name, the keywords compactor cannot honour for ``messages``.

    Raises:
        ValueError: naming the keyword, what compactor does instead and what to pass.
    """
    if include_system is not UNSET and not include_system:
        raise ValueError(
            "include_system=False: compactor always keeps the system message (it is counted "
            "in max_tokens); pass include_system=True or leave it out"
        )
    if allow_partial is not UNSET and not allow_partial:
        raise ValueError(
            "allow_partial=False: compactor shortens oversized tool results and texts (head "
            "and tail, with a marker) and clears stale tool results, so a kept message can "
            "be partial; pass allow_partial=True or leave it out"
        )
    if text_splitter is not UNSET and text_splitter is not None:
        raise ValueError(
            "text_splitter: compactor cuts text itself (head and tail, at line boundaries); "
            "leave text_splitter out"
        )
    if start_on is not UNSET and start_on is not None:
        if not any(t == "human" or t is HumanMessage for t in _types(start_on)):
            raise ValueError(
                f"start_on={_names(start_on)}: after the system message a request starts "
                "with the user's message (a HumanMessage), which compactor keeps; pass "
                "start_on='human' or leave it out"
            )
    if end_on is not UNSET and end_on is not None and messages:
        last = messages[-1]
        if not _is(last, _types(end_on)):
            raise ValueError(
                f"end_on={_names(end_on)}: the history ends with a {type(last).__name__}, "
                "and compactor never drops the newest messages (the agent's open turn); "
                "leave end_on out"
            )


def check_after(out: Sequence[BaseMessage], start_on: Any) -> None:
    """Checks that ``out`` starts, after its system messages, on ``start_on``.

    Raises:
        ValueError: it does not (the input itself started otherwise).
    """
    if start_on is UNSET or start_on is None:
        return
    first = next((m for m in out if not isinstance(m, SystemMessage)), None)
    if first is not None and not _is(first, _types(start_on)):
        raise ValueError(
            f"start_on={_names(start_on)}: the history starts with a {type(first).__name__} "
            "that compactor keeps; it cannot start on another type"
        )
