"""Decisions are records: every gate decision that is not a plain allow, as one ``Decision``.

An enforced block, a shadow would-block, a strict refusal, an outage
pass-through and a turn enforcing stale rules each give one :class:`Decision`,
which :func:`emit` hands to three places:

- one line on the ``symfonic_graph.decisions`` logger (WARNING for ``block``,
  ``refused`` and ``pass_through``; INFO for ``would_block`` and
  ``stale_rules``) with stable fields: ``tenant``, ``namespace``, ``tool``,
  ``call_id``, ``rule_ids``, ``mode``, ``reason`` (as ``key=value`` text and as
  ``extra`` attributes of the record, under ``decision``);
- the OpenTelemetry counter ``symfonic_graph.gate.decisions`` with a
  ``decision`` attribute (no-op without the ``otel`` extra);
- an optional :class:`DecisionSink` (``Neo4jDecisionLog`` ships one).

Allowed calls give nothing.

Example:
    >>> from symfonic_graph.rules.gate import GateDecision
    >>> [d.decision for d in decisions_of([GateDecision("deploy", "c1", "store_unavailable")],
    ...                                   tenant_id="acme", strict=True)]
    ['refused']
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, runtime_checkable

from symfonic_graph import telemetry

__all__ = ["DECISION_KINDS", "Decision", "DecisionKind", "DecisionSink", "decisions_of", "emit", "log", "thread_of"]

log = logging.getLogger("symfonic_graph.decisions")  # the logger's name is a contract (docs/observability.md)

DecisionKind = Literal["block", "would_block", "refused", "pass_through", "stale_rules"]
DECISION_KINDS: Final[tuple[DecisionKind, ...]] = ("block", "would_block", "refused", "pass_through", "stale_rules")
_LEVELS: Final[Mapping[str, int]] = {
    "block": logging.WARNING, "refused": logging.WARNING, "pass_through": logging.WARNING,
    "would_block": logging.INFO, "stale_rules": logging.INFO,
}


@dataclass(frozen=True, slots=True)
class Decision:
    """One gate decision worth keeping.

    Attributes:
        tenant_id: the turn's tenant (``""`` when the lookup named no scope).
        namespace: the turn's namespace, None for a tenant-wide scope.
        tool: the called tool.
        call_id: the tool call id, if the call had one.
        rule_ids: the ids of the rules behind the decision (blocking or shadow rules; empty for outages).
        decision: ``block``, ``would_block``, ``refused``, ``pass_through`` or ``stale_rules``.
        mode: ``enforce``, ``shadow``, ``strict`` (``strict=True``), ``guarded`` (``strict="guarded"``),
            ``lenient`` (``strict=False``) or ``stale``.
        reason: a sentence: what was missing, or the outage.
        at: epoch seconds.
        conversation: the LangGraph thread id of the run, when the config has one.
    """

    tenant_id: str
    namespace: str | None
    tool: str
    call_id: str | None
    rule_ids: tuple[str, ...]
    decision: DecisionKind
    mode: str
    reason: str
    at: float
    conversation: str | None = None

    def fields(self) -> dict[str, Any]:
        """The stable fields, as the log line, the sink and the graph node carry them.

        Example:
            >>> sorted(Decision("acme", None, "deploy", "c1", ("sk-1",), "block", "enforce", "x", 0.0).fields())
            ['at', 'call_id', 'conversation', 'decision', 'mode', 'namespace', 'reason', 'rule_ids', 'tenant', 'tool']
        """
        return {"tenant": self.tenant_id, "namespace": self.namespace, "tool": self.tool, "call_id": self.call_id,
                "rule_ids": list(self.rule_ids), "decision": self.decision, "mode": self.mode,
                "reason": self.reason, "at": self.at, "conversation": self.conversation}


@runtime_checkable
class DecisionSink(Protocol):
    """Where decisions are kept. ``record`` must not add a round trip to the turn (queue and return).

    Example:
        >>> class Collect:
        ...     def __init__(self): self.seen = []
        ...     async def record(self, decisions): self.seen.extend(decisions)
        >>> isinstance(Collect(), DecisionSink)
        True
    """

    async def record(self, decisions: Sequence[Decision]) -> None: ...


def _mode(strict: object) -> str:
    return "strict" if strict is True else "guarded" if strict == "guarded" else "lenient"


def decisions_of(
    gate: Iterable[Any],
    *,
    tenant_id: str,
    namespace: str | None = None,
    strict: object = False,
    outage: BaseException | None = None,
    calls: Iterable[tuple[str, str | None]] = (),
    stale: bool = False,
    conversation: str | None = None,
    at: float | None = None,
) -> tuple[Decision, ...]:
    """The records of one gate run: its ``GateDecision``s, and what an outage or stale rules did.

    ``outage`` is the store failure the lookup raised (the gate then decided
    without rules): every call it allowed (``calls``, name and id, when the gate
    returned nothing) is a ``pass_through``. ``stale`` says the rules were the
    last ones read during an outage: one ``stale_rules`` record per call.
    """
    now = time.time() if at is None else at
    base = {"tenant_id": tenant_id, "namespace": namespace, "at": now, "conversation": conversation}
    out: list[Decision] = []
    seen: set[tuple[str, str | None]] = set()
    for d in gate:
        seen.add((d.tool_name, d.call_id))
        if d.verdict == "store_unavailable":
            out.append(Decision(tool=d.tool_name, call_id=d.call_id, rule_ids=(), decision="refused",
                                mode=_mode(strict), reason=f"precondition store unavailable: {outage or 'outage'}",
                                **base))  # type: ignore[arg-type]
        elif d.verdict == "blocked" and d.blocking is not None:
            b = d.blocking
            out.append(Decision(tool=d.tool_name, call_id=d.call_id, rule_ids=_ids([b]), decision="block",
                                mode="enforce", reason=f"rule {b.label or b.skill_id!s} missing {', '.join(b.missing)}",
                                **base))  # type: ignore[arg-type]
        elif outage is not None:
            out.append(_pass_through(d.tool_name, d.call_id, strict, outage, base))
        if d.shadowed:
            missing = sorted({m for c in d.shadowed for m in c.missing})
            out.append(Decision(tool=d.tool_name, call_id=d.call_id, rule_ids=_ids(d.shadowed),
                                decision="would_block", mode="shadow",
                                reason=f"shadow rule(s) would have blocked: missing {', '.join(missing)}",
                                **base))  # type: ignore[arg-type]
        if stale:
            out.append(_stale(d.tool_name, d.call_id, base))
    if outage is not None:
        out.extend(_pass_through(name, cid, strict, outage, base) for name, cid in calls if (name, cid) not in seen)
    return tuple(out)


def _ids(checks: Iterable[Any]) -> tuple[str, ...]:
    return tuple(c.skill_id or c.label or "" for c in checks)


def _pass_through(tool: str, call_id: str | None, strict: object, outage: BaseException,
                  base: dict[str, Any]) -> Decision:
    return Decision(tool=tool, call_id=call_id, rule_ids=(), decision="pass_through", mode=_mode(strict),
                    reason=f"precondition store unavailable, ran without rules: {outage}", **base)


def _stale(tool: str, call_id: str | None, base: dict[str, Any]) -> Decision:
    return Decision(tool=tool, call_id=call_id, rule_ids=(), decision="stale_rules", mode="stale",
                    reason="store unavailable; decided by the last rules read", **base)


def thread_of(config: object) -> str | None:
    """The LangGraph thread id of a run's config (``configurable.thread_id``), None without one.

    Example:
        >>> thread_of({"configurable": {"thread_id": "t-1"}}), thread_of(None)
        ('t-1', None)
    """
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    thread = configurable.get("thread_id") if isinstance(configurable, Mapping) else None
    return str(thread) if thread is not None else None


async def emit(decisions: Sequence[Decision], sink: DecisionSink | None = None) -> None:
    """Log, count and hand ``decisions`` to ``sink``; a failing sink is logged, never raised into the turn."""
    if not decisions:
        return
    for d in decisions:
        f = d.fields()
        log.log(_LEVELS[d.decision],
                "%s tenant=%s namespace=%s tool=%s call_id=%s rule_ids=%s mode=%s reason=%s",
                d.decision, f["tenant"], f["namespace"], f["tool"], f["call_id"], ",".join(d.rule_ids),
                f["mode"], f["reason"], extra={"decision": f})
        telemetry.count_decision(d.decision)
    if sink is not None:
        try:
            await sink.record(decisions)
        except Exception:
            log.error("the decision sink %r failed; %d decision(s) not kept", sink, len(decisions), exc_info=True)
