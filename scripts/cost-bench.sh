#!/usr/bin/env bash
# The cost benchmark: every preset on the corpus sessions, replayed call by call with the
# prompt cache, at two budgets. Prints the per-preset table (cost, tokens, prefix reuse,
# over-budget calls, fidelity against the `none` baseline) and the verdicts; writes the whole
# report to OUT (default /tmp/cost-bench.md). Run from the project root after
# `cargo build --release`; a change to the policy shows its price here.
#
#   scripts/cost-bench.sh [OUT] [FILES...]
set -euo pipefail
OUT="${1:-/tmp/cost-bench.md}"
shift || true
FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
  FILES=(../shared/corpus/cc_spotter_4d5611e5.jsonl ../shared/corpus/cc_spotter_fa812bfe.jsonl
    ../shared/corpus/codex_rollout_01997e76.jsonl ../shared/corpus/miniswe_deepseek_chat_astroid1333.traj.json)
fi
BIN="${COMPACTOR_BIN:-target/release/compactor}"
"$BIN" ab "${FILES[@]}" --strategies default,truncate,microcompact --budget 50000 --budget 20000 \
  --replay-cap 60 --no-timings --markdown "$OUT" > /dev/null
# The two tables the benchmark is read from: the verdicts and the per-preset figures.
awk '/^### (Skipped|Whole transcript)/{exit} /^### Verdict/{on=1} on' "$OUT"
