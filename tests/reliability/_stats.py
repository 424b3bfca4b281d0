"""Figures the reliability suite collects while it runs, printed at the end of the session."""

from __future__ import annotations

import os
from collections import Counter


def _scale() -> int:
    raw = os.environ.get("SYMFONIC_RELIABILITY_SCALE") or "1"
    if not raw.isdigit() or int(raw) < 1:
        raise SystemExit(f"SYMFONIC_RELIABILITY_SCALE must be a whole number >= 1, got {raw!r}")
    return int(raw)


SCALE = _scale()
"""How many times longer the long model and race tests run (``SYMFONIC_RELIABILITY_SCALE``, default 1).

The default sizes them for every ``./dev test``; a soak run multiplies
their runs or reads, e.g. ``SYMFONIC_RELIABILITY_SCALE=10 ./dev test -m slow``.
"""

FIGURES: Counter[str] = Counter()
"""Counters by name, e.g. ``isolation.operations``; reported by ``pytest_terminal_summary`` in ``tests/conftest.py``."""

LABELS: dict[str, str] = {
    "isolation.operations": "isolation: library calls tried",
    "isolation.steps": "isolation: state-machine steps",
    "isolation.examples": "isolation: state-machine runs",
    "isolation.reads": "isolation: reads checked against the model",
    "isolation.rows_seen": "isolation: rows returned by those reads",
    "isolation.leaks": "isolation: leaks (rows or writes outside the scope)",
    "isolation.overfiltered": "isolation: over-filtered reads (visible rows missing)",
    "hostile.values": "hostile input: distinct hostile values",
    "hostile.attempts": "hostile input: (entry point, field, value) attempts",
    "hostile.rejected": "hostile input: rejected with a typed error naming the field",
    "hostile.stored": "hostile input: stored and read back exactly",
    "hostile.bad": "hostile input: wrong outcomes",
    "concurrency.publishes": "concurrency: staged batches published under readers",
    "concurrency.reader_iterations": "concurrency: reader iterations",
    "concurrency.partial_reads": "concurrency: partial reads seen",
    "concurrency.folded_nodes": "concurrency: published nodes folded while readers ran",
    "concurrency.reseeds": "concurrency: concurrent re-seeds of one identifier",
    "concurrency.schema_runs": "concurrency: concurrent apply_schema() calls",
    "concurrency.scans_under_deletes": "concurrency: scans of every tenant under another's deletes",
    "faults.calls": "faults: calls against a dead or silent Neo4j",
    "restart.operations": "restart: operations of the mixed load",
    "restart.acknowledged_writes": "restart: writes acknowledged to the caller",
    "restart.lost_writes": "restart: acknowledged writes missing afterwards",
    "restart.outage_errors": "restart: typed errors during the outage",
    "restart.untyped_errors": "restart: untyped errors",
    "restart.longest_outage_turn_ms": "restart: longest turn during the outage (ms)",
    "restart.recovery_ms": "restart: first successful read after the restart (ms)",
}


def summary_lines() -> list[str]:
    """One line per collected figure, in a stable order."""
    names = [n for n in LABELS if n in FIGURES] + sorted(n for n in FIGURES if n not in LABELS)
    return [f"{LABELS.get(n, n)}: {FIGURES[n]}" for n in names]
