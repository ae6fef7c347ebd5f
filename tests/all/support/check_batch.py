"""Runs the independent checker (../shared/tools/check_request.py) on many request bodies in one process.

Usage: python3 check_batch.py CHECKER MANIFEST.json

MANIFEST.json is a list of {"output": PATH, "input": PATH or null, "format": NAME or null,
"allow_open_tail": BOOL}, the arguments of one `check_request.py OUTPUT [--input INPUT] [--format NAME]
[--allow-open-tail]` call each. Prints a JSON list with one entry per item, in order: the lines that
call would print (an empty list when it would exit 0; the unreadable-input message when it would exit 2).
Each item is judged by the checker's own `load` and `check`, exactly as its `main` does; this file only
saves the ~50 ms of a Python start per body.
"""
import importlib.util
import json
import sys


def main():
    checker_path, manifest_path = sys.argv[1], sys.argv[2]
    spec = importlib.util.spec_from_file_location("check_request", checker_path)
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    with open(manifest_path, encoding="utf-8") as f:
        items = json.load(f)
    verdicts = []
    for item in items:
        try:
            output = checker.load(item["output"])
            given = checker.load(item["input"]) if item.get("input") else None
            verdicts.append(checker.check(output, item.get("format"), item.get("allow_open_tail", False), given))
        except SystemExit as e:  # the checker's exit 2: an unreadable body, named by its message
            verdicts.append([f"unreadable: {e.code}"])
        except Exception as e:  # the CLI would exit 1 with this traceback
            verdicts.append([f"the checker raised {type(e).__name__}: {e}"])
    json.dump(verdicts, sys.stdout)


if __name__ == "__main__":
    main()
