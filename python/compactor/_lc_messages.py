"""LangChain messages <-> Anthropic Messages request bodies, for the LangChain adapter.

``to_anthropic`` renders each message with a tag (its index in the input list) so that
``from_compacted`` can tell, after compaction, which input message each output message is:
an output message equal to the input's rendering *is* the input message (the same object,
``additional_kwargs``, ``id`` and ``response_metadata`` included); an edited one is a copy of
the input message with the new content (every other field kept); an untagged one is new (the
digest of dropped turns).

Mapping (Anthropic Messages API):
- leading ``SystemMessage``\\ s -> top-level ``system`` (a later one is an error: Anthropic has
  one system prompt);
- ``HumanMessage`` -> ``user`` message, content as given (string or blocks);
- ``AIMessage`` -> ``assistant`` message: its content blocks (string content -> one text block),
  then a ``tool_use`` block for each ``tool_calls`` entry whose id is not already a
  ``tool_use`` block of the content (ChatAnthropic messages carry both);
- consecutive ``ToolMessage``\\ s -> one ``user`` message of ``tool_result`` blocks (the API wants
  all results of one assistant turn in the next message), ``status="error"`` ->
  ``is_error: true``.
"""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .errors import FormatError

TAG = "__lc_index"


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [{"type": "text", "text": b} if isinstance(b, str) else b for b in content]


def _ai(m: AIMessage) -> tuple[dict[str, Any], set[str]]:
    blocks = _blocks(m.content)
    have = {b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"}
    added: set[str] = set()
    for call in m.tool_calls:
        if call.get("id") in have:
            continue
        blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["args"]})
        added.add(call["id"])
    if isinstance(m.content, str) and not added:
        return {"role": "assistant", "content": m.content}, added
    return {"role": "assistant", "content": blocks}, added


def _tool_result(m: ToolMessage) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
    if m.status == "error":
        block["is_error"] = True
    return block


