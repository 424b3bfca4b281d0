"""What both integrations do to keep the gate's decisions: watch the lookup, then emit the records.

A ``Watch`` wraps one gate run's skill lookup: it sees the outage the lookup
raised (the gate then passes calls through or refuses them) and whether the
rules it handed over were stale. ``Watch.emit`` turns the run's
``GateDecision``s into ``Decision`` records (:mod:`symfonic_graph.rules.decisions`)
and logs, counts and sinks them. Nothing here reads the store.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from typing import Any

from symfonic_graph.errors import StoreUnavailableError
from symfonic_graph.rules.decisions import DecisionSink, decisions_of, emit, thread_of
from symfonic_graph.rules.gate import GateDecision, SkillLookup
from symfonic_graph.shape.scope import MemoryScope

__all__ = ["Watch", "check_sink", "thread_of"]


def check_sink(sink: object) -> DecisionSink | None:
    """``decision_sink`` checked: None, or an object with an ``async record(decisions)``."""
    if sink is None:
        return None
    record = getattr(sink, "record", None)
    if not callable(record) or not inspect.iscoroutinefunction(record):
        raise TypeError(f"decision_sink must have an async record(decisions) method, got {type(sink).__name__}")
    return sink  # type: ignore[return-value]


class Watch:
    """One gate run's lookup, watched: the outage it raised, whether its rules were stale, the scope."""

    __slots__ = ("outage", "scope", "stale")

    def __init__(self, scope: MemoryScope | None = None) -> None:
        self.outage: StoreUnavailableError | None = None
        self.stale = False
        self.scope = scope

    def wrap(self, lookup: SkillLookup) -> SkillLookup:
        async def watched(state: Any) -> Any:
            try:
                result: Any = lookup(state)
                if inspect.isawaitable(result):
                    result = await result
            except StoreUnavailableError as exc:
                self.outage = exc
                raise
            return result

        return watched

    async def emit(
        self, decisions: Sequence[GateDecision], *, sink: DecisionSink | None, strict: object,
        calls: Iterable[tuple[str, str | None]], config: object = None,
    ) -> None:
        """Log, count and sink the records of this run (allowed calls give none)."""
        scope = self.scope
        records = decisions_of(
            decisions, tenant_id=scope.tenant_id if scope is not None else "",
            namespace=scope.namespace if scope is not None else None, strict=strict, outage=self.outage,
            calls=calls, stale=self.stale, conversation=thread_of(config),
        )
        await emit(records, sink)
