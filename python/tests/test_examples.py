"""The examples the READMEs tell a newcomer to run, run as written."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_langchain_agent_example_runs_and_compacts_each_model_call_within_its_budget():
    pytest.importorskip("langchain.agents")
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "langchain_agent.py")], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    calls = re.findall(
        r"model call: (\d+) messages in the state, (\d+) sent; (\w+): (\d+) -> (\d+) tokens \(budget 4000\)", run.stdout
    )
    # 8 tool calls and the final answer: 9 model calls, the state growing by a call and its result.
    assert [int(c[0]) for c in calls] == [1, 3, 5, 7, 9, 11, 13, 15, 17], run.stdout
    # Under the trigger (80% of 4,000) a call gets the history as it is; over it, compacted to fit.
    for state, sent, status, before, after in calls:
        assert status == ("unchanged" if int(before) <= 3_200 else "compacted"), run.stdout
        assert int(after) <= 4_000
        # The model gets the system prompt and at most the state's messages.
        assert int(sent) <= int(state) + 1
        if status == "compacted":
            assert int(after) < int(before)
    assert "agent state: 18 messages (nothing dropped)" in run.stdout
