"""Find graph data a turn would skip: the checks behind ``symfonic-graph doctor``.

Skills are checked with the one read model (``models.read_skill``) over the
one projection a turn reads, so doctor reports exactly what a turn skips or
ignores, with the field path of each problem (``precondition[1].tool``).
Triggers, catalogs, identifier keys, cross-tenant ``REQUIRES`` edges, scopes
over the trigger cap or the skill cap (``_limits``), ids shared by several
tenants (a copied seed script), recurrences the library cannot evaluate and
missing indexes are checked too. Every
finding names its tenant and namespace.

Doctor never crashes on the data it is meant to report: every Cypher
expression of ``doctor.cypher`` survives any property type, and each finding
names the node by its ``id`` (or its element id when the ``id`` is unusable).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from symfonic_graph._store import GraphMemoryStore, positive_count, tenant_token
from symfonic_graph.errors import ValidationError
from symfonic_graph.memory.turn import DEFAULT_MAX_TRIGGERS
from symfonic_graph.rules.preconditions import action_tool_of
from symfonic_graph.shape._limits import MAX_PROPERTY_BYTES, MAX_SCOPE_WEIGHT, MAX_SKILLS_PER_SCOPE, NODE_WEIGHT
from symfonic_graph.shape._recurrence import rule
from symfonic_graph.shape._revision import graph_digest, rev_digest
from symfonic_graph.shape.expressions import expression_problem
from symfonic_graph.shape.models import SkillReading, read_skill
from symfonic_graph.shape.properties import (
    PRECONDITION_PROPERTIES,
    SKILL_PROPERTIES,
    WEAKENING_SKILL_PROPERTIES,
    near_miss,
)
from symfonic_graph.shape.scope import MemoryScope

__all__ = ["Finding", "diagnose"]

EXPECTED_INDEXES = (
    "skill_tenant",
    "precondition_tenant",
    "trigger_tenant",
    "skill_scope",
    "fact_tenant",
    "symfonic_memory_text_v3",
    "trigger_scope",
    "trigger_offer",
    "trigger_offer_kind",
    "trigger_expiry",
    "trigger_due",
    "trigger_embedding",
    "trigger_selection_tenant",
    "decision_tenant",
    "change_tenant",
    "erasure_tenant",
    "limit_tenant",
    # The indexes behind the uniqueness constraints: ids, and the identifier
    # keys that make re-seeds replace and keep writes from taking over nodes.
    "skill_id_per_tenant",
    "skill_symfonic_key",
    "trigger_id_per_tenant",
    "trigger_symfonic_key",
    "fact_id_per_tenant",
    "symfonic_catalog_tenant",
    "symfonic_limit_key",
)
# Checks answered by one query each, a row per node (or edge) with its problems.
_NODE_CHECKS = (
    "doctor_foreign_preconditions",
    "doctor_bad_triggers",
    "doctor_trigger_keys",
    "doctor_catalogs",
)
# Keys that name no scope: a node without an identifier is keyed by its id.
_UNSCOPED_KEYS = frozenset({"id", "trigger-id"})
_PAGE = 1000


@dataclass(frozen=True)
class Finding:
    """One problem: which check found it, on which node, in which scope, and what is wrong.

    ``tenant_id`` is None for a node of no usable tenant and for database-wide
    findings (indexes); ``namespace`` None means tenant-wide.
    """

    check: str
    label: str
    node: str
    problem: str
    tenant_id: str | None = None
    namespace: str | None = None

    def where(self) -> str:
        """The finding's scope, as the CLI prints it.

        Example:
            >>> Finding("keys", "Skill", "s1", "...", "acme", "user-7").where()
            'tenant acme, namespace user-7'
            >>> Finding("indexes", "Index", "skill_tenant", "missing").where()
            'database'
        """
        if self.tenant_id is None:
            return "database" if self.label == "Index" else "no tenant"
        if self.namespace is None:
            return f"tenant {self.tenant_id} (tenant-wide)"
        return f"tenant {self.tenant_id}, namespace {self.namespace}"


def skill_findings(reading: SkillReading, scope: tuple[str | None, str | None] = (None, None)) -> Iterator[Finding]:
    """What is wrong with one skill as a turn reads it; ``scope`` is the skill's (tenant_id, namespace).

    Example:
        >>> reading = read_skill({"skill": {"id": "s1", "tenant_id": "a", "status": "approved"}})
        >>> [f.problem for f in skill_findings(reading)]
        ['no action tool (neither action_tool nor steps[0] is a tool name): the gate ignores this skill']
    """
    if reading.skill is None:
        for problem in reading.problems:
            yield Finding("bad_skills", "Skill", reading.node_id, problem + " (skipped by every read)", *scope)
        return
    for problem in reading.problems:
        check = "bad_preconditions" if problem.startswith("precondition") else "bad_skills"
        yield Finding(check, "Skill", reading.node_id, problem, *scope)
    if reading.torn:
        yield Finding("bad_preconditions", "Skill", reading.node_id,
                      "preconditions differ from those the library wrote with this skill (symfonic_rev); re-seed it",
                      *scope)
    if reading.skill.status == "approved" and action_tool_of(reading.skill) is None:
        yield Finding("ignored_skills", "Skill", reading.node_id,
                      "no action tool (neither action_tool nor steps[0] is a tool name): the gate ignores this skill",
                      *scope)


def _read_skill_findings(row: dict[str, Any]) -> list[Finding]:
    props = row.get("skill")
    props = props if isinstance(props, dict) else {}
    scope = (_text_or_none(props.get("tenant_id")), _text_or_none(props.get("namespace")))
    try:
        return list(skill_findings(read_skill(row), scope))
    except Exception as exc:  # the read model itself failed: a turn of this tenant fails the same way
        node_id = props.get("id")
        return [Finding("bad_skills", "Skill", node_id if isinstance(node_id, str) else repr(node_id),
                        f"the read model fails on this skill ({type(exc).__name__}: {exc}); every turn of its "
                        "tenant that reads it fails too: fix the skill's properties or its preconditions", *scope)]


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


# --- hand-seeding mistakes: near misses, position gaps, hand edits, shared identifiers ---------

def _int_position(value: object) -> int | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def shape_findings(row: dict[str, Any]) -> Iterator[Finding]:
    """Mistakes of hand seeding in one ``doctor_skills`` row that the read model accepts silently.

    A misspelt property (``same_arg``, ``acton_tool``: the read ignores it, so
    the rule is weaker than written), gaps in the ``REQUIRES`` positions (a
    precondition deleted by hand), and a library-written skill edited by hand
    since (the next library seed of it reverts the edit).
    """
    raw_row, raw_props = row.get("skill_row"), None
    skill_row: dict[str, Any] = raw_row if isinstance(raw_row, dict) else {}
    raw_props = skill_row.get("skill")
    props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
    node_id = props.get("id")
    node = node_id if isinstance(node_id, str) else repr(node_id)
    scope = (_text_or_none(props.get("tenant_id")), _text_or_none(props.get("namespace")))
    for name in row.get("skill_keys") or []:
        meant = near_miss(name, SKILL_PROPERTIES)
        if meant is not None:
            yield Finding("misspelt_properties", "Skill", node,
                          f"property {name!r} is not a skill property: did you mean {meant!r}? "
                          + ("Until it is renamed the skill blocks its action (fails closed); rename it"
                             if meant in WEAKENING_SKILL_PROPERTIES else
                             f"Every read ignores {name!r}, so the skill reads as if {meant!r} were not set; "
                             "rename it"),
                          *scope)
    for entry in row.get("precondition_keys") or []:
        for name in entry.get("keys") or []:
            meant = near_miss(name, PRECONDITION_PROPERTIES)
            if meant is not None:
                yield Finding("misspelt_properties", "Skill", node,
                              f"precondition at position {entry.get('position')!r}: property {name!r} is not a "
                              f"precondition property: did you mean {meant!r}? Until it is renamed the precondition "
                              f"is unreadable and the skill blocks its action (fails closed); rename it", *scope)
    preconditions = [p for p in skill_row.get("preconditions") or [] if isinstance(p, dict)]
    positions = [_int_position(p.get("position")) for p in preconditions]
    numbered = sorted(p for p in positions if p is not None)
    if numbered and numbered != list(range(len(numbered))):
        missing = sorted(set(range(len(numbered))) - set(numbered))  # bounded: a position may be 2**62
        twice = sorted({p for p in numbered if numbered.count(p) > 1})
        what = "; ".join(x for x in (f"position(s) {missing} missing (a precondition deleted by hand?)" if missing
                                     else "", f"position(s) {twice} used twice" if twice else "") if x)
        yield Finding("positions", "Skill", node,
                      f"REQUIRES positions {numbered} are not 0..{len(numbered) - 1}: {what}; the preconditions "
                      "left are enforced in position order: check that none is missing, then renumber them", *scope)
    rev = props.get("rev")
    if isinstance(rev, str):
        added = [p.get("position") for p in preconditions if p.get("rev") is None]
        digest = rev_digest(rev)
        if added:
            yield Finding("hand_edits", "Skill", node,
                          f"precondition(s) at position(s) {added} were added by hand to a skill the library wrote: "
                          "enforced now, and deleted by the next library seed of this skill; put them in the seed "
                          "file (or the library call) instead", *scope)
        elif digest is not None and graph_digest(skill_row) != digest:
            yield Finding("hand_edits", "Skill", node,
                          "differs from what the library last wrote (its symfonic_rev): edited by hand since; "
                          "turns enforce the edit once the tenant's catalog version is bumped after it "
                          "(`cypher run` bumps it; by hand: MATCH (c:SymfonicCatalog {tenant_id: ...}) SET "
                          "c.version = c.version + 1), or within TurnMemory's recheck_every (300 s) if it was not, "
                          "and the next library seed of this skill reverts it; make the change in the seed file "
                          "(or the library call) instead", *scope)


async def _identifier_findings(store: GraphMemoryStore, tenant_id: str | None) -> list[Finding]:
    findings = []
    for row in await store.read("doctor_identifiers", tenant_id=tenant_id):
        holders = [str(h) for h in row["holders"]]
        for holder in holders:
            others = ", ".join(h for h in holders if h != holder)
            findings.append(Finding(
                "shared_identifiers", "Skill", holder,
                f"identifier {row['identifier']!r} is also held by live skill(s) {others} of this scope: every turn "
                "enforces all of them, and a library re-seed of the identifier replaces only the one holding its "
                "key; retract or delete all but one", _text_or_none(row["tenant_id"]), _text_or_none(row["namespace"])))
    return findings


def key_problem(key: object, tenant_id: str, namespace: object) -> str | None:
    """What is wrong with a node's ``symfonic_key``, given the node's own scope, or None.

    A key is the JSON array ``["skill", tenant, namespace, identifier]`` (a
    trigger's starts with ``"trigger"``), possibly followed by a NUL and a
    staging suffix; ``["id", ...]`` and ``["trigger-id", ...]`` name no scope.

    Example:
        >>> key_problem('["skill", "acme", null, "deliver"]', "acme", None) is None
        True
        >>> key_problem('["skill", "globex", null, "deliver"]', "acme", None)[:58]
        "symfonic_key names tenant 'globex' namespace None, not thi"
    """
    if not isinstance(key, str):
        return (f"symfonic_key is a {type(key).__name__}, not a string: a library write of this identifier "
                "never finds this node")
    base = key.split("\x00", 1)[0]
    try:
        parsed = json.loads(base)
    except (ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, list) or not parsed or not isinstance(parsed[0], str):
        return (f"symfonic_key {_short(base)} is not a JSON array like the library writes "
                '(["skill", tenant_id, namespace, identifier]): a library re-seed of it never replaces this node')
    if parsed[0] in _UNSCOPED_KEYS:
        return None
    if len(parsed) != 4:
        return (f"symfonic_key {_short(base)} has {len(parsed)} parts, not 4: a library re-seed of it never "
                "replaces this node")
    key_tenant, key_namespace = parsed[1], parsed[2]
    if key_tenant != tenant_id or key_namespace != namespace:
        return (f"symfonic_key names tenant {_short(key_tenant)} namespace {_short(key_namespace)}, not this node's "
                f"tenant {_short(tenant_id)} namespace {_short(namespace)}: writes of that identifier in that scope "
                "are refused while this node holds the key; fix the key (or delete the node)")
    if json.dumps(parsed, ensure_ascii=False) != base:
        return (f"symfonic_key {_short(base)} is not written exactly as the library writes it (separators "
                '", ", non-ASCII as itself): a library re-seed of this identifier adds a second node')
    return None


def _short(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def _pages(store: GraphMemoryStore, name: str, **params: Any) -> AsyncIterator[dict[str, Any]]:
    """Every row of a paged doctor query (``after``/``limit`` on ``element_id``)."""
    after = ""
    while True:
        rows = await store.read(name, **params, after=after, limit=_PAGE)
        for row in rows:
            yield row
        if len(rows) < _PAGE:
            return
        after = rows[-1]["element_id"]


def _node_findings(check: str, row: dict[str, Any]) -> Iterator[Finding]:
    for problem in row["problems"]:
        yield Finding(check, str(row["label"]), str(row["node"]), str(problem),
                      _text_or_none(row.get("tenant_id")), _text_or_none(row.get("namespace")))


async def _recurrence_findings(store: GraphMemoryStore, tenant_id: str | None) -> list[Finding]:
    """Recurring triggers whose RRULE the library cannot evaluate: acknowledging them makes no next occurrence."""
    findings = []
    async for row in _pages(store, "doctor_recurrences", tenant_id=tenant_id):
        start = _as_datetime(row["due_at"])
        try:
            if not isinstance(row["recurrence"], str):
                raise ValidationError("recurrence", f"is a {type(row['recurrence']).__name__}, not an RRULE string")
            rule("recurrence", row["recurrence"], start)
            problem = None if start is not None else "has no due_at with a time zone to start from"
        except ValidationError as exc:
            problem = f"recurrence {exc.problem}"
        if problem is not None:
            findings.append(Finding("bad_recurrences", "Trigger", str(row["node"]),
                                    problem + ": acknowledging it makes no next occurrence; set it again",
                                    _text_or_none(row["tenant_id"]), _text_or_none(row["namespace"])))
    return findings


async def _where_findings(store: GraphMemoryStore, tenant_id: str | None) -> list[Finding]:
    """Event triggers whose stored ``where`` does not compile: never offered on any call."""
    findings = []
    async for row in _pages(store, "doctor_trigger_wheres", tenant_id=tenant_id):
        problem = expression_problem(row["where"])
        if problem is not None:
            findings.append(Finding("bad_wheres", "Trigger", str(row["node"]),
                                    f"where {problem}: the trigger is never offered; set it again",
                                    _text_or_none(row["tenant_id"]), _text_or_none(row["namespace"])))
    return findings


def _as_datetime(value: object) -> datetime | None:
    """A zoned datetime of the string Neo4j gives for ``toString(t.due_at)``, else None."""
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value.split("[")[0])
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


async def _key_findings(store: GraphMemoryStore, tenant_id: str | None) -> list[Finding]:
    findings = []
    async for row in _pages(store, "doctor_keys", tenant_id=tenant_id):
        problem = key_problem(row["key"], row["tenant_id"], row["namespace"])
        if problem is not None:
            findings.append(Finding("keys", str(row["label"]), str(row["node"]), problem,
                                    _text_or_none(row["tenant_id"]), _text_or_none(row["namespace"])))
    return findings


async def _cap_findings(store: GraphMemoryStore, tenant_id: str | None, max_triggers: int) -> list[Finding]:
    findings = []
    for row in await store.read("doctor_trigger_cap", tenant_id=tenant_id, max_triggers=max_triggers):
        tenant, namespace, wide, visible = row["tenant_id"], row["namespace"], int(row["wide"]), int(row["visible"])
        if namespace is None:
            node, seen = f"tenant {tenant!r} (tenant-wide)", "tenant-wide: every scope of the tenant sees them"
        else:
            node, seen = f"tenant {tenant!r} namespace {namespace!r}", f"{wide} tenant-wide, {visible - wide} own"
        findings.append(Finding(
            "trigger_cap", "Scope", node,
            f"{visible} pending triggers ({seen}); a turn reads at most {max_triggers}, oldest first, so the "
            f"{visible - max_triggers} newest are never offered: resolve old ones, or raise max_triggers",
            tenant, namespace,
        ))
    return findings


async def _embedding_findings(store: GraphMemoryStore, tenant_id: str | None) -> list[Finding]:
    findings = []
    for row in await store.read("doctor_embedding_lengths", tenant_id=tenant_id):
        counts = ", ".join(f"{g['triggers']} of length {g['length']}" for g in row["lengths"])
        findings.append(Finding(
            "embedding_lengths", "Tenant", f"tenant {row['tenant_id']!r}",
            f"pending semantic triggers hold embeddings of several lengths ({counts}); a turn's embedding meets "
            "only those of its own length, the others are never offered: re-embed them with the model the "
            "wiring uses (ProspectiveLayer(store, embeddings=...))", row["tenant_id"]))
    return findings


async def _copied_id_findings(store: GraphMemoryStore, tenant_id: str | None) -> list[Finding]:
    findings = []
    async for row in _pages(store, "doctor_copied_ids", tenant_id=tenant_id):
        holders = row["holders"]
        tenants = sorted({h["tenant_id"] for h in holders})
        for holder in holders:
            if tenant_id is not None and holder["tenant_id"] != tenant_id:
                continue
            others = ", ".join(t for t in tenants if t != holder["tenant_id"])
            findings.append(Finding(
                "copied_ids", str(row["label"]), str(row["node"]),
                f"the same id is used by tenant(s) {others}: allowed (ids are per tenant), but it looks like a "
                "seed script copied from another tenant; check that the copy changed every tenant id it should",
                holder["tenant_id"], holder["namespace"],
            ))
    return findings


async def _catalog_bound_findings(store: GraphMemoryStore, tenant_id: str | None) -> list[Finding]:
    findings = []
    for row in await store.read("doctor_skill_cap", tenant_id=tenant_id, max_skills=MAX_SKILLS_PER_SCOPE,
                                max_chars=MAX_PROPERTY_BYTES):
        tenant, namespace, skills = row["tenant_id"], row["namespace"], int(row["skills"])
        node = f"tenant {tenant!r}" + (" (tenant-wide)" if namespace is None else f" namespace {namespace!r}")
        if skills > MAX_SKILLS_PER_SCOPE:
            findings.append(Finding(
                "skill_cap", "Scope", node,
                f"owns {skills} skills, over the cap of {MAX_SKILLS_PER_SCOPE} a write allows: every turn ships "
                "them all; retract unused skills, or split them across namespaces"))
        for skill_id in row["oversized"]:
            findings.append(Finding(
                "skill_cap", "Skill", str(skill_id),
                f"a label, context or step longer than {MAX_PROPERTY_BYTES} characters ({node}): every turn "
                "ships it; shorten it"))
    return findings


async def _budget_findings(store: GraphMemoryStore, tenant_id: str | None) -> list[Finding]:
    """Owning scopes over the budget a turn read may ship, computed from the graph (hand-seeded data included)."""
    findings = []
    for row in await store.read("doctor_scope_budget", tenant_id=tenant_id, max_weight=MAX_SCOPE_WEIGHT):
        tenant, namespace, weight = row["tenant_id"], row["namespace"], int(row["weight"])
        node = f"tenant {tenant!r}" + (" (tenant-wide)" if namespace is None else f" namespace {namespace!r}")
        findings.append(Finding(
            "scope_budget", "Scope", node,
            f"holds {weight:,} characters of rules and reminders (each skill, precondition and pending trigger "
            f"counting {NODE_WEIGHT} more), over the budget of {MAX_SCOPE_WEIGHT:,} a write allows: its own turn "
            "read may not finish within query_timeout (it is read outside shared batches meanwhile); shorten "
            "steps and contexts, retract unused skills (`symfonic-graph skills retract`), resolve old reminders, "
            "or split them across namespaces", tenant, namespace))
    return findings


async def _token_findings(store: GraphMemoryStore, tenant_id: str | None) -> list[Finding]:
    """Tenants some of whose skills, triggers or facts lack the exact tenant token recall needs, or hold a stale one."""
    findings = []
    for group in await store.read("stamp_tenant_groups"):
        tenant = group["tenant_id"]
        if tenant_id is not None and tenant != tenant_id:
            continue
        untokened, stale = int(group["untokened"]), [t for t in group["tokens"] if t != tenant_token(tenant)]
        if untokened:
            findings.append(Finding(
                "tenant_tokens", "Scope", f"tenant {tenant!r}",
                f"{untokened} skills, triggers or facts without a tenant token (seeded with plain Cypher, or by an "
                "older release): recall still finds them, but through a wider search for every tenant; run "
                "`symfonic-graph schema apply` to stamp them", tenant))
        if stale:
            findings.append(Finding(
                "tenant_tokens", "Scope", f"tenant {tenant!r}",
                "skills, triggers or facts hold another tenant's token (tenant_id changed with plain Cypher): "
                "recall never finds them; run `symfonic-graph schema apply` to stamp them again", tenant))
    return findings


async def diagnose(
    store: GraphMemoryStore, tenant_id: str | None = None, *, max_triggers: int = DEFAULT_MAX_TRIGGERS
) -> list[Finding]:
    """Run every check (operator-only: crosses tenants unless ``tenant_id`` is given).

    Nodes without a usable tenant belong to no tenant, so they are reported
    only without ``tenant_id``. ``max_triggers`` is the cap the deployment's
    turns use (``TurnMemory(max_triggers=...)``).

    Raises:
        ScopeError: ``tenant_id`` is not a usable tenant id.
        ValidationError: ``max_triggers`` is not a positive count.
        SymfonicGraphError: Neo4j could not run a check (e.g. ``StoreUnavailableError``).
    """
    if tenant_id is not None:
        tenant_id = MemoryScope(tenant_id).tenant_id
    max_triggers = positive_count("max_triggers", max_triggers)
    findings: list[Finding] = []
    if tenant_id is None:
        async for row in _pages(store, "doctor_untenanted"):
            findings.extend(_node_findings("untenanted", row))
    for check in _NODE_CHECKS:
        async for row in _pages(store, check, tenant_id=tenant_id):
            findings.extend(_node_findings(check.removeprefix("doctor_"), row))
    async for row in _pages(store, "doctor_skills", tenant_id=tenant_id):
        findings.extend(_read_skill_findings(row["skill_row"]))
        findings.extend(shape_findings(row))
    findings.extend(await _identifier_findings(store, tenant_id))
    findings.extend(await _key_findings(store, tenant_id))
    findings.extend(await _recurrence_findings(store, tenant_id))
    findings.extend(await _where_findings(store, tenant_id))
    findings.extend(await _cap_findings(store, tenant_id, max_triggers))
    findings.extend(await _embedding_findings(store, tenant_id))
    findings.extend(await _copied_id_findings(store, tenant_id))
    findings.extend(await _catalog_bound_findings(store, tenant_id))
    findings.extend(await _budget_findings(store, tenant_id))
    findings.extend(await _token_findings(store, tenant_id))
    indexes = {row["name"]: row["state"] for row in await store.read("doctor_indexes")}
    for name in EXPECTED_INDEXES:
        if name not in indexes:
            findings.append(Finding("indexes", "Index", name, "missing: run `symfonic-graph schema apply`"))
        elif indexes[name] != "ONLINE":
            findings.append(Finding("indexes", "Index", name, f"state {indexes[name]}, not ONLINE"))
    return findings
