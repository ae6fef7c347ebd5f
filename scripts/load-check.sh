#!/usr/bin/env bash
# Load check of the compacting proxy: N concurrent agent loops for a bounded time against
# `compactor serve` and a fake upstream, both on 127.0.0.1. Not part of `cargo test`.
#   scripts/load-check.sh [CLIENTS=16] [SECONDS=10] [PROFILE=dev|release] [BODY.json BUDGET [distinct|grow]]
# BODY.json: one Anthropic request body sent on every turn (e.g. the largest corpus session via
# `compactor convert`); BUDGET in tokens decides under or over the trigger; `distinct` makes
# every request's body unique (nothing remembered or replayed: the caches fill to their bounds);
# `grow` makes each client an agent whose every turn sends BODY.json's history one exchange
# longer than its last (continued from the compaction memory; LOAD_CHECK_GROW_START=0.6 is the
# fraction of the history's bytes the first body holds).
# LOAD_CHECK_SERVER: extra `[server]` lines for the service, e.g. 'memory_bytes = 8388608'.
set -euo pipefail
cd "$(dirname "$0")/.."
clients="${1:-16}"
seconds="${2:-10}"
profile="${3:-dev}"
if [ "$profile" = release ]; then
  cargo build --release --bin compactor --example load_check
  dir=target/release
else
  cargo build --bin compactor --example load_check
  dir=target/debug
fi
exec "$dir/examples/load_check" "$dir/compactor" "$clients" "$seconds" "${@:4}"
