"""Memory layers, the retrieval policy, and generic recall (SPEC §7).

Generic recall searches the memory layers by text. By default it searches
every layer, so a pending reminder also surfaces as a bare
``[prospective] <condition> -> <task>`` line, outside the evaluator's
decision. A deployment that composes ``ProspectiveTriggerCapability`` usually
wants reminders offered only through it: ``recall_policy_for(capabilities)``
drops the prospective layer in exactly that case. Nothing applies it by
default.

Example:
    >>> policy = recall_policy_for(capabilities)
    >>> [str(hit) for hit in await recall(store, scope, "invoice", policy)]
    ['[semantic] Invoices are due on the 5th.']
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from symfonic_graph.errors import MemoryContractError, ValidationError
from symfonic_graph.scope import MemoryScope
from symfonic_graph.store import GraphMemoryStore, check_write_id
from symfonic_graph.triggers import ProspectiveTriggerCapability

__all__ = [
    "MemoryLayer",
    "RecallHit",
    "RetrievalPolicy",
    "escape_lucene",
    "recall",
    "recall_policy_for",
    "without_prospective_recall",
]

log = logging.getLogger("symfonic_graph.recall")


class MemoryLayer(StrEnum):
    """The memory layers recall can search.

    ``episodic`` and ``working`` have no graph backing in this library:
    enabling them is allowed and recall returns nothing from them.

    Example:
        >>> MemoryLayer("prospective") is MemoryLayer.PROSPECTIVE
        True
    """

    SEMANTIC = "semantic"
    EPISODIC = "episodic"
    PROCEDURAL = "procedural"
    PROSPECTIVE = "prospective"
    WORKING = "working"


# The node label backing each layer; layers absent here have no graph backing.
_LABELS: Final[dict[MemoryLayer, str]] = {
    MemoryLayer.SEMANTIC: "Fact",
    MemoryLayer.PROCEDURAL: "Skill",
    MemoryLayer.PROSPECTIVE: "Trigger",
}
_LAYER_OF_LABEL: Final = {label: layer for layer, label in _LABELS.items()}
_LUCENE_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')
_LUCENE_OPERATOR = re.compile(r"\b(AND|OR|NOT|TO)\b")
_MAX_TERMS: Final = 256
_MAX_LIMIT: Final = 1000


def _layers(value: object) -> frozenset[MemoryLayer]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise MemoryContractError(
            f"enabled_layers must be a collection of MemoryLayer, got {type(value).__name__}"
        )
    out = set()
    for item in value:
        try:
            out.add(MemoryLayer(item))
        except ValueError:
            raise MemoryContractError(
                f"unknown memory layer {item!r}; use one of {[m.value for m in MemoryLayer]}"
            ) from None
    if not out:
        raise MemoryContractError("a retrieval policy needs at least one enabled layer; it would recall nothing")
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class RetrievalPolicy:
    """Which memory layers generic recall searches (default: all five).

    Layers may be given as ``MemoryLayer`` members or their string values; an
    empty set or an unknown layer raises ``MemoryContractError``.

    Example:
        >>> RetrievalPolicy({"semantic", MemoryLayer.PROCEDURAL}).allows(MemoryLayer.PROSPECTIVE)
        False
    """

    enabled_layers: frozenset[MemoryLayer] = field(default_factory=lambda: frozenset(MemoryLayer))

    def __post_init__(self) -> None:
        object.__setattr__(self, "enabled_layers", _layers(self.enabled_layers))

    def allows(self, layer: MemoryLayer | str) -> bool:
        """True iff recall searches ``layer`` under this policy."""
        return MemoryLayer(layer) in self.enabled_layers


def without_prospective_recall(policy: RetrievalPolicy | None = None) -> RetrievalPolicy:
    """``policy`` (default: all layers) without the prospective layer.

    Raises:
        MemoryContractError: if no layer would be left.

    Example:
        >>> sorted(without_prospective_recall().enabled_layers)
        ['episodic', 'procedural', 'semantic', 'working']
    """
    base = RetrievalPolicy() if policy is None else policy
    if not isinstance(base, RetrievalPolicy):
        raise TypeError(f"policy must be a RetrievalPolicy or None, got {type(base).__name__}")
    remaining = base.enabled_layers - {MemoryLayer.PROSPECTIVE}
    if not remaining:
        raise MemoryContractError(
            "dropping prospective recall leaves no layer to recall from; "
            "enable another layer in the policy, or do not recall at all"
        )
    return base if remaining == base.enabled_layers else RetrievalPolicy(remaining)


def recall_policy_for(
    capabilities: Iterable[object], policy: RetrievalPolicy | None = None
) -> RetrievalPolicy | None:
    """The recall policy to use beside ``capabilities``.

    When a ``ProspectiveTriggerCapability`` is among them, reminders are its
    job: the result is ``without_prospective_recall(policy)``. Otherwise
    ``policy`` is returned unchanged (``None`` stays ``None``).

    Example:
        >>> recall_policy_for([]) is None
        True
    """
    if any(isinstance(c, ProspectiveTriggerCapability) for c in capabilities):
        return without_prospective_recall(policy)
    return policy


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One recalled memory; ``str(hit)`` is its prompt line ``[layer] content``.

    ``content`` is the skill label (procedural), ``"<condition> -> <task>"``
    (prospective; just the task when the condition is empty) or the fact
    text (semantic).

    Example:
        >>> str(RecallHit(MemoryLayer.SEMANTIC, "f-1", "Invoices are due on the 5th.", 1.2))
        '[semantic] Invoices are due on the 5th.'
    """

    layer: MemoryLayer
    node_id: str
    content: str
    score: float

    def __str__(self) -> str:
        return f"[{self.layer.value}] {self.content}"


