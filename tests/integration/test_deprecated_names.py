"""Every deprecated top-level name still works until its removal, and says where it moved.

``symfonic_graph._MOVED`` lists the names that left the top level. For each,
``EXERCISES`` holds one use of it (a call, a construction, a raise) against a
real Neo4j where it needs one. The use runs twice, in fresh tenants: through
``symfonic_graph.<name>`` and through its new import path. Both give the
same outcome; only the first warns, with a ``DeprecationWarning`` that names
the new import path and the removal release and points at the caller's line.
A name added to ``_MOVED`` without an exercise here fails the first test.
"""

from __future__ import annotations

import importlib
import uuid
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import neo4j
import pytest

import symfonic_graph
from symfonic_graph import GraphMemoryStore, MemoryScope, PluginContribution, ProceduralLayer, errors
from symfonic_graph.gate import explain_tool_call
from symfonic_graph.layers import SemanticLayer
from symfonic_graph.recall import MemoryLayer
from symfonic_graph.triggers import PendingTrigger

pytestmark = pytest.mark.anyio

Exercise = Callable[[Any, GraphMemoryStore, MemoryScope, neo4j.AsyncDriver], Awaitable[object]]
EXERCISES: dict[str, Exercise] = {}


def exercise(name: str) -> Callable[[Exercise], Exercise]:
    def register(fn: Exercise) -> Exercise:
        EXERCISES[name] = fn
        return fn
    return register


class Greeting:
    async def contribute(self, request: object) -> list[PluginContribution]:
        return [PluginContribution(f"Be kind to {request}.", "cached", 1, "## Tone", "app.greeting")]


@exercise("ComposedPrompt")
async def _composed_prompt(cls: Any, *_: Any) -> object:
    block = PluginContribution("Be kind.", "cached", 1, "## Tone", "app.greeting")
    return cls((block,), (), ()).text


@exercise("compose_prompt")
async def _compose_prompt(fn: Any, *_: Any) -> object:
    composed = await fn([Greeting(), object()], "Ada", budget_chars=100)
    return composed.text, composed.dropped, composed.failed


@exercise("DroppedSkill")
async def _dropped_skill(cls: Any, *_: Any) -> object:
    return cls(None, "Deploy", "sk-1", 0, {"path": "env", "op": "exists"}, "path 'env' is missing")


@exercise("GateDecision")
async def _gate_decision(cls: Any, *_: Any) -> object:
    verdict = explain_tool_call([], "deploy").verdict
    return cls("deploy", "call-1", verdict).to_tool_message() is None


@exercise("SkillCheck")
async def _skill_check(cls: Any, *_: Any) -> object:
    return cls("Deploy", "sk-1", ("auth",), ("auth",))


@exercise("explain_tool_call")
async def _explain_tool_call(fn: Any, *_: Any) -> object:
    skill = {"metadata": {"label": "Deploy", "action_tool": "deploy", "precondition": "auth"}}
    blocked, allowed = fn([skill], "deploy"), fn([skill], "deploy", called=["auth"])
    return blocked.verdict, blocked.content(), allowed.verdict


@exercise("SkillSpec")
async def _skill_spec(cls: Any, store: GraphMemoryStore, scope: MemoryScope, _: Any) -> object:
    spec = cls(label="Refund", steps=["lookup_order", "issue_refund"], source_tag="authored:billing",
               action_tool="issue_refund", precondition="lookup_order")
    await ProceduralLayer(store).seed_skills(scope, [spec])
    return sorted(s.label for s in await ProceduralLayer(store).query_skills(scope))


@exercise("SemanticLayer")
async def _semantic_layer(cls: Any, store: GraphMemoryStore, scope: MemoryScope, _: Any) -> object:
    await cls(store).add_fact(scope, "The zanzibar invoice is due on the 5th.")
    return [str(h) for h in await symfonic_graph.recall.recall(store, scope, "zanzibar")]


@exercise("Neo4jSelectionAuditSink")
async def _audit_sink(cls: Any, store: GraphMemoryStore, scope: MemoryScope, driver: neo4j.AsyncDriver) -> object:
    await cls(store).selected(scope, [PendingTrigger("t-1", "user mentions the invoice", "Say it is overdue.")])
    records, _, _ = await driver.execute_query(
        "MATCH (n:SymfonicTriggerSelection {tenant_id: $t}) WITH n, n.trigger_ids AS ids DETACH DELETE n "
        "RETURN ids", {"t": scope.tenant_id})
    return [r["ids"] for r in records]


