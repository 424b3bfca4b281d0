"""What an operator's Cypher script changed, and the follow-up ``cypher run`` does for it.

A hand-written script that changes a tenant's skills must bump the tenant's
catalog version, or turns keep the rules they cached for up to ``recheck_every``;
and a mistake in it (a misspelt property, a deleted precondition) is silent
until someone runs ``doctor``. ``cypher run`` closes that loop: it reads what
each tenant the script names holds before and after the script
(:func:`snapshot`), bumps the catalog of every tenant whose skills changed
(unless the script did), and runs doctor's checks for every tenant it touched.

The tenants are the string literals of the script that are tenant ids: a
script that reaches a tenant only through a parameter or a computed value is
not followed, and ``cypher run`` says so when the script wrote anything.

Example:
    >>> sorted(tenant_literals("MERGE (s:Skill {tenant_id: 'acme', id: 's1'}) SET s.label = \\"Deliver\\""))
    ['Deliver', 'acme', 's1']
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from symfonic_graph._store import GraphMemoryStore, Step
from symfonic_graph.ops.doctor import Finding, diagnose
from symfonic_graph.shape.scope import MemoryScope

_LITERAL = re.compile(r"'((?:[^'\\\n]|\\.)*)'|\"((?:[^\"\\\n]|\\.)*)\"")
_MOST_CANDIDATES = 2000  # string literals of one script looked up as tenants


def tenant_literals(text: str) -> list[str]:
    """The distinct string literals of a Cypher script that could be tenant ids, in order."""
    out: dict[str, None] = {}
    for match in _LITERAL.finditer(text):
        value = match.group(1) if match.group(1) is not None else match.group(2)
        try:
            MemoryScope(value)
        except Exception:  # not a usable tenant id (empty, control characters, too long)
            continue
        out.setdefault(value)
        if len(out) >= _MOST_CANDIDATES:
            break
    return list(out)


@dataclass(frozen=True)
class TenantState:
    """One tenant as a turn reads it: digests of its skills and of its triggers, and its catalog version."""

    skills: str
    triggers: str
    version: object


def _digest(rows: list[Any]) -> str:
    text = json.dumps(sorted(json.dumps(r, default=str, sort_keys=True) for r in rows))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def snapshot(store: GraphMemoryStore, tenants: list[str]) -> dict[str, TenantState]:
    """What each of ``tenants`` holds now (a tenant that holds nothing reads as empty)."""
    if not tenants:
        return {}
    rows = await store.read("doctor_tenant_fingerprints", tenants=tenants)
    return {row["tenant"]: TenantState(_digest(row["skills"]), _digest(row["triggers"]), row["version"])
            for row in rows}


@dataclass(frozen=True)
class Effects:
    """What a script did to the tenants it names: whose skills or triggers changed, and what followed."""

    skills_changed: list[str]
    triggers_changed: list[str]
    bumped: list[str]
    bumped_by_script: list[str]
    findings: list[Finding]

    @property
    def touched(self) -> list[str]:
        return list(dict.fromkeys([*self.skills_changed, *self.triggers_changed]))


async def follow_up(
    store: GraphMemoryStore, before: dict[str, TenantState], after: dict[str, TenantState]
) -> Effects:
    """Bump the catalog of each tenant whose skills changed (unless the script did) and run doctor for each touched."""
    skills = [t for t in after if before.get(t) is not None and before[t].skills != after[t].skills]
    triggers = [t for t in after if before.get(t) is not None and before[t].triggers != after[t].triggers]
    by_script = [t for t in skills if before[t].version != after[t].version]
    bumped = [t for t in skills if t not in by_script]
    if bumped:
        await store.write([Step("catalog_bump", {"tenant_id": t}, key=f"bump:{i}") for i, t in enumerate(bumped)])
    findings: list[Finding] = []
    for tenant in dict.fromkeys([*skills, *triggers]):
        findings += [f for f in await diagnose(store, tenant) if f.tenant_id == tenant]
    return Effects(skills, triggers, bumped, by_script, findings)
