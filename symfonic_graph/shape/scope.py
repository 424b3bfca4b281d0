"""MemoryScope: whose memory a read or write touches."""

from __future__ import annotations

import unicodedata
import warnings
from dataclasses import dataclass

from symfonic_graph.errors import ScopeError

_MAX_ID_LENGTH = 512


def _check_id(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise ScopeError(f"{field} must be a str, got {type(value).__name__}")
    if not value:
        raise ScopeError(f"{field} must be a non-empty string")
    if len(value) > _MAX_ID_LENGTH:
        raise ScopeError(f"{field} is longer than {_MAX_ID_LENGTH} characters")
    for ch in value:
        category = unicodedata.category(ch)
        if category == "Cc":
            raise ScopeError(
                f"{field} must not contain control characters (found {ch!r}); "
                "strip them before building the scope"
            )
        if category == "Cs":
            raise ScopeError(f"{field} must be valid Unicode text (found a lone surrogate {ch!r})")
    return value


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """The tenant (and optionally one namespace inside it) a call works in.

    A node is visible to ``MemoryScope(t, ns)`` iff its ``tenant_id`` is ``t``
    and its ``namespace`` is null or ``ns``. A scope without a namespace sees
    tenant-wide nodes only.

    Example:
        >>> MemoryScope("acme", namespace="user-42")
        MemoryScope(tenant_id='acme', namespace='user-42')
    """

    tenant_id: str
    namespace: str | None = None

    def __post_init__(self) -> None:
        _check_id("tenant_id", self.tenant_id)
        if self.namespace is not None:
            _check_id("namespace", self.namespace)

    def params(self) -> dict[str, str | None]:
        """The query parameters every scoped Cypher statement takes."""
        return {"tenant_id": self.tenant_id, "namespace": self.namespace}

    def sees(self, tenant_id: object, namespace: object) -> bool:
        """True iff a node with these properties is visible to this scope (its tenant; tenant-wide or its namespace).

        Example:
            >>> MemoryScope("acme", "u1").sees("acme", None), MemoryScope("acme").sees("acme", "u1")
            (True, False)
        """
        return tenant_id == self.tenant_id and (namespace is None or namespace == self.namespace)

    def owns(self, tenant_id: object, namespace: object) -> bool:
        """Deprecated alias of ``sees``, removed in 0.3.0 (a scope sees tenant-wide nodes but owns only its own)."""
        warnings.warn("MemoryScope.owns is deprecated and removed in 0.3.0: use MemoryScope.sees (the same answer)",
                      DeprecationWarning, stacklevel=2)
        return self.sees(tenant_id, namespace)


def describe_scope(scope: MemoryScope) -> str:
    """A scope as messages name it.

    Example:
        >>> describe_scope(MemoryScope("acme"))
        'tenant acme (tenant-wide)'
        >>> describe_scope(MemoryScope("acme", "user-7"))
        'tenant acme, namespace user-7'
    """
    if scope.namespace is None:
        return f"tenant {scope.tenant_id} (tenant-wide)"
    return f"tenant {scope.tenant_id}, namespace {scope.namespace}"
