"""The LangChain adapter on hand-made histories and inside a real LangChain v1 agent."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

import compactor
from compactor.langchain import compact_messages, from_anthropic, to_anthropic, trim_messages

from conftest import corpus_sessions


def history(rounds: int) -> list:
    msgs: list = [SystemMessage("You are a coding agent."), HumanMessage("fix the build")]
    for i in range(rounds):
        msgs.append(AIMessage(
            content=f"step {i}",
            tool_calls=[{"id": f"c{i}", "name": "bash", "args": {"cmd": f"make part{i}"}}],
            additional_kwargs={"vendor": {"trace": i}},
            response_metadata={"model_name": "m"},
            id=f"ai{i}",
        ))
        msgs.append(ToolMessage(content=f"out {i}\n" * 300, tool_call_id=f"c{i}",
                                status="error" if i == 2 else "success", id=f"tool{i}"))
    msgs.append(AIMessage("all done", id="final"))
    msgs.append(HumanMessage("now run the tests", id="last"))
    return msgs


def test_under_budget_returns_the_same_objects():
    msgs = history(2)
    out = trim_messages(msgs, max_tokens=100_000)
    assert all(a is b for a, b in zip(out, msgs)) and len(out) == len(msgs)


def test_trimmed_history_is_valid_keeps_system_last_turn_and_the_failure():
    msgs = history(14)
    out, report = compact_messages(msgs, 3_000)
    assert report["status"] == "compacted" and report["tokens_after"] <= 3_000
    assert out[0] is msgs[0] and out[-1] is msgs[-1] and out[-2] is msgs[-2]
    assert compactor.validate(to_anthropic(out)) == []
    # Every ToolMessage kept answers an AIMessage kept just before it.
    calls = {c["id"] for m in out if isinstance(m, AIMessage) for c in m.tool_calls}
    assert all(m.tool_call_id in calls for m in out if isinstance(m, ToolMessage))
    # The failed call c2: still an error ToolMessage, or named as an error in the digest.
    failed = [m for m in out if isinstance(m, ToolMessage) and m.tool_call_id == "c2"]
    text = "\n".join(str(m.content) for m in out)
    named = [line for line in text.splitlines() if "c2" in line and "failed" in line]
    assert (failed and failed[0].status == "error") or named


def test_edited_messages_keep_every_field_but_content():
    msgs = history(14)
    out, _ = compact_messages(msgs, 3_000)
    originals = {m.id: m for m in msgs}
    edited = [m for m in out if m.id in originals and m is not originals[m.id]]
    assert edited, "at 3k tokens some tool result is shortened or cleared"
    for m in edited:
        o = originals[m.id]
        assert m.content != o.content
        assert m.additional_kwargs == o.additional_kwargs and m.response_metadata == o.response_metadata
        if isinstance(m, ToolMessage):
            assert (m.tool_call_id, m.status) == (o.tool_call_id, o.status)


def test_anthropic_content_blocks_and_tool_calls_are_not_doubled():
    ai = AIMessage(
        content=[{"type": "text", "text": "reading"},
                 {"type": "tool_use", "id": "t1", "name": "read", "input": {"p": "a"}}],
        tool_calls=[{"id": "t1", "name": "read", "args": {"p": "a"}}],
    )
    body = to_anthropic([HumanMessage("go"), ai, ToolMessage("x", tool_call_id="t1")])
    assert [b["type"] for b in body["messages"][1]["content"]] == ["text", "tool_use"]
    assert body["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}


def test_parallel_tool_messages_become_one_user_turn_and_come_back_split():
    ai = AIMessage("", tool_calls=[{"id": "a", "name": "x", "args": {}}, {"id": "b", "name": "y", "args": {}}])
    msgs = [HumanMessage("go"), ai, ToolMessage("1", tool_call_id="a"), ToolMessage("2", tool_call_id="b", status="error")]
    body = to_anthropic(msgs)
    assert len(body["messages"]) == 3
    assert body["messages"][2]["content"][1]["is_error"] is True
    back = from_anthropic(body)
    assert [type(m).__name__ for m in back] == ["HumanMessage", "AIMessage", "ToolMessage", "ToolMessage"]
    assert back[3].status == "error"


def test_message_like_values_are_accepted_as_langchain_does():
    out = trim_messages([("system", "be brief"), ("human", "hi"), {"role": "assistant", "content": "hello"}],
                        max_tokens=1000)
    assert [(type(m).__name__, m.content) for m in out] == [
        ("SystemMessage", "be brief"), ("HumanMessage", "hi"), ("AIMessage", "hello")]


def test_a_late_system_message_is_a_located_error():
    with pytest.raises(compactor.FormatError) as info:
        trim_messages([HumanMessage("a"), SystemMessage("late")], max_tokens=1000)
    assert info.value.message_index == 1


def test_an_orphan_tool_message_is_a_located_invalid_input():
    with pytest.raises(compactor.InvalidInputError) as info:
        trim_messages([HumanMessage("a"), ToolMessage("x", tool_call_id="nope")], max_tokens=1000)
    assert info.value.violations[0].rule == "orphan_result"


class RecordingModel(GenericFakeChatModel):
    """A fake chat model that records the messages of each call."""

    seen: list = []

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any):
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def test_middleware_compacts_the_model_input_and_the_state_keeps_everything():
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent

    from compactor.langchain import CompactorMiddleware

    session = next(p for p in corpus_sessions() if "subagent" in p.name)
    msgs = [m for m in from_anthropic(compactor.load(session).body) if not isinstance(m, SystemMessage)]
    msgs.append(HumanMessage("what next?"))
    model = RecordingModel(messages=iter([AIMessage("next: tests")]))
    model.seen = []
    middleware = CompactorMiddleware(8_000)
    agent = create_agent(model, tools=[], system_prompt="You are helpful.", middleware=[middleware])
    state = agent.invoke({"messages": msgs})

    assert len(state["messages"]) == len(msgs) + 1
    assert state["messages"][-1].content == "next: tests"
    (sent,) = model.seen
    assert isinstance(sent[0], SystemMessage) and sent[0].content == "You are helpful."
    assert len(sent) - 1 < len(msgs)
    assert middleware.last_report["status"] == "compacted"
    assert compactor.count(to_anthropic(sent))["total"] <= 8_000
    assert compactor.validate(to_anthropic(sent)) == []
