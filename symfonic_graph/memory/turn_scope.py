"""Where a turn finds its scope: a place the model cannot write.

The library's factories and lookups take the scope of a turn, in this order,
from:

1. LangGraph's runtime context (``graph.ainvoke(..., context=...)``): a
   ``MemoryScope``, a mapping or object with ``tenant_id`` (and optionally
   ``namespace``), or one holding such a value under ``memory_scope``;
2. ``config["configurable"]["memory_scope"]`` (same shapes), or
   ``tenant_id`` / ``namespace`` keys directly in ``configurable``;
3. ``state["memory_scope"]``, for hand-built graphs whose state declares it
   and for calling a gate node directly with a state dict.

A scope that is missing or malformed anywhere is a programming error:
``ScopeError``, never handled like a store outage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from symfonic_graph.errors import ScopeError
from symfonic_graph.shape.scope import MemoryScope

__all__ = ["SCOPE_KEY", "ScopeFrom", "scope_from_state", "scope_from_turn", "scope_of"]

SCOPE_KEY = "memory_scope"
ScopeFrom = Callable[[Any], MemoryScope]
"""``(state) -> MemoryScope``: how a lookup finds the scope of a turn."""

_ABSENT = object()


def scope_of(value: object, *, where: str = "scope") -> MemoryScope:
    """``value`` as a MemoryScope: a MemoryScope, or a mapping or object with ``tenant_id``.

    Raises:
        ScopeError: naming ``where`` and what was wrong.

    Example:
        >>> scope_of({"tenant_id": "acme", "namespace": "user-7"})
        MemoryScope(tenant_id='acme', namespace='user-7')
        >>> scope_of("acme")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        symfonic_graph.errors.ScopeError: scope must be a MemoryScope, or a mapping or object with tenant_id ...
    """
    if isinstance(value, MemoryScope):
        return value
    if isinstance(value, Mapping):
        tenant, namespace = value.get("tenant_id", _ABSENT), value.get("namespace")
    elif value is not None and not isinstance(value, (str, bytes, int, float, tuple, list)):
        tenant, namespace = getattr(value, "tenant_id", _ABSENT), getattr(value, "namespace", None)
    else:
        tenant, namespace = _ABSENT, None
    if tenant is _ABSENT:
        raise ScopeError(
            f"{where} must be a MemoryScope, or a mapping or object with tenant_id "
            f"(and optionally namespace); got {type(value).__name__}"
        )
    try:
        return MemoryScope(tenant, namespace)
    except ScopeError as exc:
        raise ScopeError(f"{where}: {exc}") from None


def _nested(value: object, key: str) -> object:
    if isinstance(value, Mapping):
        return value.get(key, _ABSENT)
    return getattr(value, key, _ABSENT) if value is not None else _ABSENT


def _from_holder(holder: object, key: str, where: str) -> MemoryScope | None:
    """The scope in ``holder`` (itself a scope, or holding one under ``key``), None if it names none."""
    if holder is None or holder is _ABSENT:
        return None
    inner = _nested(holder, key)
    if inner is not _ABSENT:
        return scope_of(inner, where=f"{where}[{key!r}]")
    if isinstance(holder, MemoryScope) or _nested(holder, "tenant_id") is not _ABSENT:
        return scope_of(holder, where=where)
    return None


def _langgraph_run() -> tuple[object, Mapping[str, Any]] | None:
    """The runtime context and ``configurable`` of the LangGraph run we are in, if any."""
    try:
        from langgraph.config import get_config
        from langgraph.runtime import get_runtime
    except ImportError:  # LangGraph is an optional extra
        return None
    try:
        config = get_config()
    except RuntimeError:  # not inside a graph run
        return None
    runtime = get_runtime()
    return getattr(runtime, "context", None), config.get("configurable") or {}


def scope_from_state(key: str = SCOPE_KEY) -> ScopeFrom:
    """Read the scope from ``state[key]`` only (a hand-built graph whose state declares it).

    Example:
        >>> scope_from_state()({"memory_scope": {"tenant_id": "acme"}})
        MemoryScope(tenant_id='acme', namespace=None)
    """

    def read(state: Any) -> MemoryScope:
        value = state.get(key, _ABSENT) if isinstance(state, Mapping) else getattr(state, key, _ABSENT)
        if value is _ABSENT:
            raise ScopeError(f"graph state has no {key!r}: set it to a MemoryScope or {{'tenant_id': ...}}")
        return scope_of(value, where=f"state[{key!r}]")

    return read


def scope_from_turn(key: str = SCOPE_KEY) -> ScopeFrom:
    """Read the scope from the runtime context, then ``configurable``, then ``state[key]``.

    Example:
        >>> scope_from_turn()({"memory_scope": MemoryScope("acme")})
        MemoryScope(tenant_id='acme', namespace=None)
    """
    from_state = scope_from_state(key)

    def read(state: Any) -> MemoryScope:
        run = _langgraph_run()
        if run is not None:
            context, configurable = run
            found = _from_holder(context, key, "runtime context")
            if found is None:
                found = _from_holder(configurable, key, 'config["configurable"]')
            if found is not None:
                return found
        has_state_key = key in state if isinstance(state, Mapping) else hasattr(state, key)
        if not has_state_key:
            raise ScopeError(
                "no memory scope for this turn: pass it as the runtime context "
                "(graph.ainvoke(..., context=MemoryScope(...))), or as "
                f'config={{"configurable": {{"{key}": MemoryScope(...)}}}}'
            )
        return from_state(state)

    return read
