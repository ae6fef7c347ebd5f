"""compactor for LangChain: a drop-in ``trim_messages`` and an agent middleware.

``trim_messages(messages, max_tokens=...)`` takes and returns LangChain ``BaseMessage`` lists
(``AIMessage`` with ``tool_calls`` or Anthropic content blocks, ``ToolMessage`` with
``status``, ``SystemMessage``) and can replace ``langchain_core.messages.trim_messages`` in one
line. Unlike it, the result is always a request the provider accepts (no orphan
``ToolMessage``, no assistant turn whose calls lost their results, never empty), failed tool
results are never dropped without a trace, and the messages kept are the input's own objects
(``additional_kwargs``, ``id``, ``response_metadata`` and unknown fields untouched); an edited
message (a cleared or shortened tool result) is a copy with only its content changed.

``CompactorMiddleware`` (LangChain v1 agents, ``langchain>=1``) compacts what the model sees on
each call while the agent's state keeps the whole history.

Token figures are compactor's (``o200k_base`` by default) for the whole request (system
prompt included), not the provider's count.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Sequence

from langchain_core.messages import BaseMessage, SystemMessage, convert_to_messages

from . import Compactor
from ._lc_messages import Rendering, from_anthropic, to_anthropic

__all__ = ["trim_messages", "compact_messages", "from_anthropic", "to_anthropic", "CompactorMiddleware"]

_shared: dict[str, Compactor] = {}
_shared_lock = threading.Lock()


def _compactor_for(strategy: str) -> Compactor:
    with _shared_lock:
        c = _shared.get(strategy)
        if c is None:
            c = _shared[strategy] = Compactor(strategy=strategy)
        return c


def compact_messages(
    messages: Sequence[Any],
    max_tokens: int,
    *,
    compactor: Compactor | None = None,
    strategy: str = "default",
) -> tuple[list[BaseMessage], dict[str, Any]]:
    """Compacts LangChain messages to ``max_tokens`` and returns ``(messages, report)``.

    ``compactor``: the pipeline to use (keep one per agent); by default a process-wide one per
    ``strategy``, so its caches stay warm across calls. Under the trigger
    (``budget.trigger`` x ``max_tokens``, 0.8 by default) the input comes back unchanged; over
    it, the history is compacted to the target (0.6 x ``max_tokens`` by default).

    Raises:
        compactor.InvalidInputError: the history itself breaks the provider's rules
            (``.violations``, ``.message_index``).
        compactor.FormatError: a message has no place in a request (a ``SystemMessage`` after
            the conversation started); ``.message_index`` says which.
    """
    c = compactor if compactor is not None else _compactor_for(strategy)
    if not all(isinstance(m, BaseMessage) for m in messages):
        # Message-like values (dicts, ("role", "text") tuples), as LangChain's trim_messages takes.
        messages = convert_to_messages(messages)
    rendering = Rendering(messages)
    result = c.compact(rendering.body, budget=max_tokens, format="anthropic")
    if not result.changed:
        return list(messages), result.report
    return rendering.back(result.body), result.report


def trim_messages(
    messages: Sequence[BaseMessage],
    max_tokens: int | None = None,
    *,
    compactor: Compactor | None = None,
    strategy: str = "default",
    **langchain_options: Any,
) -> list[BaseMessage]:
    """Drop-in for ``langchain_core.messages.trim_messages``: the messages compacted to
    ``max_tokens``.

    LangChain's own keywords (``token_counter``, ``strategy="last"``, ``start_on``, ``end_on``,
    ``include_system``, ``allow_partial``, ``text_splitter``) are accepted so the call site
    changes in one line, and have no effect: tokens are counted by compactor, the system
    message is always kept, cuts are only made where the provider accepts them, and old tool
    results are cleared or shortened before whole turns are dropped. ``strategy`` here names a
    compactor preset when it is not LangChain's ``"first"``/``"last"``.

    See :func:`compact_messages` for ``compactor`` and the errors.
    """
    if max_tokens is None:
        raise TypeError("trim_messages() needs max_tokens")
    preset = "default" if strategy in ("first", "last") else strategy
    return compact_messages(messages, max_tokens, compactor=compactor, strategy=preset)[0]


def _middleware_class() -> type:
    try:
        from langchain.agents.middleware import AgentMiddleware
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "CompactorMiddleware needs the `langchain` package (>= 1.0): pip install langchain"
        ) from e

    class CompactorMiddleware(AgentMiddleware):
        """LangChain v1 agent middleware: compacts the messages of each model call to
        ``max_tokens`` (system prompt included), while the agent's state keeps the full
        history.

        It wraps the model call (``wrap_model_call``) rather than using ``before_model``: a
        ``before_model`` hook returns a state update, and the state's ``add_messages``
        reducer would then rewrite the history itself.

        >>> from langchain.agents import create_agent
        >>> agent = create_agent(model, tools, middleware=[CompactorMiddleware(100_000)])  # doctest: +SKIP
        """

        def __init__(self, max_tokens: int, *, compactor: Compactor | None = None, strategy: str = "default"):
            super().__init__()
            self.max_tokens = max_tokens
            self.compactor = compactor if compactor is not None else Compactor(strategy=strategy)
            self.last_report: dict[str, Any] | None = None

        def _compacted(self, request: Any) -> Any:
            system = request.system_message
            head = [system] if system is not None else []
            out, report = compact_messages(head + list(request.messages), self.max_tokens, compactor=self.compactor)
            self.last_report = report
            if not report.get("messages_after", 0) or out[len(head):] == list(request.messages):
                return request
            return request.override(messages=[m for m in out[len(head):] if not isinstance(m, SystemMessage)])

        def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            return handler(self._compacted(request))

        async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            return await handler(await asyncio.to_thread(self._compacted, request))

    return CompactorMiddleware


def __getattr__(name: str) -> Any:
    if name == "CompactorMiddleware":
        cls = _middleware_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
