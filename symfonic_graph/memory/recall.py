"""Memory layers, the retrieval policy, and generic recall.

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
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from neo4j.exceptions import ClientError

from symfonic_graph._store import GraphMemoryStore, check_write_id, tenant_token
from symfonic_graph.errors import (
    MemoryContractError,
    QueryError,
    SchemaError,
    ScopeError,
    SymfonicGraphError,
    ValidationError,
)
from symfonic_graph.memory.triggers import ProspectiveTriggerCapability
from symfonic_graph.shape import _validate as v
from symfonic_graph.shape.scope import MemoryScope

__all__ = [
    "MemoryLayer",
    "RecallHit",
    "RetrievalPolicy",
    "MAX_TERMS",
    "MAX_TERM_CHARS",
    "RECALL_INDEX",
    "escape_lucene",
    "recall",
    "recall_policy_for",
    "recall_search",
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

RECALL_INDEX: Final = "symfonic_memory_text_v3"
"""The full-text index recall queries (migration 0007); it also indexes the tenant token and ``tenant_id``."""
MAX_TERMS: Final = 128
"""At most this many distinct terms of the recall text are searched; the rest is ignored.

Each term is one phrase clause per text field (5), plus two for the tenant:
642 clauses at most, well under Lucene's limit of 1024.
"""
MAX_TERM_CHARS: Final = 255
"""A longer term is cut to this many characters (Lucene's own token length limit)."""
# The text fields of RECALL_INDEX; user terms never search `tenant_id` or the token.
_TEXT_FIELDS: Final = ("label", "context", "condition", "task", "text")
# Characters where Lucene's standard tokenizer (UAX #29) always ends a word, so
# splitting the text there changes no token. A double quote is kept between two
# Hebrew letters (gershayim, as in abbreviations), where the tokenizer keeps it.
_TERM_BREAK = re.compile(
    r'[\s(){}\[\]<>!?*+=|&^~/\\`@#$%-]+|(?<![\u05d0-\u05ea])"|"(?![\u05d0-\u05ea])'
)


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


def _policy(policy: object) -> RetrievalPolicy:
    if policy is None:
        return RetrievalPolicy()
    if not isinstance(policy, RetrievalPolicy):
        raise ValidationError(
            "policy", f"must be a RetrievalPolicy or None, got {type(policy).__name__}; "
            "build one with RetrievalPolicy({MemoryLayer.SEMANTIC, ...})"
        )
    return policy


def _recall_error(exc: ClientError | QueryError) -> SymfonicGraphError | None:
    """A typed error for a server-side failure of the recall query; None if ``exc`` is one already."""
    message = exc.message or str(exc)
    if "no such fulltext schema index" in message.lower():
        return SchemaError(
            f"the full-text index {RECALL_INDEX} is missing: run `symfonic-graph schema apply` "
            "(or `await store.apply_schema()`) to apply migration 0007"
        )
    if isinstance(exc, SymfonicGraphError):
        return None
    return SymfonicGraphError(f"recall failed on the server ({exc.code}): {message}")


def without_prospective_recall(policy: RetrievalPolicy | None = None) -> RetrievalPolicy:
    """``policy`` (default: all layers) without the prospective layer.

    Raises:
        MemoryContractError: if no layer would be left.
        ValidationError: if ``policy`` is not a ``RetrievalPolicy`` or None.

    Example:
        >>> sorted(without_prospective_recall().enabled_layers)
        ['episodic', 'procedural', 'semantic', 'working']
    """
    base = _policy(policy)
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

    Kept for callers that query a full-text index of their own; ``recall``
    builds its query with ``recall_search``. Special characters get a
    backslash; the bare words ``AND``/``OR``/``NOT``/``TO`` are lowercased
    (the index analyzer lowercases terms anyway); at most 256 terms are kept.

    Example:
        >>> print(escape_lucene("what? (a) AND b"))
        what\\? \\(a\\) and b
    """
    terms = text.split()[:_MAX_TERMS]
    escaped = (_LUCENE_SPECIAL.sub(r"\\\1", term) for term in terms)
    return " ".join(_LUCENE_OPERATOR.sub(lambda m: m.group(1).lower(), term) for term in escaped)


def _searchable(term: str) -> bool:
    """True iff the term holds a character Lucene's tokenizer can make a token of."""
    return any(ch.isalnum() or unicodedata.category(ch) == "So" for ch in term)


def _phrase(text: str) -> str:
    """``text`` as a Lucene phrase: only ``\\`` and ``"`` are special inside quotes."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def recall_search(tenant_id: str, text: str, *, unstamped: bool = False) -> str:
    """The Lucene query recall sends for ``text`` in ``tenant_id``; ``""`` when nothing is searchable.

    Shape: ``+symfonic_tenant_token:<token>^0 +(label:(<terms>) context:(<terms>) ...)``.
    The tenant is a required clause on its token (``store.tenant_token``: one
    alphanumeric word, the same for the query and the index), so the
    full-text search itself yields only the tenant's nodes: never those of a
    tenant whose id shares words with it (``acme`` and ``acme-eu``), and a
    tenant id without letters or digits (``---``) is as exact as any other.
    Boost 0 keeps the clause out of the score, so a node that matched only
    the tenant scores 0 and recall drops it. With ``unstamped``, the clause
    also accepts the phrase over the tokenised ``tenant_id``, for nodes seeded
    with plain Cypher that have no token yet (``memory_recall`` uses it only
    while such nodes exist); that phrase may also match tenants whose ids
    contain the words in order, which the exact Cypher equality removes.

    The text is split at whitespace and at characters where Lucene's
    tokenizer ends a word anyway (``-``, ``/``, brackets, operators, ...);
    terms without a letter, digit or symbol are skipped, duplicates (ignoring
    case) dropped, each term is cut to ``MAX_TERM_CHARS`` characters and the
    first ``MAX_TERMS`` are kept. Each term is a quoted phrase, so Lucene
    syntax in it is literal and it costs one clause per field however many
    tokens it holds. The result is a parameter value, never query text.

    Example:
        >>> print(recall_search("acme-eu", "invoice?"))  # doctest: +NORMALIZE_WHITESPACE
        +symfonic_tenant_token:t1c5adebcd1efbb6840864459b4583470495a9317e96b9bf99b7fd3b66506c774^0
        +(label:("invoice") context:("invoice") condition:("invoice") task:("invoice") text:("invoice"))
        >>> recall_search("acme", "?? -- **")
        ''
    """
    terms: dict[str, str] = {}
    for piece in _TERM_BREAK.split(text):
        term = piece[:MAX_TERM_CHARS]
        if term and _searchable(term):
            terms.setdefault(term.lower(), term)
            if len(terms) == MAX_TERMS:
                break
    if not terms:
        return ""
    group = "(" + " ".join(_phrase(t) for t in terms.values()) + ")"
    fields = " ".join(f"{field}:{group}" for field in _TEXT_FIELDS)
    tenant = f"symfonic_tenant_token:{tenant_token(tenant_id)}"
    if unstamped:
        tenant = f"({tenant} tenant_id:{_phrase(tenant_id)})"
    return f"+{tenant}^0 +({fields})"


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

    One full-text query (index ``symfonic_memory_text_v3``) built by
    ``recall_search``: the tenant's exact token is a required clause of the
    search itself, so the cost does not grow with other tenants' data, and the ``WHERE``
    then enforces the scope's visibility exactly, the markers, approved
    skills and pending triggers. ``query`` may be any text, a pasted
    message or document included: Lucene syntax in it is literal, and only
    its first ``MAX_TERMS`` distinct terms are searched. A query with nothing
    searchable (blank, punctuation only) returns ``[]``. Layers without
    graph backing (episodic, working) contribute nothing.

    Args:
        store: the graph.
        scope: whose memory to search.
        query: free text, e.g. the user's message.
        policy: the layers to search; None means every layer.
        limit: the most hits to return (1..1000).
        write_id: also see the nodes of this staged write.

    Raises:
        ValidationError: ``query`` is not a string or not valid Unicode (a
            lone surrogate), ``limit`` is out of range, ``policy`` or
            ``write_id`` is malformed.
        ScopeError: ``scope`` is not a ``MemoryScope``.
        SchemaError: the recall index is missing (run ``apply_schema``).
        StoreUnavailableError: Neo4j did not answer in time, or is down.

    Example:
        >>> [str(h) for h in await recall(store, MemoryScope("acme"), "invoice")]
        ['[prospective] user mentions the invoice -> Say it is overdue.']
    """
    if not isinstance(scope, MemoryScope):
        raise ScopeError(f"scope must be a MemoryScope, got {type(scope).__name__}")
    if not isinstance(query, str):
        raise ValidationError("query", f"must be a string, got {type(query).__name__}; pass the text to search for")
    try:
        v.encodable("query", query)
    except ValidationError as exc:
        raise ValidationError(
            "query", f"{exc.problem}; decode the text with errors='replace', or drop the lone surrogates"
        ) from None
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIMIT:
        shown = repr(limit) if isinstance(limit, int) and not isinstance(limit, bool) else type(limit).__name__
        raise ValidationError(
            "limit", f"must be an int from 1 to {_MAX_LIMIT} (the most hits to return), got {shown[:40]}"
        )
    chosen = _policy(policy)
    wid = check_write_id(write_id)
    labels = sorted(_LABELS[layer] for layer in chosen.enabled_layers if layer in _LABELS)
    search = recall_search(scope.tenant_id, query)
    if not labels or not search:
        return []
    try:
        rows = await store.read(
            "memory_recall", **scope.params(), write_id=wid, search=search,
            search_unstamped=recall_search(scope.tenant_id, query, unstamped=True), labels=labels, limit=limit,
        )
    except (ClientError, QueryError) as exc:
        error = _recall_error(exc)
        if error is None:
            raise
        raise error from exc
    hits = []
    for row in rows:
        if not scope.sees(row.get("tenant_id"), row.get("namespace")):
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
