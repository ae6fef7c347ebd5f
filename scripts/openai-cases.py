#!/usr/bin/env python3
"""Writes the OpenAI cases of tests/cases (k01-k07): request bodies shaped like what Codex CLI
0.171 and the OpenAI SDKs of 2026 send (../shared/PROVIDER_RULES.md §B Responses, §C Chat),
with this project's own words and data. Deterministic: run it again and nothing changes.

    python3 scripts/openai-cases.py            # rewrites tests/cases/k*.json
    python3 scripts/openai-cases.py --check    # exits 1 when a file differs from what it writes

The case format is ../shared/cases/README.md's (`expect`, `x_checks`); run them with
`python3 ../shared/tools/run_cases.py tests/cases --bin target/release/compactor` and
`run_extra_checks.py` likewise. tests/all/openai_shapes.rs also sends each one through the CLI and
the proxy and judges the outputs with ../shared/tools/check_request.py.
"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "cases")
WORDS = ("ledger posting account balance journal entry period close accrual invoice vendor "
         "payment batch currency rate rounding audit trail reconcile statement").split()


def filler(rng, tag, lines, width=9):
    """`lines` lines of made-up log/source text, each starting with `tag:N:`."""
    return "\n".join(f"{tag}:{i + 1}: " + " ".join(rng.choice(WORDS) for _ in range(width))
                     for i in range(lines))


def token(rng, n):
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    return "".join(rng.choice(alphabet) for _ in range(n))


def text(t, kind="input_text"):
    return {"type": kind, "text": t}


def msg(role, *parts, id=None, phase=None):
    m = {"type": "message"}
    if id:
        m["id"] = id
    m["role"] = role
    m["content"] = [text(p, "output_text" if role == "assistant" else "input_text") for p in parts]
    if phase:
        m["phase"] = phase
    return m


def reasoning(rng, rid, step):
    return {"type": "reasoning", "id": rid,
            "summary": [{"type": "summary_text", "text": f"**Step {step}**: deciding what to run next."}],
            "content": None, "encrypted_content": "gAAAAB" + token(rng, 180)}


def exec_call(cid, cmd, fid):
    return {"type": "function_call", "status": "completed", "id": fid, "name": "exec_command",
            "arguments": json.dumps({"cmd": cmd, "yield_time_ms": 10000, "max_output_tokens": 12000}),
            "call_id": cid}


def exec_output(cid, code, body, oid):
    return {"type": "function_call_output", "id": oid, "call_id": cid,
            "output": f"Chunk ID: {oid[-6:]}\nWall time: 0.2000 seconds\nProcess exited with code {code}\n"
                      f"Original token count: {len(body) // 4}\nOutput:\n{body}"}


CWD = "/home/dev/ledger"
AGENTS = (f"# AGENTS.md instructions for {CWD}\n\n<INSTRUCTIONS>\n# House rules\n\n"
          "- RULE-5120: run `make check` before every commit; never edit files under fixtures/.\n\n</INSTRUCTIONS>")
ENV = (f"<environment_context>\n  <cwd>{CWD}</cwd>\n  <shell>bash</shell>\n  <current_date>2026-11-30</current_date>\n"
       f"  <timezone>Europe/Berlin</timezone>\n</environment_context>")


def codex_envelope(rng, input_items):
    session = "0199a7c2-5d1e-7b40-9f3a-" + "".join(rng.choice("0123456789abcdef") for _ in range(12))
    return {
        "model": "gpt-5-codex",
        "instructions": None,
        "input": input_items,
        "tools": [
            {"type": "function", "name": "exec_command", "description": "Runs a command in a PTY.",
             "strict": False, "parameters": {"type": "object", "properties": {
                 "cmd": {"type": "string"}, "yield_time_ms": {"type": "number"},
                 "max_output_tokens": {"type": "number"}}, "required": ["cmd"], "additionalProperties": False}},
            {"type": "custom", "name": "apply_patch", "description": "Edits files with a patch.",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}},
            {"type": "web_search"},
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": session,
        "client_metadata": {"x-codex-turn-metadata": json.dumps(
            {"session_id": session, "turn_id": session[:-4] + "0001", "sandbox": "workspace-write"})},
    }


def k01(rng):
    items = [
        msg("developer", "You are a coding agent working in a terminal. Keep changes small and run the "
            "project's checks before you report.", id="msg_k01dev0"),
        msg("developer", "<permissions instructions>\nFilesystem sandboxing: workspace-write. Approval policy: "
            "on-request.\n</permissions instructions>", id="msg_k01dev1"),
        {"type": "message", "id": "msg_k01ctx", "role": "user", "content": [text(AGENTS), text(ENV)]},
        msg("user", "The month-end close reports a rounding difference of 0.01 EUR. Find where it comes from.",
            id="msg_k01task"),
    ]
    steps = [
        ("ls -la && cat Makefile", 0, 40),
        ("rg -n 'round' src/ -A 40", 0, 150),
        ("cargo test --package ledger close::tests", 1, 60),
        ("sed -n 1,200p src/close.rs", 0, 160),
    ]
    n = 0
    for round_no, who in enumerate(["Look at the rounding in the close module.",
                                     "Check the currency conversion as well.",
                                     "Run the close tests again after reading the rates."]):
        if round_no:
            items.append(msg("user", who, id=f"msg_k01u{round_no}"))
        for cmd, code, lines in steps:
            n += 1
            cid = "call_k01F1" if (round_no, code) == (0, 1) else f"call_k01x{n:02d}"
            items.append(reasoning(rng, f"rs_k01{n:02d}", n))
            items.append(exec_call(cid, cmd, f"fc_k01{n:02d}"))
            body = filler(rng, f"out{n}", lines)
            if code:
                body += "\nerror: test close::tests::rounding_is_banker failed: left 0.01, right 0.00"
            items.append(exec_output(cid, code, body, f"fco_k01{n:02d}"))
        items.append(msg("assistant", f"Round {round_no + 1}: the balance differs after conversion.",
                         id=f"msg_k01a{round_no}", phase="commentary"))
    # A patch through the freeform apply_patch tool, and a standing change of the approval policy.
    items.append(reasoning(rng, "rs_k01p", 99))
    items.append({"type": "custom_tool_call", "status": "completed", "id": "ctc_k01p", "call_id": "call_k01P1",
                  "name": "apply_patch", "input": "*** Begin Patch\n*** Update File: src/close.rs\n@@\n-    amount.round_dp(2)\n"
                  "+    amount.round_dp_with_strategy(2, RoundingStrategy::MidpointNearestEven)\n*** End Patch\n"})
    items.append({"type": "custom_tool_call_output", "id": "ctco_k01p", "call_id": "call_k01P1",
                  "output": json.dumps({"output": "Success. Updated the following files:\nM src/close.rs\n",
                                        "metadata": {"exit_code": 0, "duration_seconds": 0.1}})})
    items.append(msg("developer", "<approval_policy>The approval policy is now never: do not ask before running "
                     "commands.</approval_policy>", id="msg_k01dev2"))
    items.append(msg("assistant", "Patched the rounding to banker's rounding; `make check` is next.",
                     id="msg_k01fin", phase="final_answer"))
    items.append(msg("user", "Run make check and commit.", id="msg_k01last"))
    return {
        "about": "A Codex CLI request over its budget (Responses): two developer messages first, the AGENTS.md "
                 "rule and the environment_context in the first user message, reasoning items with "
                 "encrypted_content before each exec_command call, a failed command (Process exited with code 1), "
                 "a freeform apply_patch call, assistant messages with phase, a developer message that changes "
                 "the approval policy mid-history, and the envelope Codex sends (store false, include, "
                 "prompt_cache_key, client_metadata). The AGENTS.md rule and the working directory must reach "
                 "the model, the failure must stay visible, every reasoning item must stay before its call.",
        "class": "Codex request (E5, E6, carry of the client's context)",
        "format": "openai-responses",
        "budget": 6000,
        "allow_open_tail": False,
        "expect": {"valid": True, "under_budget": True, "keeps_failure": ["call_k01F1"]},
        "source": "what Codex CLI 0.171.0 sends (../shared/tools/realclients); ../shared/PROVIDER_RULES.md B2, B9, B10",
        "x_checks": {
            "must_contain": ["RULE-5120", f"<cwd>{CWD}</cwd>", "The approval policy is now never"],
            "system_kept": ["The approval policy is now never"],
            "reasoning_followers": True,
            "opaque_identical": ["reasoning"],
            "envelope_unchanged": True,
            "first_items_unchanged": 2,
            "single_marker": True,
            "marker_frame": True,
        },
        "request": codex_envelope(rng, items),
    }


def k02(rng):
    items = [
        exec_output("call_k02S1", 0, filler(rng, "report", 220), "fco_k02s1"),
        {"type": "apply_patch_call_output", "id": "apco_k02s2", "call_id": "call_k02S2", "status": "failed",
         "output": "patch does not apply: hunk 2 of src/rates.rs expected `let rate = 1.0;`"},
        {"type": "shell_call_output", "id": "sco_k02s3", "call_id": "call_k02S3", "output": [
            {"stdout": "running 12 tests", "stderr": "test rates::tests::eur_usd ... FAILED\nerror: 1 test failed",
             "outcome": {"type": "exit", "exit_code": 101}}]},
        msg("user", "Both failed. Try a smaller patch, then rerun the rates tests."),
    ]
    for k in range(1, 5):
        cid = f"call_k02n{k}"
        items.append({"type": "function_call", "call_id": cid, "name": "exec_command",
                      "arguments": json.dumps({"cmd": f"sed -n {k * 100},{k * 100 + 150}p src/rates.rs"})})
        items.append({"type": "function_call_output", "call_id": cid, "output": filler(rng, f"rates{k}", 60)})
        items.append(msg("assistant", f"Part {k} of the rates module read."))
        items.append(msg("user", f"Continue with part {k + 1}."))
    return {
        "about": "A chained Responses request (previous_response_id): the history lives on the server and input "
                 "opens with the outputs of three calls the previous response made (a huge exec output, an "
                 "apply_patch_call_output that failed, a shell_call_output with exit code 101), then new turns. "
                 "The outputs' calls are not in the body, by design: they must never be dropped (the stored calls "
                 "would be left unanswered), the huge one may be shortened, the failures stay failures, and the "
                 "new turns may be compacted.",
        "class": "B4 chained body",
        "format": "openai-responses",
        "budget": 1500,
        "allow_open_tail": False,
        "expect": {"valid": True, "under_budget": True, "keeps_failure": ["call_k02S2", "call_k02S3"]},
        "source": "../shared/PROVIDER_RULES.md B1, B4; platform.openai.com function calling with previous_response_id",
        "x_checks": {
            "must_contain": ["call_k02S1", "call_k02S2", "call_k02S3", "\"previous_response_id\": \"resp_k02prev\""],
            "envelope_unchanged": True,
            "single_marker": True,
        },
        "request": {"model": "gpt-5.5", "previous_response_id": "resp_k02prev", "store": True, "input": items},
    }


def k03(rng):
    items = [
        {"type": "item_reference", "id": "fc_k03stored"},
        {"type": "custom_tool_call_output", "call_id": "call_k03C1", "output": filler(rng, "grep", 120)},
        msg("user", "Good. Now list the open periods."),
    ]
    for k in range(1, 5):
        cid = f"call_k03n{k}"
        items.append({"type": "custom_tool_call", "call_id": cid, "name": "exec", "input": f"ledger periods --page {k}"})
        items.append({"type": "custom_tool_call_output", "call_id": cid, "output": filler(rng, f"periods{k}", 50)})
        items.append(msg("assistant", f"Page {k} listed."))
        items.append(msg("user", "Next page."))
    return {
        "about": "A Responses request in a stored conversation (conversation set): input opens with an "
                 "item_reference to a stored call item and the custom_tool_call_output that answers a call the "
                 "server holds, then new turns of custom tool calls. The reference is never expanded or dropped, "
                 "the leading output is kept (its content may be shortened), and the new turns may be compacted.",
        "class": "B4 chained body",
        "format": "openai-responses",
        "budget": 1200,
        "allow_open_tail": False,
        "expect": {"valid": True, "under_budget": True},
        "source": "../shared/PROVIDER_RULES.md B4 (item_reference, conversation)",
        "x_checks": {
            "must_contain": ["fc_k03stored", "call_k03C1", "\"conversation\": \"conv_k03\""],
            "must_keep_types": ["item_reference"],
            "envelope_unchanged": True,
        },
        "request": {"model": "gpt-5.5", "conversation": "conv_k03", "input": items},
    }


def k04(rng):
    items = [
        msg("developer", "You operate the billing stack. Deploy only from the release branch."),
        msg("user", "Build the release, search for the deploy tool, and deploy billing to staging."),
        reasoning(rng, "rs_k04a", 1),
        {"type": "shell_call", "id": "sh_k04a", "call_id": "call_k04SH1", "status": "completed",
         "action": {"commands": ["make release"], "timeout_ms": 120000}},
        {"type": "shell_call_output", "id": "sho_k04a", "call_id": "call_k04SH1", "output": [
            {"stdout": filler(rng, "make", 40), "stderr": "ld: undefined symbol: ledger_close_v2",
             "outcome": {"type": "exit", "exit_code": 2}}]},
        {"type": "local_shell_call", "id": "lsh_k04b", "call_id": "call_k04LS1", "status": "completed",
         "action": {"type": "exec", "command": ["git", "log", "--oneline", "-20"], "env": {}}},
        {"type": "local_shell_call_output", "id": "call_k04LS1", "output": filler(rng, "log", 20, 6)},
        {"type": "computer_call", "id": "cu_k04c", "call_id": "call_k04CU1", "status": "completed",
         "action": {"type": "screenshot"}, "pending_safety_checks": []},
        {"type": "computer_call_output", "call_id": "call_k04CU1",
         "output": {"type": "computer_screenshot", "image_url": "https://example.invalid/k04/screen.png"}},
        msg("assistant", "The build fails on a missing symbol; I will look for the deploy tool meanwhile."),
        msg("user", "Go on."),
        {"type": "tool_search_call", "id": "tsc_k04", "call_id": "call_k04TS1", "execution": "client",
         "status": "completed", "arguments": {"query": "deploy a service"}},
        {"type": "tool_search_output", "id": "tso_k04", "call_id": "call_k04TS1", "execution": "client",
         "status": "completed", "tools": [{"type": "function", "name": "deploy_service",
                                          "parameters": {"type": "object", "properties": {"service": {"type": "string"}}}}]},
        {"type": "additional_tools", "role": "developer", "tools": [
            {"type": "function", "name": "rollback_service", "parameters": {"type": "object", "properties": {}}}]},
        {"type": "configuration_update", "reasoning": {"effort": "high"}},
        {"type": "program", "id": "pr_k04", "call_id": "call_k04PR1", "code": "for s in services: check(s)",
         "fingerprint": "fp_" + token(rng, 24)},
        {"type": "custom_tool_call", "call_id": "call_k04PC1", "name": "exec", "input": "ledger health --all",
         "caller": {"type": "program", "caller_id": "call_k04PR1"}},
        {"type": "custom_tool_call_output", "call_id": "call_k04PC1", "output": filler(rng, "health", 30),
         "caller": {"type": "program", "caller_id": "call_k04PR1"}},
        {"type": "program_output", "call_id": "call_k04PR1", "result": "all healthy", "status": "completed"},
        {"type": "mcp_approval_request", "id": "mcpr_k04", "server_label": "billing_db", "name": "query",
         "arguments": "{\"sql\": \"select count(*) from invoices\"}"},
        msg("user", "Approved."),
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_k04", "approve": True},
        {"type": "mcp_call", "id": "mcp_k04M1", "approval_request_id": "mcpr_k04", "server_label": "billing_db",
         "name": "query", "arguments": "{\"sql\": \"select count(*) from invoices\"}",
         "error": {"type": "tool_execution_error", "message": "permission denied for table invoices"}},
        {"type": "web_search_call", "id": "ws_k04", "status": "completed",
         "action": {"type": "search", "query": "ledger_close_v2 undefined symbol"}},
        msg("assistant", "The database refused the query; the build still fails."),
    ]
    for k in range(1, 4):
        items.append(msg("user", f"Check service {k}."))
        items.append(reasoning(rng, f"rs_k04r{k}", 10 + k))
        items.append({"type": "function_call", "call_id": f"call_k04D{k}", "name": "deploy_service",
                      "arguments": json.dumps({"service": f"billing-{k}", "dry_run": True})})
        items.append({"type": "function_call_output", "call_id": f"call_k04D{k}", "output": filler(rng, f"dry{k}", 45)})
    items.append(msg("user", "Summarize what is left, then compact."))
    items.append({"type": "compaction_trigger"})
    return {
        "about": "A Responses history with every pair type of the 2026 input union besides function_call: a "
                 "shell_call whose output failed (exit code 2), a local_shell_call answered by an output that "
                 "names the call in `id`, a computer_call with a screenshot, a client tool_search_call whose output "
                 "loads deploy_service (called later), additional_tools and configuration_update items, a program "
                 "with a call it made (caller) and its program_output, an MCP approval request, its response and "
                 "an mcp_call that failed (error), a web_search_call, reasoning items, and a compaction_trigger as "
                 "the last item. Pairs stay whole, the failures stay visible with their cause, the tool search "
                 "stays while deploy_service is called, the tool and effort changes stay in force, the trigger "
                 "stays last.",
        "class": "E5 Responses pair types and state items",
        "format": "openai-responses",
        "budget": 1800,
        "allow_open_tail": False,
        "expect": {"valid": True, "under_budget": True, "keeps_failure": ["call_k04SH1", "mcp_k04M1"]},
        "source": "../shared/PROVIDER_RULES.md B1-B8; openai-python response_input_item_param.py (2026-08)",
        "x_checks": {
            "must_contain": ["deploy_service", "rollback_service", "\"effort\": \"high\""],
            "must_keep_types": ["compaction_trigger", "additional_tools", "configuration_update", "tool_search_output"],
            "reasoning_followers": True,
            "approval_closure": True,
            "envelope_unchanged": True,
            "single_marker": True,
        },
        "request": {"model": "gpt-6-astra", "store": False, "reasoning": {"effort": "medium"},
                    "tools": [{"type": "tool_search", "execution": "client"},
                              {"type": "function", "name": "deploy_service", "defer_loading": True,
                               "parameters": {"type": "object", "properties": {"service": {"type": "string"}}}},
                              {"type": "shell"}, {"type": "local_shell"}, {"type": "apply_patch"},
                              {"type": "custom", "name": "exec"},
                              {"type": "mcp", "server_label": "billing_db", "server_url": "https://example.invalid/mcp"}],
                    "input": items},
    }


def chat_call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def custom_call(cid, name, inp):
    return {"id": cid, "type": "custom", "custom": {"name": name, "input": inp}}


def k05(rng):
    m = [
        {"role": "system", "content": "You maintain the invoicing service."},
        {"role": "user", "content": "Add a due-date column to the invoice export."},
        {"role": "assistant", "content": None, "tool_calls": [
            custom_call("call_k05C1", "shell", "rg -n 'export' invoicing/ -A 30"),
            chat_call("call_k05F1", "read_file", {"path": "invoicing/export.py"})]},
        {"role": "tool", "tool_call_id": "call_k05C1", "content": [{"type": "text", "text": filler(rng, "rg", 90)}]},
        {"role": "tool", "tool_call_id": "call_k05F1", "content": filler(rng, "export.py", 90)},
        {"role": "developer", "content": "RULE-k05: the user is in review mode; propose diffs, apply none until told."},
        {"role": "assistant", "content": "The export builds rows in export.py line 40."},
        {"role": "user", "content": "Show me the test for it."},
        {"role": "assistant", "content": None, "tool_calls": [
            custom_call("call_k05C2", "shell", "pytest invoicing/tests/test_export.py -q")]},
        {"role": "tool", "tool_call_id": "call_k05C2",
         "content": filler(rng, "pytest", 40) + "\nFAILED invoicing/tests/test_export.py::test_columns\nExit code: 1"},
        {"role": "system", "content": "The repository moved to /srv/invoicing; paths above are relative to it."},
        {"role": "assistant", "content": "One test fails already, before any change."},
        {"role": "user", "content": "Print the customer's bank details from the fixtures."},
        {"role": "assistant", "content": None, "refusal": "I can't print bank details."},
    ]
    for k in range(1, 4):
        m.append({"role": "user", "content": f"Read module {k} of the exporter."})
        m.append({"role": "assistant", "content": None, "tool_calls": [
            custom_call(f"call_k05R{k}", "shell", f"sed -n 1,120p invoicing/part{k}.py")]})
        m.append({"role": "tool", "tool_call_id": f"call_k05R{k}", "content": filler(rng, f"part{k}", 45)})
        m.append({"role": "assistant", "content": f"Module {k} read."})
    m.append({"role": "user", "content": "Propose the diff."})
    return {
        "about": "OpenAI Chat Completions with custom (freeform) tool calls ({type: custom, custom: {name, "
                 "input}}) beside a function call in one parallel batch, tool messages with text-part arrays, a "
                 "developer message and a system message in the middle of the history, a failed custom call "
                 "(Exit code: 1) and an assistant refusal. The mid-history instructions stay in force as developer "
                 "and system messages, never as user text; the failure stays visible; each custom call keeps its "
                 "tool message.",
        "class": "E5 instruction messages and custom tools (Chat)",
        "format": "openai-chat",
        "budget": 1300,
        "allow_open_tail": False,
        "expect": {"valid": True, "under_budget": True, "keeps_failure": ["call_k05C2"]},
        "source": "openai-python chat_completion_message_custom_tool_call_param.py, "
                  "chat_completion_developer_message_param.py; ../shared/PROVIDER_RULES.md C1-C5",
        "x_checks": {
            "system_kept": ["RULE-k05", "The repository moved to /srv/invoicing"],
            "envelope_unchanged": True,
            "single_marker": True,
            "marker_frame": True,
        },
        "request": {"model": "gpt-5.4", "reasoning_effort": "none",
                    "tools": [{"type": "custom", "custom": {"name": "shell", "description": "Run a shell line."}},
                              {"type": "function", "function": {"name": "read_file", "parameters": {
                                  "type": "object", "properties": {"path": {"type": "string"}}}}}],
                    "messages": m},
    }


def k06(rng):
    return {
        "about": "OpenAI Chat: a developer message between an assistant tool_calls message and the tool message "
                 "that answers it. System and developer messages may sit anywhere but there (C2): the input is "
                 "invalid and must be refused, naming the unanswered call.",
        "class": "C2 instruction inside a tool-call block",
        "format": "openai-chat",
        "budget": 500,
        "allow_open_tail": False,
        "expect": {"error": "call_k06A"},
        "source": "../shared/PROVIDER_RULES.md C2 (An assistant message with 'tool_calls' must be followed by tool "
                  "messages responding to each 'tool_call_id'.)",
        "request": {"model": "gpt-5.4", "messages": [
            {"role": "user", "content": "List the invoices."},
            {"role": "assistant", "content": None, "tool_calls": [custom_call("call_k06A", "shell", "ls invoices/")]},
            {"role": "developer", "content": "Stay in read-only mode."},
            {"role": "tool", "tool_call_id": "call_k06A", "content": "a.pdf b.pdf"},
            {"role": "assistant", "content": "Two invoices."},
        ]},
    }


def k07(rng):
    return {
        "about": "OpenAI Responses: a custom_tool_call answered by a function_call_output of the same call_id. "
                 "The provider looks for a call of the output's own type (B1.1): the input is invalid and must be "
                 "refused, naming the call id.",
        "class": "B1.1 output type must match the call type",
        "format": "openai-responses",
        "budget": 500,
        "allow_open_tail": False,
        "expect": {"error": "No tool call found for function call output with call_id call_k07X"},
        "source": "../shared/PROVIDER_RULES.md B1 (No tool call found for function call output with call_id call_X.)",
        "request": {"model": "gpt-5.5", "input": [
            msg("user", "Count the invoices."),
            {"type": "custom_tool_call", "call_id": "call_k07X", "name": "exec", "input": "ls invoices | wc -l"},
            {"type": "function_call_output", "call_id": "call_k07X", "output": "2"},
            msg("assistant", "Two."),
        ]},
    }


CASES = [
    ("k01-responses-codex-session-over-budget", k01),
    ("k02-responses-chained-leading-outputs-then-turns", k02),
    ("k03-responses-conversation-item-reference", k03),
    ("k04-responses-every-pair-type-and-state-items", k04),
    ("k05-chat-custom-tools-and-instructions-mid-history", k05),
    ("k06-chat-developer-inside-a-tool-call-block-invalid", k06),
    ("k07-responses-output-of-another-call-type-invalid", k07),
]


def main():
    check = "--check" in sys.argv[1:]
    differ = []
    for name, make in CASES:
        rng = random.Random(name)
        text_out = json.dumps(make(rng), indent=1, ensure_ascii=False) + "\n"
        path = os.path.join(OUT, name + ".json")
        if check:
            old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
            if old != text_out:
                differ.append(path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text_out)
    if differ:
        print("differs from scripts/openai-cases.py's output: " + ", ".join(differ))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
