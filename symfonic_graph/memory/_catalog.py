"""The cold half of a turn: catalog rows in, compiled rules and pending reminders out.

``TurnMemory`` calls a :class:`Compiler` only when a read shipped rows (a
moved catalog, a stale cache). The compiler shares what scopes have in common:

- a tenant's tenant-wide skills compile once into one ``TenantRules``, reused
  by every cached scope of the tenant while their rows are identical;
- a namespaced scope compiles only its own rows and merges them in catalog order;
- a pending reminder is one ``PendingTrigger`` however many scopes see it.

Example:
    >>> compiler = Compiler()
    >>> catalog, torn = compiler.catalog(MemoryScope("acme"), 3, packed_rows, None, now=0.0)
    >>> reminders = compiler.pending(MemoryScope("acme"), trigger_rows)
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from weakref import WeakValueDictionary

from symfonic_graph.memory._isolation import keep_visible
from symfonic_graph.memory.triggers import PendingTrigger
from symfonic_graph.rules.ruleset import PackedSkill, Rule, RuleSet
from symfonic_graph.shape._intern import shared
from symfonic_graph.shape.models import (
    Skill,
    as_datetime,
    log_problems,
    packed_torn,
    read_skill,
    read_skills,
    trigger_from_row,
    unpack_skill_row,
)
from symfonic_graph.shape.scope import MemoryScope


@dataclass(slots=True)
class Catalog:
    """One scope's compiled catalog, as cached by ``TurnMemory``."""

    version: int | None
    fetched_at: float  # -inf once invalidated
    skills: RuleSet  # the tenant's shared rules, merged with the scope's own when it has any
    fingerprint: bytes | None = None  # of the scope's own rows (None: nothing of its own to reuse)
    read_at: float = -math.inf  # when its skills were shipped (kept by invalidate; an outage's grace counts from it)
    own: tuple[tuple[int, Rule], ...] = ()  # the scope's own rules, each after that many tenant-wide ones
    tenant: RuleSet | None = None  # the tenant's shared rules ``skills`` was merged from (None: it is them)
    confirmed: bool = False  # shipped twice under this version: no write was half applied when first read


class TenantRules(RuleSet):
    """A tenant's tenant-wide skills, compiled once and shared by every cached scope of the tenant."""

    __slots__ = ("digest",)
    digest: bytes


COMPACT_JSON = json.JSONEncoder(check_circular=False, separators=(",", ":"))
"""Compact JSON (no spaces, no cycle check): the text rows are digested and weighed by."""


def fingerprint(rows: Sequence[Any]) -> bytes | None:
    """A digest of skill rows exactly as read, or None when a value is not plain JSON.

    JSON keeps ``1``, ``1.0`` and ``true`` apart (``==`` does not), so equal
    digests mean the same properties with the same types: the compiled
    catalog of the last read can be reused. A temporal or spatial value (seeded
    by hand) gives None, and such a catalog is read afresh every time.
    """
    try:
        text = COMPACT_JSON.encode(rows)
    except (TypeError, ValueError):
        return None
    return hashlib.blake2b(text.encode("ascii"), digest_size=16).digest()


_MAX_TEMPLATES = 8192
"""Distinct skill contents whose reading a compiler keeps (it starts afresh past them)."""
_FIELDS = tuple(Skill.model_fields)  # a PackedSkill's order
_ID, _TENANT, _NAMESPACE, _CREATED = (_FIELDS.index(n) for n in ("id", "tenant_id", "namespace", "created_at"))


@dataclass(frozen=True, slots=True)
class _Node:
    id: str
    tenant_id: str
    namespace: str | None
    index: int


def _content_key(row: Sequence[Any]) -> str | None:
    """The content of a ``skill_packed`` row without its per-node values, as JSON text (types kept apart).

    None when a per-node value is not of the type the read model accepts
    (the row is then read in full, and reads to what it reads to) or a value
    is not plain JSON.
    """
    ident, tenant, namespace, created, rev = row[0], row[1], row[2], row[12], row[13]
    if (type(ident) is not str or type(tenant) is not str or (namespace is not None and type(namespace) is not str)
            or (created is not None and type(created) is not str) or (rev is not None and type(rev) is not str)):
        return None
    try:
        return COMPACT_JSON.encode([row[3:12], row[14:17], [[e[0], e[2]] if len(e) == 3 else e for e in row[17]]])
    except (TypeError, ValueError):
        return None


def _instance(template: Rule, row: Sequence[Any]) -> Rule:
    """``template`` (a rule read from a row of the same content) for the node of ``row``."""
    values = list(template.source)
    values[_ID], values[_TENANT], values[_NAMESPACE] = row[0], shared(row[1]), shared(row[2])
    values[_CREATED] = as_datetime(row[12])
    return template.for_node(PackedSkill(values), row[0])


