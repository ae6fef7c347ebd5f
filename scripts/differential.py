#!/usr/bin/env python3
"""Differential run: the same inputs through two compactor binaries, every difference listed.

    python3 scripts/differential.py --old OLD_BIN --new NEW_BIN [--shared ../shared] [--jobs 2]

A refactor that must not change behaviour is checked with this against the binary built before
it. Inputs: every case of ../shared/cases, ../shared/cases/next and tests/cases (its request,
format and budget), and every transcript of ../shared/corpus at several budgets. Commands:
`compact` under each preset (default, truncate, microcompact, summary) — the summary tier talks
to a fake LLM this script starts on 127.0.0.1, whose answer is derived from the request it gets,
so a changed prompt shows as a changed output —, and `count`, `validate`, `show` of each input.
Compared: exit code, stdout, stderr (the run's own folder written as WORK), the output file, the JSON report with its timing fields
(`millis`, `timings`, any key ending in `_ms`) taken out, and the recall directory's files.
Exit 0 when everything is equal, 1 with one line per difference otherwise.
"""
import argparse
import concurrent.futures
import hashlib
import http.server
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS_BUDGETS = [4000, 20000, 60000]
PRESETS = ["default", "truncate", "microcompact", "summary"]


class FakeLlm(http.server.BaseHTTPRequestHandler):
    """Anthropic Messages API answer whose text depends only on the request body."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        digest = hashlib.sha256(body).hexdigest()[:16]
        text = (
            "## Goal\nContinue the task the user gave (digest " + digest + ").\n"
            "## Files\n- src/lib.rs\n## Failures\n- none recorded\n## Next\n- keep going\n"
        )
        answer = {
            "id": "msg_" + digest,
            "type": "message",
            "role": "assistant",
            "model": "fake",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": len(body) // 4, "output_tokens": 60},
        }
        out = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def strip_timings(value):
    if isinstance(value, dict):
        return {
            k: strip_timings(v)
            for k, v in value.items()
            if k not in ("millis", "timings") and not k.endswith("_ms")
        }
    if isinstance(value, list):
        return [strip_timings(v) for v in value]
    return value


def inputs(shared: pathlib.Path, scratch: pathlib.Path):
    """(name, path, format or None, [budgets])"""
    found = []
    for folder in (shared / "cases", shared / "cases" / "next", ROOT / "tests" / "cases"):
        if not folder.is_dir():
            sys.exit(f"differential: {folder} is missing")
        for case in sorted(folder.glob("*.json")):
            spec = json.loads(case.read_text())
            req = scratch / "in" / (folder.name + "-" + case.name)
            req.parent.mkdir(parents=True, exist_ok=True)
            req.write_text(json.dumps(spec["request"]))
            found.append((f"{folder.name}/{case.name}", req, spec["format"], [spec["budget"]]))
    corpus = shared / "corpus"
    if not corpus.is_dir():
        sys.exit(f"differential: {corpus} is missing")
    for f in sorted(corpus.iterdir()):
        if f.suffix in (".jsonl", ".json", ".yaml"):
            found.append((f"corpus/{f.name}", f, None, CORPUS_BUDGETS + [None]))
    return found


def jobs(found):
    for name, path, fmt, budgets in found:
        base = ["--format", fmt] if fmt else []
        for cmd in ("count", "validate", "show"):
            yield (f"{cmd} {name}", [cmd, str(path)] + (base if cmd != "show" else []), False)
        for budget in budgets:
            for preset in PRESETS:
                args = ["compact", str(path)] + base + ["--strategy", preset]
                if budget is not None:
                    args += ["--budget", str(budget)]
                label = f"compact {name} budget={budget} strategy={preset}"
                yield (label, args, True)


def run(binary, args, compacting, work: pathlib.Path, config: pathlib.Path):
    work.mkdir(parents=True)
    full = [binary] + args
    if compacting:
        full += ["-o", str(work / "out"), "--report", str(work / "report.json"),
                 "--recall-dir", str(work / "recall"), "--config", str(config)]
    env = dict(os.environ, HOME=str(work / "home"), XDG_CACHE_HOME=str(work / "cache"))
    p = subprocess.run(full, capture_output=True, env=env, timeout=300)
    here = str(work).encode()
    seen = {"exit": p.returncode, "stdout": p.stdout.replace(here, b"WORK"),
            "stderr": p.stderr.replace(here, b"WORK")}
    for f in sorted(work.rglob("*")):
        if f.is_file():
            rel = str(f.relative_to(work))
            data = f.read_bytes()
            if rel == "report.json":
                try:
                    data = json.dumps(strip_timings(json.loads(data)), indent=1).encode()
                except ValueError:
                    pass
            seen["file " + rel] = data
    return seen


def first_difference(a: bytes, b: bytes) -> str:
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return f"at byte {i}: old {a[max(0, i - 40):i + 60]!r} new {b[max(0, i - 40):i + 60]!r}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--only", default="", help="run only jobs whose label contains this")
    a = ap.parse_args()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeLlm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="differential-"))
    config = scratch / "llm.toml"
    config.write_text(
        "[llm]\nprovider = \"anthropic\"\n"
        f"base_url = \"http://127.0.0.1:{server.server_address[1]}\"\n"
        "model = \"claude-haiku-4-5\"\nretries = 0\n"
    )
    todo = [j for j in jobs(inputs(pathlib.Path(a.shared), scratch)) if a.only in j[0]]

    def one(index_job):
        index, (label, args, compacting) = index_job
        old = run(a.old, args, compacting, scratch / f"{index}-old", config)
        new = run(a.new, args, compacting, scratch / f"{index}-new", config)
        diffs = []
        for key in sorted(set(old) | set(new)):
            o, n = old.get(key), new.get(key)
            if o == n:
                continue
            if isinstance(o, bytes) and isinstance(n, bytes):
                diffs.append(f"{label}: {key} differs {first_difference(o, n)}")
            else:
                diffs.append(f"{label}: {key}: old {o!r:.120} new {n!r:.120}")
        return diffs

    differences = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for diffs in pool.map(one, enumerate(todo)):
            differences.extend(diffs)
    server.shutdown()
    shutil.rmtree(scratch, ignore_errors=True)
    for d in differences:
        print(d)
    print(f"differential: {len(todo)} runs, {len(differences)} differences")
    sys.exit(1 if differences else 0)


if __name__ == "__main__":
    main()
