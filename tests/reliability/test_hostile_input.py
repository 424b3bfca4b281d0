"""Hostile input through every public write entry point.

Each hostile value (Cypher injection attempts, quotes, backticks, ``$``,
braces, unicode, control characters, 1 MB strings, wrong types, huge lists)
goes into one field of one entry point. The only acceptable outcomes are:

* a typed error (``ValueError`` subclass or ``SymfonicGraphError``) that names
  the field (``ValidationError.field``, or the field name in the message), or
* the value is stored and reads back exactly (after the documented
  normalisation of preconditions: a bare tool identifier is stripped, an empty
  list reads back as ``None``).

Afterwards a victim tenant's node count and a checksum of all its nodes'
labels and properties are unchanged.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import neo4j
import pytest

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    NotFoundError,
    ProceduralLayer,
    ProspectiveLayer,
    ScopeError,
    SymfonicGraphError,
    ValidationError,
)
from symfonic_graph.layers import SemanticLayer
from symfonic_graph.preconditions import bare_identifier
from tests.reliability._stats import FIGURES

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

MB = 1_000_000
WORKERS = 3

INJECTION: list[str] = [
    "' OR 1=1 //", '" OR 1=1 //', "x' }) MATCH (n) DETACH DELETE n //", 'x"}) MATCH (n) DETACH DELETE n //',
    "') WITH 1 AS x MATCH (n) SET n.tenant_id = 'pwned' //", "` MATCH (n) DETACH DELETE n //",
    "*/ MATCH (n) DETACH DELETE n /*", "'; CALL dbms.killQueries([]) //",
    "LOAD CSV FROM 'file:///etc/passwd' AS l RETURN l", "CALL apoc.cypher.runWrite('MATCH (n) DETACH DELETE n', {})",
    "MATCH (n) DETACH DELETE n", "RETURN 1; MATCH (n) DETACH DELETE n", "}) RETURN s //", "\\' OR 1=1", "1 OR 1=1",
    "n.tenant_id", "s.tenant_id = 'victim'", ":SymfonicRetracted", ":SymfonicUnpublished", "SymfonicCatalog",
    "{tenant_id: $tenant_id}", "$tenant_id", "$rows", "${namespace}", "$1", "$", "$$", "{{ tenant_id }}", "{0}",
    "%s", "%(tenant_id)s", "{}", "{", "}", "[", "]", "()", "(n)", "-->", "<-[:REQUIRES]-", "//", "/*", ";",
    "\\", "\\\\", "\\u0027", "'", '"', "''", '""', "'\"'", "`", "``", "`Skill`", "a`b`c", "\"`'",
    "*", ".*", "?", "~", "AND", "OR", "NOT", "NULL", "null", "true", "None", "0", "-1", "NaN", "Infinity",
    "*:*", "label:x AND context:y~2^3", '"unterminated', "a||b&&!c", "get_status(brand_id=') DETACH DELETE n //')",
    "deliver", "  deliver  ", "deliver()", "run_tests(x=1)",
]
UNICODE: list[str] = [
    "é", "e\u0301", "日本語のテキスト", "🙂", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\u202eevil",
    "\u200b", "\ufeff", "Ω≈ç√∫", "\ufdfa", "\U0001d518\U0001d52b\U0001d526", "\U0010ffff", "\ufffd", "ǅ", "İ", "ß",
    "ﬃ", "\u0301", "a\u0300\u0301\u0302" * 50, "\u2028", "\u2029", "\uff2d\uff21\uff34\uff23\uff28 (n)",
]
CONTROL: list[str] = [
    "\x00", "a\x00b", "\x01", "\n", "\r\n", "\t", "line1\nline2", "\x1b[31mred\x1b[0m", "\x7f", "\x85", "\x08",
    "\x0c", "\x1f", "\x9f",
]
BLANK: list[str] = ["", " ", "   ", "\u3000", "\u00a0"]
LARGE: list[str] = ["a" * MB, "'" * MB, "日" * (MB // 3), "x' OR 1=1 // " * (MB // 13)]
WRONG_TYPES: list[Any] = [
    0, 1, -1, 2**63, 1.5, float("nan"), float("inf"), True, False, None, {}, {"a": 1}, {"$ne": None}, [], [1, 2],
    [None], ["a", 1], (1,), b"bytes", bytearray(b"x"), object(), decimal.Decimal("1"), dt.datetime.now(dt.UTC),
    uuid.uuid4(), frozenset({"a"}), {"a"}, len,
]
HUGE_LISTS: list[Any] = [["s"] * 100_000, [1] * 100_000, list(range(10_000)), [f"tool_{i}" for i in range(2_000)]]
STRUCTURED_PRECONDITIONS: list[Any] = [
    {"tool": "x' OR 1=1 //"}, {"tool": 1}, {"tool": None}, {"tool": "ok", "extra": 1},
    {"state": {"path": "a.b", "op": "eq", "value": "') DETACH DELETE n //"}},
    {"state": {"path": "a..b", "op": "eq", "value": 1}}, {"state": {"path": "", "op": "eq", "value": 1}},
    {"state": {"path": "a", "op": "eq'; DROP", "value": 1}}, {"state": {"path": "a", "op": "$op", "value": 1}},
    {"state": {"path": "a", "op": "eq", "value": {"nested": 1}}}, {"state": {"path": "a", "op": "eq", "value": None}},
    {"state": {"path": "a", "op": "in", "value": [1, "a"]}}, {"state": {"path": "a", "op": "in", "value": "abc"}},
    {"state": {"path": "a", "op": "exists", "value": 1}}, {"state": {"path": "a", "op": "eq"}},
    {"state": {"path": "a", "op": "in", "value": list(range(10_000))}}, {"state": {"path": "`a`", "op": "exists"}},
    {"state": {"path": "a", "op": "eq", "value": "x", "$where": "1=1"}}, {"state": "a.b eq 1"},
]
STRINGS: list[str] = INJECTION + UNICODE + CONTROL + BLANK + LARGE


@dataclass
class Outcome:
    entry: str
    field: str
    value: Any
    result: str  # "rejected" | "stored" | "BAD: ..."


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}...({len(text)} chars)"


def _names_field(exc: BaseException, field: str) -> bool:
    if isinstance(exc, ValidationError):
        return exc.field == field or exc.field.startswith((field + "[", field + "."))
    return field in str(exc)


def _expected_precondition(value: Any) -> Any:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else list(value)
    out: list[Any] = []
    for item in items:
        if isinstance(item, str):
            out.append(item.strip() if bare_identifier(item) is not None else item)
        elif set(item) == {"tool"}:
            out.append(item["tool"].strip())
        else:
            out.append({"state": dict(item["state"])})
    return tuple(out) if out else None


def _one(rows: list[Any], node_id: str) -> Any:
    found = [r for r in rows if r.id == node_id]
    if len(found) != 1:
        raise AssertionError(f"node {node_id} read back {len(found)} times")
    return found[0]


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_stable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


async def tenant_checksum(driver: neo4j.AsyncDriver, database: str | None, tenant: str) -> tuple[int, str]:
    """Node count and a checksum of the labels and properties of every node of ``tenant``."""
    records, _, _ = await driver.execute_query(
        "MATCH (n) WHERE n.tenant_id = $t RETURN labels(n) AS labels, properties(n) AS props",
        t=tenant, database_=database,
    )
    rows = sorted(json.dumps(_stable({"labels": sorted(r["labels"]), "props": r["props"]})) for r in records)
    return len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest()


class HostileProbe:
    """Runs one hostile value through one field and classifies the outcome."""

    def __init__(self, store: GraphMemoryStore, driver: neo4j.AsyncDriver, scope: MemoryScope, token: str) -> None:
        self.store = store
        self.driver = driver
        self.scope = scope
        self.token = token
        self.skills = ProceduralLayer(store)
        self.triggers = ProspectiveLayer(store)
        self.facts = SemanticLayer(store)
        self.outcomes: list[Outcome] = []

    async def attempt(
        self, entry: str, field: str, value: Any, run: Callable[[], Awaitable[tuple[Any, Any]]],
        *, not_found_ok: bool = False,
    ) -> None:
        FIGURES["hostile.attempts"] += 1
        try:
            expected, actual = await run()
        except (ValueError, SymfonicGraphError) as exc:
            typed_ok = not_found_ok if isinstance(exc, NotFoundError) else _names_field(exc, field)
            result = "rejected" if typed_ok else f"BAD: {type(exc).__name__} does not name {field!r}: {exc!s:.160}"
        except Exception as exc:
            result = f"BAD: untyped {type(exc).__name__}: {str(exc)[:160]}"
        else:
            if type(expected) is type(actual) and expected == actual:
                result = "stored"
            else:
                result = f"BAD: stored {_short(expected)} but read back {_short(actual)}"
        key = "hostile.rejected" if result == "rejected" else "hostile.stored" if result == "stored" else "hostile.bad"
        FIGURES[key] += 1
        self.outcomes.append(Outcome(entry, field, value, result))

    # -- entry points -----------------------------------------------------

    async def skill(self, field: str, value: Any) -> None:
        args: dict[str, Any] = {"label": "hostile", "steps": ["deliver"], "source_tag": "authored:hostile"}
        args[field] = value

        async def run() -> tuple[Any, Any]:
            written = await self.skills.seed_authored_skill(self.scope, **args)
            skill = await self.skills.get_skill(self.scope, written.id)
            if field == "steps":
                return list(value), list(skill.steps)
            if field == "precondition":
                return _expected_precondition(value), skill.precondition
            return value, getattr(skill, field)

        await self.attempt("seed_authored_skill", field, value, run)

    async def trigger(self, field: str, value: Any) -> None:
        args: dict[str, Any] = {"condition": "c", "task": "t", field: value}

        async def run() -> tuple[Any, Any]:
            trigger_id = await self.triggers.set_trigger(self.scope, **args)
            trigger = _one(await self.triggers.get_pending(self.scope), trigger_id)
            await self.triggers.resolve_trigger(self.scope, trigger_id)  # read back: the next reads skip it
            return value, getattr(trigger, field)

        await self.attempt("set_trigger", field, value, run)

    async def staged_trigger(self, write_id: Any) -> None:
        async def run() -> tuple[Any, Any]:
            trigger_id = await self.triggers.set_trigger(self.scope, condition="c", task="t", write_id=write_id)
            staged = trigger_id in {t.id for t in await self.triggers.get_pending(self.scope, write_id=write_id)}
            live = trigger_id in {t.id for t in await self.triggers.get_pending(self.scope)}
            return (True, False, 1), (staged, live, await self.store.discard(self.scope, write_id))

        await self.attempt("set_trigger", "write_id", write_id, run)

    async def fact(self, value: Any) -> None:
        async def run() -> tuple[Any, Any]:
            fact_id = await self.facts.add_fact(self.scope, value)
            fact = _one(await self.facts.list_facts(self.scope), fact_id)
            await self.store.retract(self.scope, fact_id, reason="read back")  # the next reads skip it
            return value, fact.text

        await self.attempt("SemanticLayer.add_fact", "text", value, run)

    async def scope_field(self, field: str, value: Any) -> None:
        # Tenant ids are prefixed with a per-run token so the shared server's tenants stay apart.
        tenant = self.token + value if field == "tenant_id" and isinstance(value, str) and value else value

        async def run() -> tuple[Any, Any]:
            scope = MemoryScope(tenant) if field == "tenant_id" else MemoryScope(self.scope.tenant_id, value)
            fact_id = await self.facts.add_fact(scope, "scoped")
            facts = await self.facts.list_facts(scope)
            fact = _one(facts, fact_id)
            if not all(scope.sees(f.tenant_id, f.namespace) for f in facts):
                raise AssertionError(f"list_facts({scope}) returned another scope's fact")
            return (tenant if field == "tenant_id" else value), getattr(fact, field)

        await self.attempt("MemoryScope", field, tenant, run)

    async def retract_node_id(self, value: Any) -> None:
        async def run() -> tuple[Any, Any]:
            # No node has this id; a live skill or trigger of the scope may carry it as its identifier
            # (retract takes identifiers too): then exactly that node is retracted, and restored here.
            node_id = await self.store.retract(self.scope, value, reason="hostile")
            records, _, _ = await self.driver.execute_query(
                "MATCH (n {id: $id}) WHERE n.tenant_id = $t "
                "RETURN n.identifier AS identifier, n:SymfonicRetracted AS retracted",
                id=node_id, t=self.scope.tenant_id, database_=self.store.database,
            )
            await self.store.restore(self.scope, node_id)
            return (value, True), (records[0]["identifier"], records[0]["retracted"])

        await self.attempt("retract", "node_id", value, run, not_found_ok=isinstance(value, str) and bool(value))

    async def retract_reason(self, value: Any) -> None:
        fact_id = await self.facts.add_fact(self.scope, "to retract")

        async def run() -> tuple[Any, Any]:
            await self.store.retract(self.scope, fact_id, reason=value)
            records, _, _ = await self.driver.execute_query(
                "MATCH (f:Fact {id: $id}) RETURN f.symfonic_retracted_reason AS reason", id=fact_id,
                database_=self.store.database,
            )
            hidden = fact_id not in {f.id for f in await self.facts.list_facts(self.scope)}
            await self.store.restore(self.scope, fact_id)
            return (value, True), (records[0]["reason"], hidden)

        await self.attempt("retract", "reason", value, run)


@pytest.mark.slow
async def test_hostile_values_are_rejected_or_stored_exactly(
    store: GraphMemoryStore, driver: neo4j.AsyncDriver, tenant: str
) -> None:
    for name in ("hostile.attempts", "hostile.rejected", "hostile.stored", "hostile.bad"):
        FIGURES[name] += 0
    database = store.database
    victim = MemoryScope(f"victim-{uuid.uuid4().hex}")
    victim_ns = MemoryScope(victim.tenant_id, "n1")
    victim_ids: list[str] = []
    for sc in (victim, victim_ns):
        skill = await ProceduralLayer(store).seed_authored_skill(
            sc, label="victim skill", steps=["deliver"], source_tag="authored:victim", identifier="deliver",
            precondition=["get_status", {"state": {"path": "channel", "op": "eq", "value": "slack"}}, "be nice"],
        )
        victim_ids += [
            skill.id,
            await ProspectiveLayer(store).set_trigger(sc, condition="victim condition", task="victim task"),
            await SemanticLayer(store).add_fact(sc, "victim fact"),
        ]
    before = await tenant_checksum(driver, database, victim.tenant_id)

    values: dict[str, Any] = {}
    jobs: list[tuple[str, Any]] = []

    def add(kind: str, items: list[Any]) -> None:
        for value in items:
            values.setdefault(f"{type(value).__name__}:{value!r}"[:2_000], value)
            jobs.append((kind, value))

    add("value", STRINGS + WRONG_TYPES)
    add("list", HUGE_LISTS)
    add("precondition", STRUCTURED_PRECONDITIONS)
    add("victim_id", victim_ids)  # another tenant's real ids: never reachable from the attacker's scope

    # A few workers, each with its own attacker tenant, so the run fits the suite's time budget.
    probes = [
        HostileProbe(store, driver, MemoryScope(f"{tenant}-{w}"), token=f"h-{uuid.uuid4().hex[:12]}-")
        for w in range(WORKERS)
    ]
    async with anyio.create_task_group() as tg:
        for w, probe in enumerate(probes):
            tg.start_soon(_run_jobs, probe, jobs[w::WORKERS])
    outcomes = [o for probe in probes for o in probe.outcomes]
    FIGURES["hostile.values"] += len(values)

    after = await tenant_checksum(driver, database, victim.tenant_id)
    bad = [o for o in outcomes if o.result.startswith("BAD")]
    print(f"hostile summary: values={len(values)} attempts={len(outcomes)} bad={len(bad)}")
    assert len(values) >= 100
    assert not bad, "\n".join(f"{o.entry}.{o.field} = {_short(o.value)}: {o.result}" for o in bad[:40])
    assert after == before, f"victim tenant changed: {before} -> {after}"
    assert len(await ProceduralLayer(store).query_skills(victim_ns)) == 2


async def _run_jobs(probe: HostileProbe, jobs: list[tuple[str, Any]]) -> None:
    for kind, value in jobs:
        if kind == "value":
            for field in ("label", "context", "identifier"):
                await probe.skill(field, value)
            await probe.skill("steps", [value] if isinstance(value, str) else value)
            await probe.skill("precondition", [value] if isinstance(value, str) else value)
            await probe.trigger("condition", value)
            await probe.trigger("task", value)
            await probe.fact(value)
            await probe.staged_trigger(value)
            await probe.scope_field("tenant_id", value)
            await probe.scope_field("namespace", value)
            await probe.retract_node_id(value)
            await probe.retract_reason(value)
        elif kind == "list":
            await probe.skill("steps", value)
            await probe.skill("precondition", value)
        elif kind == "precondition":
            await probe.skill("precondition", [value])
        else:
            await probe.retract_node_id(value)
            await probe.attempt(
                "restore", "node_id", value, lambda v=value: _restore(probe.store, probe.scope, v), not_found_ok=True
            )
            await probe.attempt(
                "resolve_trigger", "trigger_id", value,
                lambda v=value: _resolve(probe.store, probe.scope, v), not_found_ok=True,
            )


async def _restore(store: GraphMemoryStore, scope: MemoryScope, node_id: str) -> tuple[Any, Any]:
    await store.restore(scope, node_id)
    return "NotFoundError", "restored"


async def _resolve(store: GraphMemoryStore, scope: MemoryScope, node_id: str) -> tuple[Any, Any]:
    await ProspectiveLayer(store).resolve_trigger(scope, node_id)
    return "NotFoundError", "resolved"


# -- size limits, and a known bug pinned ---------------------------------------------


async def test_oversized_identifier_is_rejected_naming_the_field(store: GraphMemoryStore, tenant: str) -> None:
    """Regression: a long identifier once reached the unique index and failed as StoreUnavailableError."""
    layer = ProceduralLayer(store)
    for size in (10_000, MB):
        with pytest.raises(ValidationError) as info:
            await layer.seed_authored_skill(
                MemoryScope(tenant), label="x", steps=["deliver"], source_tag="authored:hostile",
                identifier="a" * size,
            )
        assert info.value.field == "identifier"


async def test_largest_allowed_key_parts_are_stored(store: GraphMemoryStore) -> None:
    """Tenant, namespace, identifier and write_id at their size limits, in the widest encodings
    (4-byte UTF-8 characters, characters JSON escapes), still fit the unique key index."""
    layer = ProceduralLayer(store)
    for wide in ("\U0001f600", '"', "\\"):
        scope = MemoryScope(uuid.uuid4().hex[:8] + wide * 504, wide * 512)
        for identifier, write_id in ((wide * 256, None), ("\x00" * 256, wide * 256), (wide * 256, "\x01" * 256)):
            skill = await layer.seed_authored_skill(
                scope, label="wide", steps=["deliver"], source_tag="authored:hostile", identifier=identifier,
                write_id=write_id,
            )
            assert (skill.tenant_id, skill.namespace) == (scope.tenant_id, scope.namespace)
            assert skill.identifier == identifier
            if write_id is not None:
                assert await store.publish(scope, write_id) == 1
        identifiers = sorted(s.identifier or "" for s in await layer.query_skills(scope))
        assert identifiers == sorted([wide * 256, "\x00" * 256])


async def test_lone_surrogates_are_rejected_naming_the_field(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    cases: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("label", lambda: ProceduralLayer(store).seed_authored_skill(
            scope, label="\ud800", steps=["deliver"], source_tag="authored:hostile")),
        ("text", lambda: SemanticLayer(store).add_fact(scope, "a\udfffb")),
        ("task", lambda: ProspectiveLayer(store).set_trigger(scope, condition="c", task="\udc00")),
    ]
    for field, call in cases:
        with pytest.raises(SymfonicGraphError) as info:
            await call()
        assert _names_field(info.value, field), info.value
    with pytest.raises(ScopeError, match="tenant_id"):
        MemoryScope("t-\ud800")
