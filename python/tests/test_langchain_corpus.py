"""The LangChain adapter on every Claude Code session of the corpus at 50k/20k/8k tokens:
the output passes the independent checker against its input, is under budget, and the
messages it keeps are the input's own objects unless compaction edited them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

import compactor
from compactor.langchain import compact_messages, from_anthropic, to_anthropic, trim_messages

from conftest import CORPUS, corpus_sessions

BUDGETS = [50_000, 20_000, 8_000]
SESSIONS = corpus_sessions()


def test_the_corpus_is_there():
    assert SESSIONS, f"no cc_*.jsonl under {CORPUS} (the corpus is read from ../shared/corpus)"


@pytest.fixture(scope="module")
def shared_compactor():
    return compactor.Compactor()


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("session", SESSIONS, ids=lambda p: p.stem)
def test_adapter_output_is_valid_under_budget_and_keeps_messages(session, budget, checker, tmp_path, shared_compactor):
    loaded = compactor.load(session)
    assert loaded.source == "claude-code"
    messages = from_anthropic(loaded.body)
    for i, m in enumerate(messages):
        m.id = f"m{i}"
        m.additional_kwargs["x_unknown"] = {"i": i}
    out, report = compact_messages(messages, budget, compactor=shared_compactor)

    body_in = to_anthropic(messages)
    body_out = to_anthropic(out)
    (tmp_path / "in.json").write_text(json.dumps(body_in))
    (tmp_path / "out.json").write_text(json.dumps(body_out))
    check = subprocess.run(
        [sys.executable, str(checker), str(tmp_path / "out.json"), "--input", str(tmp_path / "in.json"),
         "--allow-open-tail"],
        capture_output=True, text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr

    # Under budget, by the package's own counter and by the report.
    assert compactor.count(body_out)["total"] <= budget or report["status"] == "over_budget"
    assert report["status"] != "over_budget", report["notes"]
    assert report["tokens_after"] <= budget

    # Kept messages: the very input objects, or copies whose only change is the content
    # (and the tool calls of an edited AIMessage); anything else is the digest compaction made.
    by_identity = {id(m) for m in messages}
    by_id = {m.id: m for m in messages}
    kept = 0
    for m in out:
        if id(m) in by_identity:
            kept += 1
            continue
        if m.id is None:
            assert m.type == "human", m
            continue
        original = by_id[m.id]
        assert type(m) is type(original)
        assert m.content != original.content or getattr(m, "tool_calls", None) != getattr(original, "tool_calls", None)
        fixed = {"content", "tool_calls", "invalid_tool_calls", "status"}
        assert m.model_dump(exclude=fixed) == original.model_dump(exclude=fixed)
        if isinstance(m, ToolMessage):
            assert m.status == original.status
    assert kept >= 1
    if report["status"] == "unchanged":
        assert all(id(m) in by_identity for m in out)


def test_trim_messages_is_a_one_line_replacement():
    session = SESSIONS[0]
    messages = from_anthropic(compactor.load(session).body)
    out = trim_messages(
        messages, max_tokens=20_000, strategy="last", token_counter="approximate", start_on="human",
        include_system=True
    )
    assert out and compactor.validate(to_anthropic(out)) == []
    assert count_tokens_approximately(out) <= 20_000
