"""The Python API: shapes in and out, reports, counts, validation, conversion, errors."""

from __future__ import annotations

import math
import pathlib
import pickle
import tomllib

import pytest

import compactor

PAIR = [
    {"role": "user", "content": "list files"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.rs"}]},
]


def shipped_rule(pattern: str) -> dict:
    """The `[tokens.models]` rule of the built-in configuration (config/compactor.toml)."""
    path = pathlib.Path(__file__).resolve().parents[2] / "config" / "compactor.toml"
    return tomllib.loads(path.read_text())["tokens"]["models"][pattern]


def long_session(turns: int) -> list[dict]:
    """A session of ``turns`` tool rounds with large results; round 1 fails."""
    messages = [{"role": "user", "content": "fix the build"}]
    for i in range(turns):
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"step {i}"},
            {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"make part{i}"}},
        ]})
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"line {i}\n" * 400}
        if i == 1:
            result["is_error"] = True
        messages.append({"role": "user", "content": [result]})
    messages.append({"role": "assistant", "content": "done"})
    messages.append({"role": "user", "content": "thanks, now run the tests"})
    return messages


def test_under_the_trigger_the_input_object_comes_back():
    c = compactor.Compactor()
    result = c.compact(PAIR, budget=10_000)
    assert result.body is PAIR
    assert result.changed is False
    assert result.status == "unchanged"
    body, report = result
    assert report["tokens_before"] == report["tokens_after"] == compactor.count(PAIR)["total"]


def test_a_request_dict_comes_back_as_a_dict_with_its_other_fields():
    body = {"model": "claude-x", "max_tokens": 100, "system": "be brief", "messages": long_session(12),
            "metadata": {"user_id": "u"}}
    result = compactor.Compactor().compact(body, budget=3_000)
    assert result.changed and result.status == "compacted"
    assert sorted(result.body) == ["max_tokens", "messages", "metadata", "model", "system"]
    assert result.body["system"] == "be brief" and result.body["metadata"] == {"user_id": "u"}
    assert compactor.validate(result.body) == []
    # The budget is in the model's tokens (claude-*: calibrated); `count` gives o200k tokens,
    # the report's counted_after is that figure plus the rule's per-call framing,
    # ceil(tool_call / ratio) counted tokens per tool_use block (config/compactor.toml).
    rule = shipped_rule("claude-*")
    framing = math.ceil(rule.get("tool_call", 0) / rule["ratio"])
    calls = sum(1 for m in result.body["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_use")
    assert calls > 0
    assert compactor.count(result.body)["total"] + calls * framing == result.report["counted_after"]
    assert result.tokens_after <= 3_000
    assert body["messages"] == long_session(12), "the input is never mutated"


def test_a_bare_list_comes_back_as_a_list_and_the_failure_stays_visible():
    result = compactor.Compactor().compact(long_session(12), budget=3_000)
    assert isinstance(result.body, list)
    flagged = [b for m in result.body if isinstance(m["content"], list) for b in m["content"]
               if b.get("type") == "tool_result" and b.get("is_error")]
    digest = result.body[0]["content"]
    # Either the failed result is still there with its flag, or the digest names it as an error.
    assert [b["tool_use_id"] for b in flagged] == ["t1"] or "[failed t1] Bash" in digest


def test_openai_chat_is_read_and_written_as_openai_chat():
    chat = compactor.convert(long_session(12), to="openai-chat")
    assert chat[0] == {"role": "user", "content": "fix the build"}
    assert chat[1]["tool_calls"][0]["function"]["name"] == "Bash"
    result = compactor.compact(chat, budget=3_000, format="openai-chat")
    assert result.report["format"] == "openai-chat"
    assert all("role" in m for m in result.body) and any(m["role"] == "tool" for m in result.body)
    assert compactor.validate(result.body, format="openai-chat") == []


def gemini_session(steps: int) -> dict:
    """A Gemini CLI-like generateContent body: one user text turn, then call / response turns;
    step 1 fails ({"error": ...})."""
    contents = [{"role": "user", "parts": [{"text": "<session_context>cwd /w</session_context>"},
                                           {"text": "fix the build"}]}]
    for i in range(steps):
        contents.append({"role": "model", "parts": [
            {"functionCall": {"id": f"fc{i}", "name": "run_shell_command", "args": {"command": f"make part{i}"}},
             "thoughtSignature": f"sig{i}"}]})
        response = {"error": "make: *** failed"} if i == 1 else {"output": f"line {i}\n" * 400}
        contents.append({"role": "user", "parts": [
            {"functionResponse": {"id": f"fc{i}", "name": "run_shell_command", "response": response}}]})
    return {"contents": contents, "systemInstruction": {"parts": [{"text": "be brief"}]},
            "generationConfig": {"temperature": 1}}


def test_gemini_bodies_are_counted_and_compacted_as_gemini():
    body = gemini_session(12)
    counts = compactor.count(body)
    assert counts["message_count"] == 25
    result = compactor.compact(body, budget=3_000)
    assert result.report["format"] == "gemini"
    out = result.body
    assert out["contents"][0] == body["contents"][0]
    assert out["systemInstruction"] == body["systemInstruction"]
    # The newest response turn stays (its output may be shortened): the same call answered.
    last = out["contents"][-1]["parts"][0]["functionResponse"]
    assert (last["id"], last["name"]) == ("fc11", "run_shell_command")
    assert compactor.validate(out, format="gemini") == []
    kept = [p["functionResponse"] for c in out["contents"] for p in c["parts"] if "functionResponse" in p]
    assert any(r["id"] == "fc1" and "error" in r["response"] for r in kept) or "fc1" in str(out)


def test_the_compactor_keeps_its_memory_across_turns():
    c = compactor.Compactor()
    session = long_session(12)
    first = c.compact(session, budget=3_000)
    session = session + [{"role": "assistant", "content": "running"}, {"role": "user", "content": "and?"}]
    second = c.compact(session, budget=3_000)
    assert second.report["continued_from"] == len(session) - 2
    assert second.body[: len(first.body)] == first.body


def test_count_splits_the_total():
    counts = compactor.count({"system": "be brief", "messages": PAIR})
    assert counts["total"] == counts["system"] + counts["tools"] + counts["messages"]
    assert counts["message_count"] == 3
    # The system prompt is one figure: on top and under by_role["system"].
    assert counts["by_role"]["system"] == counts["system"] == compactor.count_text("be brief")
    assert sum(counts["by_role"].values()) == counts["system"] + counts["messages"]
    assert compactor.count_text("hello world") == 2
    assert compactor.count_text("hello world", tokenizer="cl100k_base") == 2


def test_validate_returns_typed_located_violations():
    bad = [{"role": "user", "content": "hi"},
           {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
           {"role": "user", "content": "no result"}]
    (v,) = compactor.validate(bad)
    assert (v.rule, v.path, v.message, v.block) == ("missing_results", "messages[1]", 1, None)
    assert v.fields["ids"] == ["t1"]
    assert str(v).startswith("messages[1]: ")
    assert compactor.validate(PAIR) == []


def test_an_open_tail_is_accepted_unless_strict():
    open_tail = PAIR[:2]
    assert compactor.validate(open_tail) == []
    assert [v.rule for v in compactor.validate(open_tail, strict=True)] == ["missing_results"]


def test_invalid_input_raises_with_the_violations():
    orphan = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "gone", "content": "x"}]}]
    with pytest.raises(compactor.InvalidInputError) as info:
        compactor.compact(orphan)
    e = info.value
    assert isinstance(e, ValueError) and isinstance(e, compactor.CompactorError)
    assert (e.path, e.message_index) == ("messages[0].content[0]", 0)
    assert e.violations[0].rule == "orphan_result" and e.violations[0].fields["id"] == "gone"
    again = pickle.loads(pickle.dumps(e))
    assert again.violations == e.violations and str(again) == str(e)


