"""Compactor.recall: every id a compaction writes gives back the original as Python values;
RecallError says why not (evicted, unknown, malformed)."""

from __future__ import annotations

import pickle

import pytest

import compactor


def history(rounds: int) -> dict:
    messages = [{"role": "user", "content": "Fix the failing test in src/lib.rs"}]
    for i in range(rounds):
        tid = f"toolu_{i:03}"
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": tid, "name": "Read", "input": {"path": f"src/f{i}.rs"}}]})
        body = "".join(f"fn f{i}_{k}() {{ /* line {k} */ }}\n" for k in range(40))
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": body, "x_extra": 1.50}]})
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": messages}


def test_a_cleared_result_recalls_to_the_input_block():
    body = history(20)
    c = compactor.Compactor(strategy="microcompact")
    out = c.compact(body, budget=4000)
    refs = out.report["recall"]
    assert len(refs) >= 10
    for r in refs:
        assert r["kind"] == "block"
        got = c.recall(r["id"])
        assert got["id"] == r["id"]
        assert got["kind"] == "block"
        i = r["message"]
        assert got["original"] == body["messages"][i]["content"][0]
        assert f"recall {r['id']}" in out.body["messages"][i]["content"][0]["content"]


def test_recall_errors_have_a_kind():
    c = compactor.Compactor(strategy="microcompact")
    with pytest.raises(compactor.RecallError) as e:
        c.recall("rc_" + "0" * 32)
    assert e.value.kind == "unknown"
    assert isinstance(e.value, compactor.CompactorError)
    assert isinstance(e.value, LookupError)
    with pytest.raises(compactor.RecallError) as e:
        c.recall("nope")
    assert e.value.kind == "malformed"
    again = pickle.loads(pickle.dumps(e.value))
    assert (again.kind, again.id) == ("malformed", "nope")


def test_a_small_store_says_evicted():
    c = compactor.Compactor({"recall": {"max_bytes": 3000}}, strategy="microcompact")
    refs = c.compact(history(20), budget=4000).report["recall"]
    kinds = []
    for r in refs:
        try:
            c.recall(r["id"])
            kinds.append("ok")
        except compactor.RecallError as e:
            kinds.append(e.kind)
    assert "unknown" not in kinds
    assert kinds.count("evicted") >= len(refs) - 2
