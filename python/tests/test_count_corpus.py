"""Python's ``count`` gives what ``compactor count --json`` gives, on every corpus session that
loads as a conversation: the same ``model_tokens`` (total, counted, tool calls and counting)
and the same breakdown, for the body's own model, for ``claude-opus-4-6`` and for no model."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

import compactor

from conftest import CORPUS

OPUS = "claude-opus-4-6"
# Every session the Rust corpus test pins (tests/all/corpus.rs LOGS): the files that load.
SESSIONS = sorted(p for p in CORPUS.glob("*") if p.name.startswith(("cc_", "codex_", "miniswe_")))


def cli_count(cli: pathlib.Path, path: pathlib.Path, *extra: str) -> dict:
    done = subprocess.run([str(cli), "count", str(path), "--json", *extra], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def split(counted: dict) -> tuple[dict, dict]:
    """A Python count as the CLI's two parts: ``model_tokens`` and the breakdown."""
    breakdown = dict(counted)
    return breakdown.pop("model_tokens"), breakdown


def test_the_sessions_are_there():
    assert len(SESSIONS) == 10, f"expected the 10 sessions of {CORPUS}: {SESSIONS}"


@pytest.fixture(scope="module")
def shared_compactor():
    return compactor.Compactor()


@pytest.mark.parametrize("session", SESSIONS, ids=lambda p: p.stem)
def test_python_count_is_the_cli_count(session, cli, tmp_path, shared_compactor):
    loaded = compactor.load(session)
    own = cli_count(cli, session)
    model_tokens, breakdown = split(compactor.count(loaded.body))
    assert model_tokens == own["model_tokens"]
    assert breakdown == own["breakdown"]
    assert split(shared_compactor.count(loaded.body))[0] == own["model_tokens"]
    assert model_tokens["counting"]["model"] == loaded.body.get("model")
    # The figure compaction budgets with: a budget above it leaves the body as it is.
    report = shared_compactor.compact(loaded.body, budget=10 * model_tokens["total"] + 1000).report
    assert (report["status"], report["tokens_before"]) == ("unchanged", model_tokens["total"])

    explicit = cli_count(cli, session, "--model", OPUS)["model_tokens"]
    assert split(compactor.count(loaded.body, model=OPUS))[0] == explicit
    assert split(shared_compactor.count(loaded.body, model=OPUS))[0] == explicit
    assert explicit["counting"]["model"] == OPUS
    assert explicit["total"] == split(compactor.count({**loaded.body, "model": OPUS}))[0]["total"]

    # No model anywhere: the body's own messages as a bare list.
    key = "input" if loaded.format == "openai-responses" else "messages"
    bare = loaded.body[key]
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    unnamed = cli_count(cli, tmp_path / "bare.json", "--format", loaded.format)["model_tokens"]
    assert split(compactor.count(bare, format=loaded.format))[0] == unnamed
    assert (unnamed["counting"]["model"], unnamed["counting"]["source"]) == (None, "counter")
    assert unnamed["total"] == unnamed["counted"]
