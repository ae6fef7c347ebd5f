"""compactor for LangChain: a drop-in ``trim_messages`` and an agent middleware.

``trim_messages(messages, max_tokens=...)`` takes and returns LangChain ``BaseMessage`` lists
(``AIMessage`` with ``tool_calls`` or Anthropic content blocks, ``ToolMessage`` with
``status``, ``SystemMessage``) and can replace ``langchain_core.messages.trim_messages`` in one
line. Unlike it, the result is always a request the provider accepts (no orphan
``ToolMessage``, no assistant turn whose calls lost their results, never empty), failed tool
results are never dropped without a trace, and the messages kept are the input's own objects
(``additional_kwargs``, ``id``, ``response_metadata`` and unknown fields untouched); an edited
message (a cleared or shortened tool result) is a copy with only its content changed.

``CompactorMiddleware`` (LangChain v1 agents, ``langchain>=1``; ``pip install
'compactor[langchain]'`` installs both) compacts what the model sees on each call while the
agent's state keeps the whole history.

Both compact to about 60% of ``max_tokens`` once a history is over 80% of it (the pipeline's
``budget.target`` and ``budget.trigger``), so that many turns fit before the next compaction.

Token figures are compactor's (``o200k_base`` by default) for the whole request (system
prompt included), not the provider's count.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from typing import Any, Callable, Sequence

from langchain_core.messages import BaseMessage, SystemMessage, convert_to_messages

from . import Compactor
from ._lc_messages import Rendering, from_anthropic, to_anthropic
from ._lc_options import UNSET, check_after, check_before, counter_of, preset_of

__all__ = ["trim_messages", "compact_messages", "from_anthropic", "to_anthropic", "CompactorMiddleware"]

_shared: dict[str, Compactor] = {}
_shared_lock = threading.Lock()


def _compactor_for(strategy: str) -> Compactor:
    with _shared_lock:
        c = _shared.get(strategy)
        if c is None:
            c = _shared[strategy] = Compactor(strategy=strategy)
        return c


def _check_max_tokens(max_tokens: Any) -> int:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise TypeError(f"max_tokens must be an int, not {type(max_tokens).__name__}")
    if max_tokens < 1:
        raise ValueError(
            f"max_tokens={max_tokens}: the number of tokens the messages may hold (system "
            "message included); it must be at least 1"
        )
    return max_tokens


def compact_messages(
    messages: Sequence[Any],
    max_tokens: int,
    *,
    compactor: Compactor | None = None,
    strategy: str = "default",
) -> tuple[list[BaseMessage], dict[str, Any]]:
    """Compacts LangChain messages to ``max_tokens`` and returns ``(messages, report)``.

    ``compactor``: the pipeline to use (keep one per agent); by default a process-wide one per
    ``strategy``, so its caches stay warm across calls.

    The target: under the trigger (``budget.trigger`` x ``max_tokens``, 0.8 by default) the
    input comes back unchanged; over it, the history is compacted to the target
    (``budget.target`` x ``max_tokens``, 0.6 by default: about 60% of ``max_tokens``), so that
    many turns fit before the next compaction and the compacted prefix stays the same for the
    provider's prompt cache. ``Compactor({"budget": {"trigger": 0.95, "target": 0.9}})`` fills
    closer to ``max_tokens``; ``compactor.budget(max_tokens)`` gives ``(limit, target)``.

    Raises:
        ValueError: ``max_tokens`` below 1.
        compactor.InvalidInputError: the history itself breaks the provider's rules
            (``.violations``, ``.message_index``).
        compactor.FormatError: a message has no place in a request (a ``SystemMessage`` after
            the conversation started); ``.message_index`` says which.
    """
    _check_max_tokens(max_tokens)
    c = compactor if compactor is not None else _compactor_for(strategy)
    messages, rendering = _render(messages)
    result = c.compact(rendering.body, budget=max_tokens, format="anthropic")
    if not result.changed:
        return list(messages), result.report
    return rendering.back(result.body), result.report


def _render(messages: Sequence[Any]) -> tuple[Sequence[BaseMessage], Rendering]:
    if not all(isinstance(m, BaseMessage) for m in messages):
        # Message-like values (dicts, ("role", "text") tuples), as LangChain's trim_messages takes.
        messages = convert_to_messages(messages)
    return messages, Rendering(messages)


def trim_messages(
    messages: Sequence[Any],
    max_tokens: int | None = None,
    *,
    compactor: Compactor | None = None,
    strategy: str = "last",
    token_counter: Any = UNSET,
    include_system: Any = UNSET,
    start_on: Any = UNSET,
    end_on: Any = UNSET,
    allow_partial: Any = UNSET,
    text_splitter: Any = UNSET,
) -> list[BaseMessage]:
    """Drop-in for ``langchain_core.messages.trim_messages``: the messages compacted to
    ``max_tokens``.

    It returns about 60% of ``max_tokens``, not up to ``max_tokens``: a history under 80% of
    it comes back unchanged, a longer one is compacted to 60% (``budget.trigger`` and
    ``budget.target`` of the pipeline, see :func:`compact_messages`), so the next turns fit
    without compacting again.

    LangChain's keywords are honoured or refused by name (a ``ValueError`` saying what
    compactor does instead), never ignored:

    - ``token_counter`` (a callable over the message list or over one message, a chat model,
      ``"approximate"``): honoured; ``max_tokens`` is in its units. The budget is scaled by
      the ratio of its count to compactor's on the input, and the result counted again with
      it (up to two more passes when still over). Left out: compactor's own count of the
      whole request (``o200k_base`` by default).
    - ``strategy``: ``"last"`` (the default) is what compactor does; ``"first"`` is refused;
      another name is a compactor preset (``truncate``, ``microcompact``, a file).
    - ``include_system=True``, ``allow_partial=True``, ``start_on="human"``: what compactor
      does (the system message stays, oversized results are cut to head and tail, the
      history starts on the user's message); ``False`` / other types are refused.
    - ``end_on``: honoured when the input ends on that type, refused otherwise (the newest
      messages are never dropped). ``text_splitter``: refused.

    When nothing more can be cut without breaking the request (the newest turn alone is over
    ``max_tokens``), the result is over ``max_tokens`` and a ``UserWarning`` says so.

    See :func:`compact_messages` for ``compactor`` and the errors.
    """
    if max_tokens is None:
        raise TypeError("trim_messages() needs max_tokens")
    _check_max_tokens(max_tokens)
    preset = preset_of(strategy)
    messages, rendering = _render(messages)
    check_before(messages, include_system=include_system, start_on=start_on, end_on=end_on,
                 allow_partial=allow_partial, text_splitter=text_splitter)
    c = compactor if compactor is not None else _compactor_for(preset)
    count = counter_of(token_counter) if token_counter is not UNSET else None
    budget = max_tokens
    if count is not None:
        theirs = count(list(messages))
        ours = c.count(rendering.body, format="anthropic")["model_tokens"]["total"]
        if theirs > 0 and ours > 0:
            budget = max(1, int(max_tokens * ours / theirs))
    for _ in range(3):
        result = c.compact(rendering.body, budget=budget, format="anthropic")
        out = rendering.back(result.body) if result.changed else list(messages)
        used = count(out) if count is not None else result.report["tokens_after"]
        if used <= max_tokens or result.report["status"] == "over_budget" or count is None:
            break
        # Their count of the output is over: shrink compactor's budget by what it is over.
        budget = max(1, int(budget * max_tokens / used * 0.95))
    if used > max_tokens:
        warnings.warn(
            f"trim_messages: {used} tokens kept, over max_tokens={max_tokens}: nothing more "
            "can be cut without breaking the request (the newest turn and the system "
            "message stay)",
            UserWarning,
            stacklevel=2,
        )
    check_after(out, start_on)
    return out


def _middleware_class() -> type:
    try:
        from langchain.agents.middleware import AgentMiddleware
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "CompactorMiddleware needs the `langchain` package (>= 1.0): "
            "pip install 'compactor[langchain]'"
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
            self.max_tokens = _check_max_tokens(max_tokens)
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
