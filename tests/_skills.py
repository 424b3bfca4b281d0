"""The one skill builder of the tests, and tiny message helpers (no database).

``skill`` builds a skill as the pure rules see it (an id and a ``metadata``
mapping, duck-typed like a ``Skill``); every test that needs one without a
database builds it here.

Example:
    >>> skill("issue_refund", ["verify_identity"], label="Refunds").metadata["precondition"]
    ['verify_identity']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage


@dataclass(frozen=True)
class FakeSkill:
    """A skill as the pure rules see it: an id and a ``metadata`` mapping."""

    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    tenant_id: str | None = None
    namespace: str | None = None


def skill(
    action_tool: str | None = None,
    precondition: Any = None,
    *,
    label: str | None = "L",
    steps: list[str] | None = None,
    id: str | None = None,
    enforcement: str | None = None,
    tenant_id: str | None = None,
) -> FakeSkill:
    """A FakeSkill with every metadata key a stored skill has (``enforcement`` only when given)."""
    metadata = {
        "label": label,
        "steps": steps or [],
        "action_tool": action_tool,
        "context": "",
        "status": "approved",
        "source": "authored:test",
        "identifier": None,
        "precondition": precondition,
    }
    if enforcement is not None:
        metadata["enforcement"] = enforcement
    return FakeSkill(metadata=metadata, id=id, tenant_id=tenant_id)


def state_pred(path: Any, op: Any, *value: Any) -> dict[str, Any]:
    """A ``{"state": {...}}`` precondition item; ``value`` only when given."""
    inner: dict[str, Any] = {"path": path, "op": op}
    if value:
        inner["value"] = value[0]
    return {"state": inner}


def ai(*calls: tuple[str, str], content: str = "") -> AIMessage:
    """An AI message requesting ``(call_id, tool_name)`` calls."""
    return AIMessage(content=content, tool_calls=[{"id": i, "name": n, "args": {}} for i, n in calls])


def result(call_id: str, name: str | None = None, content: str = "ok") -> ToolMessage:
    """A tool result message."""
    return ToolMessage(content=content, tool_call_id=call_id, name=name)
