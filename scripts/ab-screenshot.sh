#!/usr/bin/env bash
# The A/B page as a person sees it: builds `compactor ab --html` over the given files (default:
# two corpus sessions) and takes a full-width screenshot with headless Chromium (Debian package
# `chromium`: apt-get install chromium). Run from the project root after `cargo build --release`.
#
#   scripts/ab-screenshot.sh [OUT_DIR] [FILES...]
#
# Writes OUT_DIR/ab.html and OUT_DIR/ab.png (default OUT_DIR: /tmp/ab-page), and checks that the
# page has a verdict, marks over-budget rows, explains its columns and that no table is wider
# than the window (Chromium's own layout, read back from the DOM).
set -euo pipefail
OUT="${1:-/tmp/ab-page}"
shift || true
FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
  FILES=(../shared/corpus/cc_spotter_4d5611e5.jsonl ../shared/corpus/codex_rollout_01997e76.jsonl)
fi
BIN="${COMPACTOR_BIN:-target/release/compactor}"
CHROME="${CHROME:-$(command -v chromium || command -v chromium-browser || true)}"
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release first" >&2; exit 2; }
[ -n "$CHROME" ] || { echo "no chromium: apt-get install chromium" >&2; exit 2; }
mkdir -p "$OUT"
"$BIN" ab "${FILES[@]}" --budget 50000 --budget 20000 --replay-cap 40 --no-timings \
  --html "$OUT/ab.html" > "$OUT/ab.txt"
PROFILE="$(mktemp -d)"
trap 'rm -rf "$PROFILE"' EXIT
FLAGS=(--headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking
  --disable-component-update --disable-sync "--user-data-dir=$PROFILE" --window-size=1400,2400)
"$CHROME" "${FLAGS[@]}" --screenshot="$OUT/ab.png" "file://$(realpath "$OUT/ab.html")" 2>/dev/null
# The widest table as laid out by the browser (CSS pixels), read back from a copy of the page
# with a line of script that writes it into the title.
sed 's#</body>#<script>document.title="widest="+Math.max(...[...document.querySelectorAll("table")].map(t=>t.scrollWidth))</script></body>#' \
  "$OUT/ab.html" > "$OUT/measure.html"
WIDEST=$("$CHROME" "${FLAGS[@]}" --dump-dom "file://$(realpath "$OUT/measure.html")" 2>/dev/null \
  | grep -o 'widest=[0-9]*' | head -1 | cut -d= -f2)
rm -f "$OUT/measure.html"
grep -q "Verdict: the cheapest strategy" "$OUT/ab.html" || { echo "no verdict on the page" >&2; exit 1; }
grep -q "<ul class=\"notes\">" "$OUT/ab.html" || { echo "no column notes on the page" >&2; exit 1; }
if [ -z "$WIDEST" ] || [ "$WIDEST" -gt 1400 ]; then
  echo "a table is ${WIDEST:-?} px wide, wider than the 1400 px window" >&2; exit 1
fi
echo "page: $OUT/ab.html (widest table $WIDEST px of 1400); screenshot: $OUT/ab.png"