class Compiler:
    """Compiles the rows a turn read, sharing tenant-wide rules and reminders across scopes."""

    __slots__ = ("_templates", "_tenants", "_triggers")

    def __init__(self) -> None:
        self._tenants: WeakValueDictionary[str, TenantRules] = WeakValueDictionary()
        self._triggers: WeakValueDictionary[str, PendingTrigger] = WeakValueDictionary()
        # content -> [its rule (None: skipped), its problems (None: not known yet), a row of it (until known)]
        self._templates: dict[str, list[Any]] = {}

    def catalog(
        self, scope: MemoryScope, version: int | None, rows: Sequence[Sequence[Any]],
        cached: Catalog | None, now: float,
    ) -> tuple[Catalog, bool]:
        """The catalog of ``rows`` (``skill_packed`` lists) and whether a row was torn (a re-seed caught half applied).

        The tenant-wide rows compile into the tenant's shared rules; the
        scope's own rows compile on their own and are merged in catalog
        order. ``cached`` (the scope's last catalog) lends its parts when
        their rows did not change.
        """
        tenant_rows: list[Sequence[Any]] = []
        own_rows: list[tuple[int, Sequence[Any]]] = []
        for row in rows:
            if row[2] is not None:  # the skill's namespace
                own_rows.append((len(tenant_rows), row))
            else:
                tenant_rows.append(row)
        tenant, torn = self._tenant_rules(scope, tenant_rows)
        if not own_rows:
            return Catalog(version, now, tenant, None, now), torn
        digest = fingerprint([row for _, row in own_rows])
        if digest is not None and cached is not None and digest == cached.fingerprint and cached.own:
            own = cached.own
        else:
            compiled, torn_own = self._rules(scope, [row for _, row in own_rows])
            torn = torn or torn_own
            own = tuple((place, rule) for (place, _), rule in zip(own_rows, compiled, strict=True) if rule is not None)
        if cached is not None and own is cached.own and tenant is cached.tenant:
            rules = cached.skills  # both parts as before: keep the merged rules (and their pre-flight blocks)
        else:
            merged: list[Rule] = []
            done = 0
            for place, rule in own:
                merged.extend(tenant.rules[done:place])
                merged.append(rule)
                done = place
            merged.extend(tenant.rules[done:])
            rules = RuleSet.of_rules(merged)
        return Catalog(version, now, rules, None if torn else digest, now, own, tenant), torn

    def _tenant_rules(self, scope: MemoryScope, rows: Sequence[Sequence[Any]]) -> tuple[TenantRules, bool]:
        """The tenant-wide rules of ``rows``: the shared ones when identical rows were compiled, else compiled now."""
        digest = fingerprint(rows)
        held = self._tenants.get(scope.tenant_id)
        if held is not None and digest is not None and held.digest == digest:
            return held, False
        compiled, torn = self._rules(scope, rows)
        rules = cast(TenantRules, TenantRules.of_rules(rule for rule in compiled if rule is not None))
        rules.digest = b"" if digest is None or torn else digest  # b"": never matched, never shared
        if rules.digest:
            self._tenants[scope.tenant_id] = rules
        return rules, torn

    def _rules(self, scope: MemoryScope, rows: Sequence[Sequence[Any]]) -> tuple[list[Rule | None], bool]:
        """The rule of each ``skill_packed`` row (None: skipped or not the scope's) and whether one was torn.

        Rows whose content (everything but id, tenant, namespace, creation
        date and revision stamps) was read before share that reading: the one
        read model is a pure function of the row, so the same content reads
        to the same rule, and only the per-node values are put in place. The
        other rows are read one by one and compiled together.
        """
        out: list[Rule | None] = [None] * len(rows)
        torn = False
        missed: list[tuple[int, str | None, Skill | None]] = []
        for i, row in enumerate(rows):
            key = _content_key(row)
            held = self._templates.get(key) if key is not None else None
            if held is None:
                skills, torn_row = read_skills([unpack_skill_row(row)])  # logs the node's problems
                torn = torn or torn_row
                missed.append((i, key, skills[0] if skills else None))
                continue
            template, problems, first = held
            if problems is None:  # what the content's reading says: read once more, at its first reuse
                held[1] = problems = read_skill(unpack_skill_row(first)).problems
                held[2] = None
            log_problems(row[0], problems)
            if template is not None:
                torn = torn or packed_torn(row)
                out[i] = _instance(template, row)
        if missed:
            compiled = iter(RuleSet([skill for _, _, skill in missed if skill is not None], pack=True).rules)
            if len(self._templates) + len(missed) > _MAX_TEMPLATES:
                self._templates.clear()
            for i, key, skill in missed:
                out[i] = None if skill is None else next(compiled)
                if key is not None:
                    self._templates[key] = [out[i], None, rows[i]]
        nodes = [_Node(row[0], row[1], row[2], i) for i, row in enumerate(rows) if out[i] is not None]
        kept = keep_visible(scope, nodes, "skill")
        if len(kept) < len(nodes):  # a query let another scope's row through (logged): drop it
            seen = {node.index for node in kept}
            out = [rule if i in seen else None for i, rule in enumerate(out)]
        return out, torn

    def pending(self, scope: MemoryScope, rows: Sequence[Mapping[str, Any]]) -> tuple[PendingTrigger, ...]:
        """The scope's pending triggers; one object per trigger, shared by the scopes that see it."""
        out = []
        for trigger in keep_visible(scope, (t for t in map(trigger_from_row, rows) if t), "trigger"):
            held = self._triggers.get(trigger.id)
            if (held is None or held.condition != trigger.condition or held.task != trigger.task
                    or held.kind != trigger.kind or held.on_tool != trigger.on_tool
                    or held.same_args != trigger.same_args or held.where != trigger.where
                    or held.once != trigger.once or held.similarity != trigger.similarity):
                held = PendingTrigger(trigger.id, shared(trigger.condition), shared(trigger.task), shared(trigger.kind),
                                      trigger.on_tool, trigger.same_args, trigger.where, trigger.once,
                                      trigger.similarity)
                self._triggers[trigger.id] = held
            out.append(held)
        return tuple(out)
