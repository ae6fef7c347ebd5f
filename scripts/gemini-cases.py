#!/usr/bin/env python3
"""Writes the Gemini cases of tests/cases (gc01-gc04): generateContent bodies shaped like what
Gemini CLI 0.61 sends (../shared/PROVIDER_RULES.md §D; ../shared/tools/realclients/README.md), with
this project's own words and data. Deterministic: run it again and nothing changes.

    python3 scripts/gemini-cases.py            # rewrites tests/cases/gc*.json
    python3 scripts/gemini-cases.py --check    # exits 1 when a file differs from what it writes

What the CLI sends, as the cases model it: contents[0] is the only user text turn (a
<session_context> block with the date, OS and workspace layout, then the task); every step is a
model turn (a thought part, then one or more functionCall parts, the first one signed with a
thoughtSignature) answered by one user turn with as many functionResponse parts, same ids and
order, {"output": ...} on success and {"error": ...} on failure; a 32 KB-ish systemInstruction,
15 function declarations and a generationConfig with thinkingConfig. Run them with
`python3 ../shared/tools/run_cases.py tests/cases --bin target/release/compactor` and
`run_extra_checks.py` likewise; tests/all/gemini_shapes.rs sends each through the CLI and the
proxy and judges the outputs with ../shared/tools/check_request.py.
"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "cases")
WORDS = ("sensor reading calibrate drift window sample buffer flush threshold alarm station "
         "telemetry packet decode checksum retry backoff gateway uplink schedule").split()
TOOLS = ["list_directory", "read_file", "search_file_content", "glob", "replace", "write_file",
         "web_fetch", "read_many_files", "run_shell_command", "save_memory", "google_web_search",
         "write_todos", "codebase_investigator", "activate_skill", "ask_user"]
SOURCE = ("structure of the bodies Gemini CLI 0.61.0 sends (../shared/tools/realclients/README.md, "
          "fake_gemini.py); ../shared/PROVIDER_RULES.md section D")


def filler(rng, tag, lines, width=9):
    return "\n".join(f"{tag}:{i + 1}: " + " ".join(rng.choice(WORDS) for _ in range(width))
                     for i in range(lines))


def sig(rng, n=96):
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    return "".join(rng.choice(alphabet) for _ in range(n)) + "=="


def envelope(rng):
    system = ("You are an interactive CLI agent specializing in software engineering tasks.\n"
              + filler(rng, "rules", 120, 12))
    decls = [{"name": t, "description": f"The {t} tool. " + " ".join(rng.choice(WORDS) for _ in range(20)),
              "parametersJsonSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                                       "required": ["path"]}} for t in TOOLS]
    return {
        "systemInstruction": {"role": "user", "parts": [{"text": system}]},
        "tools": [{"functionDeclarations": decls}],
        "generationConfig": {"temperature": 1, "topP": 0.95, "topK": 64,
                             "thinkingConfig": {"includeThoughts": True, "thinkingLevel": "HIGH"}},
    }


def first_content(task):
    ctx = ("<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
           "Today's date is Friday, December 4, 2026.\nMy operating system is: linux\n"
           "I'm currently working in the directory: /home/dev/telemetry\n"
           "Here is the folder structure of the current working directories:\n"
           "/home/dev/telemetry/\n|-- README.md\n|-- src/\n    |-- decode.py\n    |-- uplink.py\n"
           "|-- tests/\n    |-- test_decode.py\n</session_context>")
    return {"role": "user", "parts": [{"text": ctx}, {"text": task}]}


def call_turn(rng, step, calls, ids=True, thought=True):
    parts = []
    if thought:
        parts.append({"text": f"**Planning step {step}**\nLooking at the next files.", "thought": True})
    for i, (name, args) in enumerate(calls):
        fc = {"name": name, "args": args}
        if ids:
            fc = {"id": f"fc-gc-{step:02d}-{i}-{rng.randrange(10**6):06d}", **fc}
        part = {"functionCall": fc}
        if i == 0:
            part["thoughtSignature"] = sig(rng)
        parts.append(part)
    return {"role": "model", "parts": parts}


def response_turn(call, results):
    parts = []
    for p, (kind, text) in zip([p for p in call["parts"] if "functionCall" in p], results):
        fr = {"name": p["functionCall"]["name"], "response": {kind: text}}
        if "id" in p["functionCall"]:
            fr["id"] = p["functionCall"]["id"]
        parts.append({"functionResponse": fr})
    return {"role": "user", "parts": parts}


def loop(rng, steps, ids=True, fail_at=(), parallel_at=()):
    contents, failed = [], []
    for s in range(steps):
        n = 3 if s in parallel_at else 1
        calls = [("read_file", {"absolute_path": f"/home/dev/telemetry/src/mod_{s}_{i}.py"}) for i in range(n)]
        if s in fail_at:
            calls = [("replace", {"file_path": "/home/dev/telemetry/src/decode.py",
                                  "old_string": f"checksum_{s}", "new_string": f"crc_{s}"})]
        turn = call_turn(rng, s, calls, ids=ids)
        if s in fail_at:
            results = [("error", "Failed to edit, 0 occurrences found for old_string (checksum_%d). "
                                 "No edits made." % s)]
            failed.append(turn["parts"][1]["functionCall"].get("id"))
        else:
            results = [("output", filler(rng, f"mod_{s}_{i}", 40)) for i in range(n)]
        contents += [turn, response_turn(turn, results)]
    return contents, failed


def case(about, cls, budget, expect, request, x_checks=None):
    c = {"about": about, "class": cls, "format": "gemini", "budget": budget, "allow_open_tail": False,
         "expect": expect, "source": SOURCE}
    if x_checks:
        c["x_checks"] = x_checks
    c["request"] = request
    return c


def gc01():
    rng = random.Random(101)
    env = envelope(rng)
    contents, failed = loop(rng, 24, fail_at=(3, 9), parallel_at=(5, 14, 23))
    body = {"contents": [first_content("The decoder drops packets whose checksum wraps. Find it and fix it.")]
            + contents, **env}
    last = [p["functionResponse"]["id"] for p in body["contents"][-1]["parts"]]
    return case("A Gemini CLI tool loop of 24 steps (three parallel batches of three calls, two failed "
                "replace calls answered {\"error\": ...}) far over its budget: the loop is one round "
                "(contents[0] is the only user text turn), so the cut falls between call turns behind a "
                "marker; contents[0], the envelope and the newest response turn stay; kept call turns keep "
                "their signatures byte for byte; the failures stay visible.",
                "Gemini CLI session (own)", 9000,
                {"valid": True, "under_budget": True, "keeps_failure": failed},
                body, {"envelope_unchanged": True, "must_contain": last})


def gc02():
    rng = random.Random(202)
    env = envelope(rng)
    first, _ = loop(rng, 8)
    second, failed = loop(rng, 10, ids=False, fail_at=(2,))
    for c in second:  # other ids than the first loop's steps
        for p in c["parts"]:
            if "thoughtSignature" in p:
                p["thoughtSignature"] = sig(rng)
    body = {"contents": [first_content("List the decoders.")] + first
            + [{"role": "model", "parts": [{"text": "There are two decoders.", "thoughtSignature": sig(rng)}]},
               {"role": "user", "parts": [{"text": "Now make the uplink retry with backoff."}]}]
            + second, **env}
    return case("An interactive Gemini CLI session: a first task's tool loop ended by a signed text answer, "
                "then a second user text turn whose loop (function calls without ids, as older Gemini API "
                "answers give them; responses paired by position) holds a failed replace. Over budget: the "
                "first round may go whole, contents[0] stays first, the failed call stays visible by name.",
                "Gemini CLI session without call ids (own)", 6000,
                {"valid": True, "under_budget": True, "keeps_failure": ["replace"]}, body,
                {"envelope_unchanged": True})


def gc03():
    rng = random.Random(303)
    env = envelope(rng)
    contents, _ = loop(rng, 4, parallel_at=(1,))
    # The response turn of the parallel batch lost one of its three responses.
    contents[3]["parts"].pop()
    body = {"contents": [first_content("Read the modules.")] + contents, **env}
    return case("A body whose function response turn answers two of the three calls of its call turn "
                "(D1): refused by the CLI, located at the call turn, forwarded as it came by the proxy.",
                "Gemini D1 count mismatch (own)", 2000, {"error": "contents[3]"}, body)


def gc04():
    rng = random.Random(404)
    env = envelope(rng)
    contents, _ = loop(rng, 3)
    body = {"contents": [first_content("Read three modules.")] + contents, **env}
    return case("A short Gemini CLI loop under its budget: the body goes out as it came.",
                "Gemini under budget (own)", 60000, {"unchanged": True, "valid": True}, body)


CASES = {
    "gc01-gemini-cli-long-tool-loop-one-round.json": gc01,
    "gc02-gemini-cli-second-task-calls-without-ids.json": gc02,
    "gc03-gemini-response-turn-short-of-its-calls-invalid.json": gc03,
    "gc04-gemini-cli-under-budget-unchanged.json": gc04,
}


def main():
    check = "--check" in sys.argv[1:]
    differ = []
    for name, make in CASES.items():
        text = json.dumps(make(), ensure_ascii=False, indent=1) + "\n"
        path = os.path.join(OUT, name)
        if check:
            old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
            if old != text:
                differ.append(name)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    if differ:
        print("differ from scripts/gemini-cases.py:", ", ".join(differ))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
