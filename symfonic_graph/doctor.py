"""Find graph data a turn would skip: the checks behind ``symfonic-graph doctor``.

Skills are checked with the one read model (``models.read_skill``) over the
one projection a turn reads, so doctor reports exactly what a turn skips or
ignores, with the field path of each problem (``precondition[1].tool``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from symfonic_graph.models import SkillReading, read_skill
from symfonic_graph.preconditions import action_tool_of
from symfonic_graph.store import GraphMemoryStore

EXPECTED_INDEXES = (
    "skill_tenant",
    "precondition_tenant",
    "trigger_tenant",
    "fact_tenant",
    "symfonic_memory_text",
)
_NODE_CHECKS = (
    "doctor_untenanted",
    "doctor_foreign_preconditions",
    "doctor_bad_triggers",
    "doctor_catalogs",
)
_PAGE = 1000


@dataclass(frozen=True)
class Finding:
    """One problem: which check found it, on which node, and what is wrong."""

    check: str
    label: str
    node: str
    problem: str


def skill_findings(reading: SkillReading) -> Iterator[Finding]:
    """What is wrong with one skill as a turn reads it.

    Example:
        >>> reading = read_skill({"skill": {"id": "s1", "tenant_id": "a", "status": "approved"}})
        >>> [f.problem for f in skill_findings(reading)]
        ['no action tool (neither action_tool nor steps[0] is a tool name): the gate ignores this skill']
    """
    if reading.skill is None:
        for problem in reading.problems:
            yield Finding("bad_skills", "Skill", reading.node_id, problem + " (skipped by every read)")
        return
    for problem in reading.problems:
        check = "bad_preconditions" if problem.startswith("precondition") else "bad_skills"
        yield Finding(check, "Skill", reading.node_id, problem)
    if reading.torn:
        yield Finding("bad_preconditions", "Skill", reading.node_id,
                      "preconditions differ from those the library wrote with this skill (symfonic_rev); re-seed it")
    if reading.skill.status == "approved" and action_tool_of(reading.skill) is None:
        yield Finding("ignored_skills", "Skill", reading.node_id,
                      "no action tool (neither action_tool nor steps[0] is a tool name): the gate ignores this skill")


async def _skills(store: GraphMemoryStore, tenant_id: str | None) -> list[Finding]:
    findings: list[Finding] = []
    after = ""
    while True:
        rows = await store.read("doctor_skills", tenant_id=tenant_id, after=after, limit=_PAGE)
        for row in rows:
            findings.extend(skill_findings(read_skill(row["skill_row"])))
        if len(rows) < _PAGE:
            return findings
        after = rows[-1]["element_id"]


async def diagnose(store: GraphMemoryStore, tenant_id: str | None = None) -> list[Finding]:
    """Run every check (operator-only: crosses tenants unless ``tenant_id`` is given).

    Untenanted nodes belong to no tenant, so they are reported only without ``tenant_id``.
    """
    findings = []
    for check in _NODE_CHECKS:
        if check == "doctor_untenanted":
            rows = [] if tenant_id is not None else await store.read(check)
        else:
            rows = await store.read(check, tenant_id=tenant_id)
        for row in rows:
            findings.append(Finding(check.removeprefix("doctor_"), row["label"], row["node"], row["problem"]))
    findings.extend(await _skills(store, tenant_id))
    indexes = {row["name"]: row["state"] for row in await store.read("doctor_indexes")}
    for name in EXPECTED_INDEXES:
        if name not in indexes:
            findings.append(Finding("indexes", "Index", name, "missing: run `symfonic-graph schema apply`"))
        elif indexes[name] != "ONLINE":
            findings.append(Finding("indexes", "Index", name, f"state {indexes[name]}, not ONLINE"))
    return findings
