"""Shared fixtures: the corpus in ../shared/corpus (read, never copied), the checker and the
``compactor`` binary."""

from __future__ import annotations

import os
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


def cli_path() -> pathlib.Path:
    """The ``compactor`` binary: ``$COMPACTOR_BIN``, else ``release/compactor`` under
    ``$CARGO_TARGET_DIR`` or the repository's ``target`` (``cargo build --release`` makes it)."""
    if os.environ.get("COMPACTOR_BIN"):
        return pathlib.Path(os.environ["COMPACTOR_BIN"])
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    return target / "release" / "compactor"


@pytest.fixture(scope="session")
def cli() -> pathlib.Path:
    path = cli_path()
    if not path.exists():
        pytest.fail(f"missing the compactor binary {path} (cargo build --release, or set COMPACTOR_BIN)")
    return path
