"""Find graph data a turn would skip: the checks behind ``symfonic-graph doctor``."""

from __future__ import annotations

from dataclasses import dataclass

from symfonic_graph.store import GraphMemoryStore

EXPECTED_INDEXES = (
    "skill_tenant",
    "precondition_tenant",
    "trigger_tenant",
    "fact_tenant",
    "symfonic_memory_text",
)
_CHECKS = (
    "doctor_untenanted",
    "doctor_foreign_preconditions",
    "doctor_bad_preconditions",
    "doctor_bad_skills",
    "doctor_bad_triggers",
)


@dataclass(frozen=True)
class Finding:
    """One problem: which check found it, on which node, and what is wrong."""

    check: str
    label: str
    node: str
    problem: str


async def diagnose(store: GraphMemoryStore, tenant_id: str | None = None) -> list[Finding]:
    """Run every check (operator-only: crosses tenants unless ``tenant_id`` is given).

    Untenanted nodes belong to no tenant, so they are reported only without ``tenant_id``.
    """
    findings = []
    for check in _CHECKS:
        if check == "doctor_untenanted":
            rows = [] if tenant_id is not None else await store.read(check)
        else:
            rows = await store.read(check, tenant_id=tenant_id)
        for row in rows:
            findings.append(Finding(check.removeprefix("doctor_"), row["label"], row["node"], row["problem"]))
    indexes = {row["name"]: row["state"] for row in await store.read("doctor_indexes")}
    for name in EXPECTED_INDEXES:
        if name not in indexes:
            findings.append(Finding("indexes", "Index", name, "missing: run `symfonic-graph schema apply`"))
        elif indexes[name] != "ONLINE":
            findings.append(Finding("indexes", "Index", name, f"state {indexes[name]}, not ONLINE"))
    return findings