def escape_lucene(text: str) -> str:
    """``text`` with every Lucene operator made literal (the result is a parameter value).

    Special characters get a backslash; the bare words ``AND``/``OR``/``NOT``/``TO``
    are lowercased (the index analyzer lowercases terms anyway); at most 256
    terms are kept.

    Example:
        >>> print(escape_lucene("what? (a) AND b"))
        what\\? \\(a\\) and b
    """
    terms = text.split()[:_MAX_TERMS]
    escaped = (_LUCENE_SPECIAL.sub(r"\\\1", term) for term in terms)
    return " ".join(_LUCENE_OPERATOR.sub(lambda m: m.group(1).lower(), term) for term in escaped)


def _content(row: dict[str, Any], layer: MemoryLayer) -> str | None:
    if layer is MemoryLayer.PROCEDURAL:
        value = row.get("label")
    elif layer is MemoryLayer.SEMANTIC:
        value = row.get("text")
    else:
        task, condition = row.get("task"), row.get("condition")
        if not isinstance(task, str) or not task.strip():
            return None
        if isinstance(condition, str) and condition.strip():
            return f"{_one_line(condition)} -> {_one_line(task)}"
        return _one_line(task)
    return _one_line(value) if isinstance(value, str) and value.strip() else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


async def recall(
    store: GraphMemoryStore,
    scope: MemoryScope,
    query: str,
    policy: RetrievalPolicy | None = None,
    *,
    limit: int = 10,
    write_id: str | None = None,
) -> list[RecallHit]:
    """Search the policy's layers for ``query``; best hits first.

    One full-text query (index ``symfonic_memory_text``) whose ``WHERE``
    enforces the scope's visibility, the markers, approved skills and pending
    triggers. ``query`` is escaped (see ``escape_lucene``) and passed as a
    parameter; a blank query returns ``[]``. Layers without graph backing
    (episodic, working) contribute nothing.

    Args:
        store: the graph.
        scope: whose memory to search.
        query: free text, e.g. the user's message.
        policy: the layers to search; None means every layer.
        limit: the most hits to return (1..1000).
        write_id: also see the nodes of this staged write.

    Example:
        >>> [str(h) for h in await recall(store, MemoryScope("acme"), "invoice")]
        ['[prospective] user mentions the invoice -> Say it is overdue.']
    """
    if not isinstance(query, str):
        raise ValidationError("query", f"must be a string, got {type(query).__name__}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIMIT:
        raise ValidationError("limit", f"must be an int from 1 to {_MAX_LIMIT}")
    chosen = RetrievalPolicy() if policy is None else policy
    if not isinstance(chosen, RetrievalPolicy):
        raise TypeError(f"policy must be a RetrievalPolicy or None, got {type(chosen).__name__}")
    labels = sorted(_LABELS[layer] for layer in chosen.enabled_layers if layer in _LABELS)
    search = escape_lucene(query)
    if not labels or not search:
        return []
    rows = await store.read(
        "memory_recall", **scope.params(), write_id=check_write_id(write_id),
        search=search, labels=labels, limit=limit,
    )
    hits = []
    for row in rows:
        if not scope.owns(row.get("tenant_id"), row.get("namespace")):
            log.error("dropped recall hit %s: it does not belong to tenant %r namespace %r; "
                      "this is an isolation bug, please report it", row.get("id"), scope.tenant_id, scope.namespace)
            continue
        layer = _LAYER_OF_LABEL.get(row.get("kind") or "")
        node_id = row.get("id")
        if layer is None or not chosen.allows(layer) or not isinstance(node_id, str):
            continue
        content = _content(row, layer)
        if content is not None:
            hits.append(RecallHit(layer, node_id, content, float(row.get("score") or 0.0)))
    return hits