@exercise("QueryFileError")
async def _query_file_error(cls: Any, *_: Any) -> object:
    with pytest.raises(errors.QueryFileError) as caught:
        raise cls("skills.cypher:1: no '// name:' header")
    return str(caught.value), isinstance(caught.value, errors.SymfonicGraphError)


@exercise("SchemaError")
async def _schema_error(cls: Any, *_: Any) -> object:
    with pytest.raises(errors.SchemaError) as caught:
        raise cls("the full-text index is missing")
    return str(caught.value), isinstance(caught.value, errors.SymfonicGraphError)


@exercise("RecallHit")
async def _recall_hit(cls: Any, *_: Any) -> object:
    return str(cls(MemoryLayer.SEMANTIC, "f-1", "The invoice is due on the 5th.", 1.5))


@exercise("recall")
async def _recall(fn: Any, store: GraphMemoryStore, scope: MemoryScope, _: Any) -> object:
    await SemanticLayer(store).add_fact(scope, "The invoice is due on the 5th.")
    await SemanticLayer(store).add_fact(scope, "Shipping takes three days.")
    hits = await fn(store, scope, "invoice")
    return [str(h) for h in hits]


@exercise("StoreSkillGetter")
async def _store_skill_getter(cls: Any, store: GraphMemoryStore, scope: MemoryScope, _: Any) -> object:
    await ProceduralLayer(store).seed_authored_skill(
        scope, label="Refund", steps=["lookup_order", "issue_refund"], source_tag="authored:billing")
    skills = await cls(store)({"memory_scope": scope})
    return [s.label for s in skills]


@exercise("scope_from_state")
async def _scope_from_state(fn: Any, *_: Any) -> object:
    return fn()({"memory_scope": {"tenant_id": "acme", "namespace": "user-7"}})


@exercise("scope_from_turn")
async def _scope_from_turn(fn: Any, *_: Any) -> object:
    return fn("scope")({"scope": MemoryScope("acme")})


@exercise("scope_of")
async def _scope_of(fn: Any, *_: Any) -> object:
    with pytest.raises(errors.ScopeError):
        fn({"namespace": "user-7"})
    return fn({"tenant_id": "acme", "namespace": "user-7"}), fn(MemoryScope("acme"))


def test_every_deprecated_name_has_an_exercise() -> None:
    assert set(EXERCISES) == set(symfonic_graph._MOVED)


@pytest.fixture
def fresh_scopes(forget: list[str]) -> Callable[[], MemoryScope]:
    def make() -> MemoryScope:
        tenant = f"t-{uuid.uuid4().hex}"
        forget.append(tenant)
        return MemoryScope(tenant)
    return make


@pytest.mark.parametrize("name", sorted(symfonic_graph._MOVED))
async def test_deprecated_name_behaves_as_its_new_import_and_warns(
    name: str, store: GraphMemoryStore, driver: neo4j.AsyncDriver, fresh_scopes: Callable[[], MemoryScope],
) -> None:
    module = symfonic_graph._MOVED[name]
    use = EXERCISES[name]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=r"symfonic_graph\.", category=DeprecationWarning)
        new = await use(getattr(importlib.import_module(module), name), store, fresh_scopes(), driver)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = await use(getattr(symfonic_graph, name), store, fresh_scopes(), driver)
    assert old == new
    assert new not in (None, [], ())
    ours = [w for w in caught if issubclass(w.category, DeprecationWarning) and "symfonic_graph." in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    message = str(ours[0].message)
    assert f"symfonic_graph.{name} is deprecated" in message
    assert f"use `from {module} import {name}`" in message
    assert f"removed in {symfonic_graph._REMOVED_IN}" in message
    assert ours[0].filename == __file__, "the warning points at the caller's line"
    assert importlib.import_module(module).__name__ in symfonic_graph._MOVED.values()


async def test_calling_the_package_s_recall_returns_hits(store: GraphMemoryStore, scope: MemoryScope,
                                                         forget: list[str]) -> None:
    await SemanticLayer(store).add_fact(scope, "The invoice is due on the 5th.")
    with pytest.warns(DeprecationWarning, match=r"use `from symfonic_graph\.recall import recall`"):
        hits = await symfonic_graph.recall(store, scope, "invoice")  # type: ignore[operator]
    assert [str(h) for h in hits] == ["[semantic] The invoice is due on the 5th."]


def test_the_recall_module_stays_a_module() -> None:
    import symfonic_graph.recall
    from symfonic_graph import recall as from_package
    from symfonic_graph.recall import recall, recall_search

    assert from_package is symfonic_graph.recall is importlib.import_module("symfonic_graph.recall")
    assert recall is symfonic_graph.recall.recall and callable(recall_search)
    assert symfonic_graph.recall.__name__ == "symfonic_graph.recall"
