"""A typed, located violation of a provider rule, as the guard reports it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Violation"]

_COMMON = ("path", "message", "block", "rule", "detail", "text")


@dataclass(frozen=True)
class Violation:
    """One broken rule, with where it is.

    Attributes:
        path: JSON path in the wire format's terms (``messages[3].content[1]``,
            ``messages[3].tool_calls[0]``, ``input[7]``).
        message: index of the message (or Responses item), ``None`` for the whole request.
        block: index of the block inside the message's content, when a block is at fault.
        rule: the rule's name (``orphan_result``, ``missing_results``, ``first_not_user``, ...).
        detail: what is wrong, in words.
        fields: the rule's own fields (``id``, ``ids``, ``role``, ``expected``, ...).

    ``str(v)`` is ``PATH: WHAT``, as ``compactor validate`` prints it.
    """

    path: str
    message: int | None
    block: int | None
    rule: str
    detail: str
    fields: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Violation":
        """Builds a violation from the native module's dict."""
        return cls(
            path=d["path"],
            message=d.get("message"),
            block=d.get("block"),
            rule=d["rule"],
            detail=d.get("detail", ""),
            fields={k: v for k, v in d.items() if k not in _COMMON},
        )

    def __str__(self) -> str:
        return f"{self.path}: {self.detail}" if self.path else self.detail
