"""Exceptions of the compactor package; each carries where the fault is as attributes.

Raised by the native module (``compactor._native``) and by the wrappers in this package.
All derive from :class:`CompactorError`; the input errors also derive from :class:`ValueError`.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from .violation import Violation

__all__ = ["CompactorError", "FormatError", "InvalidInputError", "ConfigError", "RecallError"]

_INDEX = re.compile(r"^(?:messages|input)\[(\d+)\]")


def _message_index(path: str | None) -> int | None:
    """The message index a JSON path starts with (``messages[3].content[1]`` -> 3)."""
    if not path:
        return None
    m = _INDEX.match(path)
    return int(m.group(1)) if m else None


class CompactorError(Exception):
    """Base class of every error this package raises on purpose."""


class FormatError(CompactorError, ValueError):
    """The input is not a request body of the expected format.

    Attributes:
        path: JSON path of the element at fault (``messages[3].content[1].id``), ``line N``
            for a JSONL session log, ``input`` for a whole file, or ``None`` when the format
            could not be told at all.
        message_index: index of the message the path points into, or ``None``.
        detail: what is wrong, without the path.
    """

    def __init__(self, message: str, *, path: str | None = None, detail: str | None = None):
        super().__init__(message)
        self.path = path
        self.detail = detail if detail is not None else message
        self.message_index = _message_index(path)

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), str(self), {"path": self.path, "detail": self.detail}))


class InvalidInputError(CompactorError, ValueError):
    """The input breaks the provider's rules, so compacting it would hide the fault.

    Attributes:
        violations: every broken rule, in message order (:class:`Violation`).
        path: JSON path of the first violation (``None`` for an empty history).
        message_index: message index of the first violation, or ``None``.
    """

    def __init__(self, message: str, *, violations: Iterable[Violation | dict[str, Any]] = ()):
        super().__init__(message)
        self.violations = [v if isinstance(v, Violation) else Violation.from_dict(v) for v in violations]
        first = self.violations[0] if self.violations else None
        self.path = first.path if first else None
        self.message_index = first.message if first else None

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), str(self), {"violations": self.violations}))


class ConfigError(CompactorError, ValueError):
    """The configuration cannot be loaded.

    Attributes:
        key: the dotted key at fault (``budget.trigger``; ``strategy`` for an unknown preset),
            or ``None`` when the file itself cannot be read or parsed.
    """

    def __init__(self, message: str, *, key: str | None = None):
        super().__init__(message)
        self.key = key

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), str(self), {"key": self.key}))


class RecallError(CompactorError, LookupError):
    """A recall id gave no original (:meth:`compactor.Compactor.recall`).

    Attributes:
        kind: ``evicted`` (kept, then evicted by ``[recall] max_bytes``), ``unknown`` (never
            kept by this pipeline), ``malformed`` (not ``rc_`` and 32 hex digits) or
            ``disabled`` (``[recall] enabled = false``).
        id: the id asked for.
    """

    def __init__(self, message: str, *, kind: str = "unknown", id: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.id = id

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), str(self), {"kind": self.kind, "id": self.id}))


def _rebuild(cls: type, message: str, attrs: dict[str, Any]) -> Exception:
    return cls(message, **attrs)