def test_malformed_input_raises_format_error_with_its_path():
    with pytest.raises(compactor.FormatError) as info:
        compactor.compact({"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": 5}]})
    assert info.value.path == "messages[1].content"
    assert info.value.message_index == 1
    with pytest.raises(compactor.FormatError) as info:
        compactor.validate("not a request")
    assert info.value.path is None


def test_values_without_json_form_are_a_type_error():
    with pytest.raises(TypeError):
        compactor.compact([{"role": "user", "content": object()}])


def test_config_dict_and_errors():
    c = compactor.Compactor({"budget": {"tokens": 3_000}})
    assert c.budget() == (3_000, 1_800)
    assert c.compact(long_session(12)).tokens_after <= 3_000
    with pytest.raises(compactor.ConfigError) as info:
        compactor.Compactor({"budget": {"trigger": 2}})
    assert info.value.key == "budget.trigger"
    with pytest.raises(compactor.ConfigError) as info:
        compactor.Compactor({"budgte": {}})
    assert "budgte" in str(info.value)
    with pytest.raises(compactor.ConfigError) as info:
        compactor.Compactor(strategy="no-such-preset")
    assert info.value.key == "strategy"
    with pytest.raises(TypeError):
        compactor.Compactor(42)


def test_config_file_path(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[budget]\ntokens = 5000\n")
    assert compactor.Compactor(path).budget() == (5_000, 3_000)
    assert compactor.Compactor(str(path), strategy="truncate").strategy == "truncate"


def test_load_reads_bytes_and_reports_line_errors():
    loaded = compactor.load(b'{"messages": [{"role": "user", "content": "hi"}]}')
    assert (loaded.format, loaded.source) == ("anthropic", "request")
    with pytest.raises(compactor.FormatError):
        compactor.load(b"{not json")
    with pytest.raises(OSError):
        compactor.load("/nonexistent/file.json")


def test_one_compactor_serves_threads_with_the_same_results():
    from concurrent.futures import ThreadPoolExecutor

    c = compactor.Compactor({"policy": {"remember": False}})
    sessions = [long_session(n) for n in (10, 12, 14, 16)]
    alone = [compactor.Compactor({"policy": {"remember": False}}).compact(s, budget=3_000).body for s in sessions]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda s: c.compact(s, budget=3_000).body, sessions * 2))
    assert together == alone * 2


def test_integers_past_64_bits_and_floats_round_trip_exactly():
    body = {
        "model": "claude-x",
        "max_tokens": 100,
        "metadata": {"big": 2**70 + 1, "neg": -(2**65), "f": 0.1},
        "messages": [{"role": "user", "content": "hi"}],
    }
    result = compactor.Compactor().compact(body, budget=3_000)
    assert result.body["metadata"] == {"big": 2**70 + 1, "neg": -(2**65), "f": 0.1}
    assert isinstance(result.body["max_tokens"], int)
