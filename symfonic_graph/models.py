"""What reads return, and the one projection from Neo4j rows to them.

Every read path builds its objects here, so no field is kept on one path and
dropped on another. Rows seeded by hand with a wrong shape are skipped (or a
bad predicate kept so that it fails closed) and logged once per node.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

log = logging.getLogger("symfonic_graph.models")

STATE_OPS = frozenset({"eq", "neq", "in", "exists"})
SKILL_STATUSES = frozenset({"approved", "draft", "rejected"})
_logged: set[tuple[str, str]] = set()
_MAX_LOGGED = 10_000

PreconditionItem = str | dict[str, Any]


def _log_once(node_id: str, problem: str) -> None:
    key = (node_id, problem)
    if key in _logged:
        return
    if len(_logged) < _MAX_LOGGED:
        _logged.add(key)
    log.warning("skipping malformed graph data on node %s: %s (run `symfonic-graph doctor`)", node_id, problem)


def _as_datetime(value: object) -> datetime | None:
    to_native = getattr(value, "to_native", None)
    if callable(to_native):
        native = to_native()
        return native if isinstance(native, datetime) else None
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


class Skill(BaseModel):
    """A procedural-memory skill as read from the graph.

    Example:
        >>> skill.metadata["precondition"]
        ['get_integration_status', {'state': {'path': 'channel', 'op': 'eq', 'value': 'slack'}}]
    """

    model_config = ConfigDict(frozen=True)

    id: str
    tenant_id: str
    namespace: str | None
    label: str
    identifier: str | None
    steps: tuple[str, ...]
    action_tool: str | None
    context: str
    status: str
    active: bool
    source: str | None
    created_at: datetime | None
    precondition: tuple[PreconditionItem, ...] | None
    retracted: bool = False
    staged: bool = False

    @property
    def metadata(self) -> dict[str, Any]:
        """The mapping the gate and pre-flight read (SPEC §3)."""
        return {
            "label": self.label,
            "steps": list(self.steps),
            "action_tool": self.action_tool,
            "context": self.context,
            "status": self.status,
            "source": self.source,
            "identifier": self.identifier,
            "precondition": None if self.precondition is None else list(self.precondition),
        }


class Trigger(BaseModel):
    """A stored reminder: when ``condition`` holds, offer ``task``."""

    model_config = ConfigDict(frozen=True)

    id: str
    tenant_id: str
    namespace: str | None
    condition: str
    task: str
    status: str
    created_at: datetime | None
    resolved_at: datetime | None


class Fact(BaseModel):
    """A semantic-memory fact: one sentence of text."""

    model_config = ConfigDict(frozen=True)

    id: str
    tenant_id: str
    namespace: str | None
    text: str
    created_at: datetime | None


def _str_or_none(props: Mapping[str, Any], key: str) -> tuple[bool, str | None]:
    value = props.get(key)
    return (value is None or isinstance(value, str)), value


def _precondition_item(node_id: str, entry: Mapping[str, Any]) -> PreconditionItem | None:
    kind = entry.get("kind")
    if kind == "tool":
        tool = entry.get("tool")
        if isinstance(tool, str) and tool.strip():
            return tool
        _log_once(node_id, "tool precondition without a string `tool`")
        return None
    if kind == "text":
        text = entry.get("text")
        if isinstance(text, str):
            return text
        _log_once(node_id, "text precondition without a string `text`")
        return None
    if kind == "state":
        # Kept even when malformed: predicate evaluation fails closed on it.
        pred: dict[str, Any] = {"path": entry.get("path"), "op": entry.get("op")}
        if "value" in entry and entry["value"] is not None:
            pred["value"] = entry["value"]
        if not isinstance(pred["path"], str) or pred["op"] not in STATE_OPS:
            _log_once(node_id, f"state precondition with path={pred['path']!r} op={pred['op']!r} never holds")
        return {"state": pred}
    _log_once(node_id, f"precondition of unknown kind {kind!r}")
    return None


def _preconditions(node_id: str, entries: Sequence[Mapping[str, Any]]) -> tuple[PreconditionItem, ...] | None:
    items: list[PreconditionItem] = []
    for entry in entries:
        if not isinstance(entry.get("position"), int) or isinstance(entry.get("position"), bool):
            _log_once(node_id, "REQUIRES relationship without an integer `position`")
            continue
        item = _precondition_item(node_id, entry)
        if item is not None:
            items.append(item)
    return tuple(items) if items else None


def skill_from_row(row: Mapping[str, Any]) -> Skill | None:
    """Build a Skill from a ``skills_visible``-shaped row, or None if malformed."""
    props: Mapping[str, Any] = row["skill"]
    node_id = props.get("id")
    if not isinstance(node_id, str):
        _log_once(repr(node_id), "skill without a string `id`")
        return None
    problems = []
    for key in ("namespace", "identifier", "action_tool", "source"):
        ok, _ = _str_or_none(props, key)
        if not ok:
            problems.append(f"`{key}` is not a string")
    label = props.get("label")
    if not isinstance(label, str):
        problems.append("`label` is not a string")
    steps = props.get("steps", [])
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        problems.append("`steps` is not a list of strings")
    context = props.get("context", "")
    if not isinstance(context, str):
        problems.append("`context` is not a string")
    active = props.get("active", True)
    if not isinstance(active, bool):
        problems.append("`active` is not a boolean")
    if problems:
        _log_once(node_id, "; ".join(problems))
        return None
    if row.get("foreign"):
        _log_once(node_id, f"{row['foreign']} precondition(s) without this skill's tenant_id were ignored")
    labels = row.get("labels") or ()
    return Skill(
        id=node_id,
        tenant_id=props["tenant_id"],
        namespace=props.get("namespace"),
        label=str(label),
        identifier=props.get("identifier"),
        steps=tuple(steps),
        action_tool=props.get("action_tool"),
        context=str(context),
        status=props.get("status", ""),
        active=bool(active),
        source=props.get("source"),
        created_at=_as_datetime(props.get("created_at")),
        precondition=_preconditions(node_id, row.get("preconditions") or ()),
        retracted="SymfonicRetracted" in labels,
        staged="SymfonicUnpublished" in labels,
    )


def trigger_from_row(props: Mapping[str, Any]) -> Trigger | None:
    """Build a Trigger from its node's properties, or None if malformed."""
    node_id = props.get("id")
    if not isinstance(node_id, str):
        _log_once(repr(node_id), "trigger without a string `id`")
        return None
    for key in ("condition", "task"):
        if not isinstance(props.get(key), str):
            _log_once(node_id, f"trigger `{key}` is not a string")
            return None
    ok, _ = _str_or_none(props, "namespace")
    if not ok:
        _log_once(node_id, "trigger `namespace` is not a string")
        return None
    return Trigger(
        id=node_id,
        tenant_id=props["tenant_id"],
        namespace=props.get("namespace"),
        condition=props["condition"],
        task=props["task"],
        status=props.get("status", ""),
        created_at=_as_datetime(props.get("created_at")),
        resolved_at=_as_datetime(props.get("resolved_at")),
    )


def fact_from_row(props: Mapping[str, Any]) -> Fact | None:
    """Build a Fact from its node's properties, or None if malformed."""
    node_id = props.get("id")
    if not isinstance(node_id, str) or not isinstance(props.get("text"), str):
        _log_once(repr(node_id), "fact without a string `id` and `text`")
        return None
    return Fact(
        id=node_id,
        tenant_id=props["tenant_id"],
        namespace=props.get("namespace"),
        text=props["text"],
        created_at=_as_datetime(props.get("created_at")),
    )
