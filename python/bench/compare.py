"""Compares LangChain's trim_messages with compactor's drop-in on the corpus.

For every Claude Code session in ../shared/corpus (imported by compactor.load) and budgets
50k/20k/8k tokens, three configurations trim the LangChain messages:

- ``langchain-docs``: ``trim_messages(strategy="last", token_counter=o200k, start_on="human",
  include_system=True)``, the documented configuration (an o200k counter stands in for the
  tiktoken one: tiktoken's encodings cannot be downloaded here; both are the same BPE);
- ``langchain-defaults``: ``trim_messages(max_tokens=..., token_counter=o200k)``;
- ``compactor``: ``compactor.langchain.trim_messages`` with one Compactor kept across calls.

Columns, over the runs that needed trimming (input over the budget): valid = the output passes
../shared/tools/check_request.py against its input and is not empty; empty; under budget
(compactor's count of the whole request); failed tool results kept (still an error, or named
with its id and the word error/fail); median milliseconds per call, all in this one process
(compactor's figure is a repeated call, its cache warm, as in an agent loop).

Usage: python bench/compare.py [--budgets 50000,20000,8000]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages import trim_messages as lc_trim

import compactor
from compactor.langchain import from_anthropic, to_anthropic
from compactor.langchain import trim_messages as cx_trim

HERE = pathlib.Path(__file__).resolve()
SHARED = HERE.parents[2].parent / "shared"
CHECKER = SHARED / "tools" / "check_request.py"


def o200k(messages: list[BaseMessage]) -> int:
    """Tokens of LangChain messages by o200k BPE: content + tool calls + 3 per message."""
    total = 0
    for m in messages:
        content = m.content if isinstance(m.content, str) else json.dumps(m.content)
        total += 3 + compactor.count_text(content)
        if isinstance(m, AIMessage) and m.tool_calls:
            total += compactor.count_text(json.dumps(m.tool_calls))
    return total


def failed_ids(body: dict) -> list[str]:
    return [b["tool_use_id"] for m in body["messages"] if isinstance(m.get("content"), list)
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("is_error")]


def failures_kept(body_in: dict, body_out: dict) -> tuple[int, int]:
    wanted = failed_ids(body_in)
    still = set(failed_ids(body_out))
    text = json.dumps(body_out)
    low = text.lower()
    kept = sum(1 for i in wanted if i in still or (i in text and ("error" in low or "fail" in low)))
    return kept, len(wanted)


def check(body_in: dict, body_out: dict, tmp: pathlib.Path) -> bool:
    if not body_out["messages"]:
        return False
    (tmp / "in.json").write_text(json.dumps(body_in))
    (tmp / "out.json").write_text(json.dumps(body_out))
    r = subprocess.run([sys.executable, str(CHECKER), str(tmp / "out.json"), "--input", str(tmp / "in.json"),
                        "--allow-open-tail"], capture_output=True, text=True)
    return r.returncode == 0


def timed(fn, repeat: int) -> tuple[list[BaseMessage], float]:
    out = fn()  # the first call warms caches; the figure is the median of the next ones
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return out, statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", default="50000,20000,8000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    sessions = sorted((SHARED / "corpus").glob("cc_*.jsonl"))
    if not sessions or not CHECKER.exists():
        print(f"missing corpus or checker under {SHARED}", file=sys.stderr)
        return 2
    shared = compactor.Compactor()
    configs = {
        "langchain-docs": lambda m, b: lc_trim(m, max_tokens=b, strategy="last", token_counter=o200k,
                                               start_on="human", include_system=True),
        "langchain-defaults": lambda m, b: lc_trim(m, max_tokens=b, token_counter=o200k),
        "compactor": lambda m, b: cx_trim(m, max_tokens=b, compactor=shared),
    }
    rows = {name: {"runs": 0, "valid": 0, "empty": 0, "under": 0, "kept": 0, "failed": 0, "ms": []}
            for name in configs}
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        for session in sessions:
            messages = from_anthropic(compactor.load(session).body)
            body_in = to_anthropic(messages)
            tokens_in = compactor.count(body_in)["total"]
            for budget in budgets:
                if tokens_in <= budget:
                    continue
                for name, fn in configs.items():
                    out, ms = timed(lambda: fn(messages, budget), args.repeat)
                    row = rows[name]
                    row["runs"] += 1
                    row["ms"].append(ms)
                    try:
                        body_out = to_anthropic(out)
                    except compactor.CompactorError:
                        continue
                    row["empty"] += not body_out["messages"]
                    row["valid"] += check(body_in, body_out, tmp)
                    row["under"] += compactor.count(body_out)["total"] <= budget
                    kept, failed = failures_kept(body_in, body_out)
                    row["kept"] += kept
                    row["failed"] += failed
    print(f"{len(sessions)} sessions x budgets {budgets}; runs that needed trimming only\n")
    print("| configuration | runs | valid | invalid | empty | under budget | failed results kept | ms/call (median) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        ms = statistics.median(r["ms"]) if r["ms"] else 0.0
        print(f"| {name} | {r['runs']} | {r['valid']} | {r['runs'] - r['valid']} | {r['empty']} | "
              f"{r['under']} | {r['kept']}/{r['failed']} | {ms:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
