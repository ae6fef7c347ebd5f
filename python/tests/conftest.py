"""Shared fixtures: the corpus in ../shared/corpus (read, never copied) and the checker."""

from __future__ import annotations

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus"
CHECKER = SHARED / "tools" / "check_request.py"


def corpus_sessions() -> list[pathlib.Path]:
    """Every Claude Code session of the corpus (``cc_*.jsonl``)."""
    return sorted(CORPUS.glob("cc_*.jsonl"))


@pytest.fixture(scope="session")
def checker() -> pathlib.Path:
    if not CHECKER.exists():
        pytest.fail(f"missing independent checker {CHECKER} (../shared/tools/check_request.py)")
    return CHECKER