class Rendering:
    """An Anthropic body made of LangChain messages, and what is needed to map back."""

    def __init__(self, messages: Sequence[BaseMessage]):
        self.messages = list(messages)
        self.system: list[SystemMessage] = []
        self.parts: dict[int, Any] = {}  # index -> its rendering (a message, or a tool_result block)
        self.added: dict[int, set[str]] = {}  # AIMessage index -> tool_use ids made from tool_calls
        out: list[dict[str, Any]] = []
        system_blocks: list[Any] = []
        started = False
        for i, m in enumerate(self.messages):
            if isinstance(m, SystemMessage):
                if started:
                    raise FormatError(
                        f"messages[{i}]: a SystemMessage after the first conversation message "
                        "(Anthropic takes one system prompt, before the conversation)",
                        path=f"messages[{i}]",
                    )
                self.system.append(m)
                system_blocks.extend(_blocks(m.content))
                continue
            started = True
            if isinstance(m, ToolMessage):
                block = _tool_result(m)
                self.parts[i] = dict(block)
                block[TAG] = i
                if out and out[-1].get("_tools"):
                    out[-1]["content"].append(block)
                else:
                    out.append({"role": "user", "content": [block], "_tools": True})
                continue
            if isinstance(m, AIMessage):
                rendered, added = _ai(m)
                self.added[i] = added
            elif isinstance(m, HumanMessage) or m.type == "human":
                rendered = {"role": "user", "content": m.content}
            else:
                raise FormatError(
                    f"messages[{i}]: a {type(m).__name__} has no place in an Anthropic request",
                    path=f"messages[{i}]",
                )
            self.parts[i] = rendered
            out.append({**rendered, TAG: i})
        for m in out:
            m.pop("_tools", None)
        self.body: dict[str, Any] = {"messages": out}
        if system_blocks:
            self.body["system"] = system_blocks

    def back(self, body: dict[str, Any]) -> list[BaseMessage]:
        """The LangChain messages of a compacted rendering (leading system messages first)."""
        result: list[BaseMessage] = list(self.system)
        for m in body.get("messages", []):
            tag = m.get(TAG)
            content = m.get("content")
            blocks = content if isinstance(content, list) else None
            if tag is None and m.get("role") == "user" and blocks and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks
            ):
                result.extend(self._tool_results(blocks))
                continue
            plain = {k: v for k, v in m.items() if k != TAG}
            if tag is None:
                result.append(_new(plain))
            elif plain == self.parts.get(tag):
                result.append(self.messages[tag])
            else:
                result.append(self._edited(tag, plain))
        return result

    def _tool_results(self, blocks: list[Any]) -> list[BaseMessage]:
        out: list[BaseMessage] = []
        rest: list[Any] = []
        for b in blocks:
            tag = b.get(TAG) if isinstance(b, dict) else None
            if tag is None:
                rest.append(b)
                continue
            plain = {k: v for k, v in b.items() if k != TAG}
            original = self.messages[tag]
            if plain == self.parts.get(tag):
                out.append(original)
            else:
                out.append(
                    original.model_copy(
                        update={
                            "content": plain.get("content", ""),
                            "status": "error" if plain.get("is_error") else original.status,
                        }
                    )
                )
        if rest:
            out.append(HumanMessage(content=rest))
        return out

    def _edited(self, tag: int, m: dict[str, Any]) -> BaseMessage:
        original = self.messages[tag]
        content = m.get("content")
        if not isinstance(original, AIMessage):
            return original.model_copy(update={"content": content})
        blocks = _blocks(content) if isinstance(content, str) else list(content or [])
        added = self.added.get(tag, set())
        by_id = {c.get("id"): c for c in original.tool_calls}
        calls = []
        for b in blocks:
            if isinstance(b, dict) and b.get("type") == "tool_use":
                call = by_id.get(b.get("id"))
                if call is not None and call.get("args") == b.get("input"):
                    calls.append(call)
                else:
                    calls.append({"type": "tool_call", "id": b.get("id"), "name": b.get("name"), "args": b.get("input")})
        if isinstance(original.content, str):
            new_content: Any = "\n".join(
                b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"
            )
        else:
            new_content = [
                b for b in blocks
                if not (isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id") in added)
            ]
        return original.model_copy(update={"content": new_content, "tool_calls": calls})


def _new(m: dict[str, Any]) -> BaseMessage:
    """A message compaction made (the digest of dropped turns)."""
    content = m.get("content", "")
    if m.get("role") == "assistant":
        return AIMessage(content=content)
    return HumanMessage(content=content)


def from_anthropic(body: dict[str, Any] | list[Any]) -> list[BaseMessage]:
    """LangChain messages of an Anthropic request body (or bare message list), as ChatAnthropic
    would hold them: ``system`` -> a ``SystemMessage``; assistant -> ``AIMessage`` with the
    content blocks and ``tool_calls``; each ``tool_result`` -> a ``ToolMessage`` (``is_error`` ->
    ``status="error"``); other user blocks -> a ``HumanMessage`` after them."""
    messages = body if isinstance(body, list) else body.get("messages", [])
    out: list[BaseMessage] = []
    system = None if isinstance(body, list) else body.get("system")
    if system:
        out.append(SystemMessage(content=system if isinstance(system, str) else list(system)))
    for m in messages:
        content = m.get("content")
        if m.get("role") == "assistant":
            blocks = content if isinstance(content, list) else None
            calls = [
                {"type": "tool_call", "id": b["id"], "name": b["name"], "args": b.get("input", {})}
                for b in blocks or []
                if isinstance(b, dict) and b.get("type") == "tool_use"
            ]
            out.append(AIMessage(content=content if content is not None else "", tool_calls=calls))
            continue
        if not isinstance(content, list):
            out.append(HumanMessage(content=content if content is not None else ""))
            continue
        rest = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                out.append(
                    ToolMessage(
                        content=b.get("content", ""),
                        tool_call_id=b["tool_use_id"],
                        status="error" if b.get("is_error") else "success",
                    )
                )
            else:
                rest.append(b)
        if rest:
            out.append(HumanMessage(content=rest))
    return out


def to_anthropic(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """The Anthropic request body of LangChain messages, as compaction sees it (without the
    index tags)."""
    return strip_tags(Rendering(messages).body)


def strip_tags(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without the index tags (on messages and on tool_result blocks)."""
    out = dict(body)
    out["messages"] = [_untag(m) for m in body.get("messages", [])]
    return out


def _untag(m: dict[str, Any]) -> dict[str, Any]:
    m = {k: v for k, v in m.items() if k != TAG}
    if isinstance(m.get("content"), list):
        m["content"] = [
            {k: v for k, v in b.items() if k != TAG} if isinstance(b, dict) else b for b in m["content"]
        ]
    return m
