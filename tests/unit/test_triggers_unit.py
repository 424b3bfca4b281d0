"""The prospective-trigger capability, sinks and composition, without a database.

The source here is a tiny in-memory implementation of our own
``PendingTriggerSource`` protocol, not a stand-in for Neo4j.
"""

from __future__ import annotations

import gc
import inspect
import logging
import warnings
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest

from symfonic_graph._store import GraphMemoryStore
from symfonic_graph.composition import ComposedPrompt, PromptingCapability, compose_prompt
from symfonic_graph.models import Trigger
from symfonic_graph.shape.contributions import GrantEffects, PluginContribution
from symfonic_graph.shape.scope import MemoryScope
from symfonic_graph.triggers import (
    GraphPendingTriggers,
    Neo4jSelectionAuditSink,
    PendingTrigger,
    ProspectiveTriggerCapability,
    TriggerSelectionSink,
    prompt_cue,
    prospective_trigger_capabilities,
)

pytestmark = pytest.mark.anyio

SCOPE = MemoryScope("acme", "u1")


@dataclass
class ListSource:
    """Our source protocol over a list; records the scopes it was asked for."""

    triggers: list[PendingTrigger]
    asked: list[MemoryScope] = field(default_factory=list)

    async def pending(self, scope: MemoryScope) -> list[PendingTrigger]:
        self.asked.append(scope)
        return list(self.triggers)


class FailingSource:
    async def pending(self, scope: MemoryScope) -> list[PendingTrigger]:
        raise ConnectionError("graph down")


def contains(condition: str, cue: str) -> bool:
    return condition in cue


def req(prompt: object) -> SimpleNamespace:
    return SimpleNamespace(prompt=prompt)


INVOICE = PendingTrigger("t1", "invoice", "Say the invoice is overdue.")
BIRTHDAY = PendingTrigger("t2", "birthday", "Wish them a happy birthday.")


def capability(*triggers: PendingTrigger, evaluator: Any = contains, **kw: Any) -> ProspectiveTriggerCapability:
    return ProspectiveTriggerCapability(ListSource(list(triggers)), evaluator, SCOPE, **kw)


# -- selection -------------------------------------------------------------


async def test_selected_tasks_become_one_dynamic_contribution() -> None:
    cap = capability(INVOICE, BIRTHDAY, PendingTrigger("t3", "weather", "Mention rain."))
    [c] = await cap.contribute(req("my invoice and my birthday"))
    assert c == PluginContribution(
        "## PENDING REMINDERS\n- Say the invoice is overdue.\n- Wish them a happy birthday.",
        "dynamic", 20, "", "symfonic.prospective",
    )


async def test_only_tasks_are_offered_never_conditions_or_ids() -> None:
    trig = PendingTrigger("secret-id-123", "the user says CODEWORD", "Offer the discount.")
    [c] = await capability(trig, evaluator=lambda cond, cue: True).contribute(req("hi"))
    assert "Offer the discount." in c.content
    assert "CODEWORD" not in c.content and "secret-id-123" not in c.content


async def test_multiline_task_stays_one_bullet() -> None:
    trig = PendingTrigger("t", "x", "First line.\n## Not a heading")
    [c] = await capability(trig, evaluator=lambda cond, cue: True).contribute(req(""))
    assert c.content == "## PENDING REMINDERS\n- First line.\n  ## Not a heading"


async def test_nothing_selected_gives_empty_list() -> None:
    assert await capability(INVOICE).contribute(req("nothing relevant")) == []
    assert await capability().contribute(req("invoice")) == []


@pytest.mark.parametrize("task", ["", "   ", "\n"])
async def test_empty_task_is_never_selected(task: str) -> None:
    calls: list[str] = []

    def ev(cond: str, cue: str) -> bool:
        calls.append(cond)
        return True

    assert await capability(PendingTrigger("t", "c", task), evaluator=ev).contribute(req("c")) == []
    assert calls == []


@pytest.mark.parametrize("result", [1, "yes", "True", None, 0, [True], 1.0])
async def test_non_bool_results_select_nothing(result: object, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "symfonic_graph.memory.triggers"):
        assert await capability(INVOICE, evaluator=lambda c, q: result).contribute(req("invoice")) == []
    if result is not None and result != 0:
        assert "not a bool" in caplog.text


async def test_false_selects_nothing_quietly(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert await capability(INVOICE, evaluator=lambda c, q: False).contribute(req("invoice")) == []
    assert caplog.records == []


async def test_raising_evaluator_selects_nothing_and_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    def ev(cond: str, cue: str) -> bool:
        if cond == "invoice":
            raise RuntimeError("model down")
        return True

    with caplog.at_level(logging.WARNING, "symfonic_graph.memory.triggers"):
        [c] = await capability(INVOICE, BIRTHDAY, evaluator=ev).contribute(req("invoice birthday"))
    assert c.content == "## PENDING REMINDERS\n- Wish them a happy birthday."
    assert "evaluator raised on trigger t1" in caplog.text


async def test_awaitable_result_is_closed_without_never_awaited_warning(caplog: pytest.LogCaptureFixture) -> None:
    made: list[Coroutine[Any, Any, bool]] = []

    async def answer() -> bool:
        return True

    def ev(cond: str, cue: str) -> Any:
        coro = answer()
        made.append(coro)
        return coro

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with caplog.at_level(logging.WARNING, "symfonic_graph.memory.triggers"):
            assert await capability(INVOICE, evaluator=ev).contribute(req("invoice")) == []
        assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED
        made.clear()
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
    assert "awaitable" in caplog.text


async def test_async_def_evaluator_is_accepted_but_selects_nothing(caplog: pytest.LogCaptureFixture) -> None:
    async def ev(cond: str, cue: str) -> bool:
        return True

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with caplog.at_level(logging.WARNING, "symfonic_graph.memory.triggers"):
            cap = capability(INVOICE, evaluator=ev)
            assert "is async" in caplog.text
            assert await cap.contribute(req("invoice")) == []
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]


async def test_callable_object_with_async_call_selects_nothing() -> None:
    class Ev:
        async def __call__(self, cond: str, cue: str) -> bool:
            return True

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert await capability(INVOICE, evaluator=Ev()).contribute(req("invoice")) == []
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]


async def test_evaluator_gets_condition_and_cue() -> None:
    seen: list[tuple[str, str]] = []

    def ev(cond: str, cue: str) -> bool:
        seen.append((cond, cue))
        return False

    await capability(INVOICE, BIRTHDAY, evaluator=ev).contribute(req("hello"))
    assert seen == [("invoice", "hello"), ("birthday", "hello")]


# -- cue ---------------------------------------------------------------------


def test_default_cue() -> None:
    assert prompt_cue(req("hi")) == "hi"
    assert prompt_cue(object()) == ""
    assert prompt_cue(req(None)) == ""
    assert prompt_cue(req(42)) == "42"
    assert prompt_cue({"prompt": "from a dict"}) == "from a dict"


async def test_custom_cue_from() -> None:
    cap = capability(INVOICE, cue_from=lambda r: r.state["last_user_message"])
    request = SimpleNamespace(prompt="ignored", state={"last_user_message": "my invoice"})
    assert len(await cap.contribute(request)) == 1


@pytest.mark.parametrize("cue_from", [lambda r: 1 / 0, lambda r: 42])
async def test_failing_or_non_str_cue_contributes_nothing(cue_from: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "symfonic_graph.memory.triggers"):
        assert await capability(INVOICE, evaluator=lambda c, q: True, cue_from=cue_from).contribute(req("x")) == []
    assert "cue_from" in caplog.text


# -- source ------------------------------------------------------------------


async def test_failing_source_contributes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    cap = ProspectiveTriggerCapability(FailingSource(), lambda c, q: True, SCOPE)
    with caplog.at_level(logging.WARNING, "symfonic_graph.memory.triggers"):
        assert await cap.contribute(req("invoice")) == []
    assert "source failed" in caplog.text and "ConnectionError" in caplog.text


async def test_source_is_asked_for_the_capability_scope_each_turn() -> None:
    source = ListSource([INVOICE])
    cap = ProspectiveTriggerCapability(source, contains, SCOPE)
    for _ in range(3):
        assert len(await cap.contribute(req("invoice"))) == 1
    assert source.asked == [SCOPE] * 3


async def test_non_pending_trigger_items_are_skipped() -> None:
    source = ListSource(cast(list[PendingTrigger], [{"trigger_id": "x", "condition": "c", "task": "t"}, INVOICE]))
    [c] = await ProspectiveTriggerCapability(source, lambda c, q: True, SCOPE).contribute(req(""))
    assert c.content.endswith("- Say the invoice is overdue.")


# -- construction ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"evaluator": None}, "evaluator is required"),
        ({"evaluator": "contains"}, "evaluator is required"),
        ({"source": object()}, "source must have an async pending"),
        ({"source": None}, "source must have an async pending"),
        ({"scope": "acme"}, "scope must be a MemoryScope"),
        ({"sink": object()}, "sink must have a selected"),
        ({"cue_from": "prompt"}, "cue_from must be a callable"),
    ],
)
def test_construction_is_validated(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"source": ListSource([]), "evaluator": contains, "scope": SCOPE, **kwargs}
    with pytest.raises(TypeError, match=message):
        ProspectiveTriggerCapability(**args)


def test_graph_source_needs_a_store() -> None:
    with pytest.raises(ValueError, match=r"^pending triggers need a graph backend$"):
        GraphPendingTriggers(cast(GraphMemoryStore, None))


def test_capabilities_factory() -> None:
    sink = RecordingSink()
    grant, cap = prospective_trigger_capabilities(ListSource([]), contains, SCOPE, sink=sink)
    assert grant == GrantEffects("memory-read")
    assert isinstance(cap, ProspectiveTriggerCapability)
    assert (cap.scope, cap.sink, cap.evaluator) == (SCOPE, sink, contains)
    assert isinstance(cap, PromptingCapability)


# -- the row re-check of GraphPendingTriggers ----------------------------------


def _trigger(tid: str, tenant: str, namespace: str | None) -> Trigger:
    return Trigger(id=tid, tenant_id=tenant, namespace=namespace, condition="c", task="t", status="pending",
                   created_at=None, resolved_at=None)


class LeakyLayer:
    """Our layer's read contract, returning rows a buggy query might leak."""

    async def get_pending(
        self, scope: MemoryScope, *, limit: int | None = None, embedding: Sequence[float] | None = None,
    ) -> list[Trigger]:
        return [
            _trigger("mine", "acme", "u1"),
            _trigger("tenant-wide", "acme", None),
            _trigger("other-tenant", "acme-corp", "u1"),
            _trigger("prefix-tenant", "acm", None),
            _trigger("other-namespace", "acme", "u2"),
        ]


async def test_rows_that_do_not_belong_are_dropped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    source = GraphPendingTriggers(cast(GraphMemoryStore, object()))
    source._layer = LeakyLayer()
    with caplog.at_level(logging.ERROR, "symfonic_graph.isolation"):
        got = await source.pending(SCOPE)
    assert [t.trigger_id for t in got] == ["mine", "tenant-wide"]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 3
    assert {"other-tenant", "prefix-tenant", "other-namespace"} == {r.args[1] for r in errors}  # type: ignore[index]
    assert all(r.args[0] == "trigger" for r in errors)  # type: ignore[index]


async def test_tenant_wide_scope_keeps_only_tenant_wide_rows() -> None:
    source = GraphPendingTriggers(cast(GraphMemoryStore, object()))
    source._layer = LeakyLayer()
    assert [t.trigger_id for t in await source.pending(MemoryScope("acme"))] == ["tenant-wide"]


# -- sinks ---------------------------------------------------------------------


@dataclass
class RecordingSink:
    calls: list[tuple[MemoryScope, tuple[str, ...]]] = field(default_factory=list)

    def selected(self, scope: MemoryScope, triggers: Sequence[PendingTrigger]) -> None:
        self.calls.append((scope, tuple(t.trigger_id for t in triggers)))


@dataclass
class AsyncRecordingSink:
    calls: list[tuple[str, ...]] = field(default_factory=list)

    async def selected(self, scope: MemoryScope, triggers: Sequence[PendingTrigger]) -> None:
        self.calls.append(tuple(t.trigger_id for t in triggers))


async def test_sync_sink_sees_the_selection() -> None:
    sink = RecordingSink()
    assert isinstance(sink, TriggerSelectionSink)
    cap = capability(INVOICE, BIRTHDAY, sink=sink)
    await cap.contribute(req("invoice birthday"))
    await cap.contribute(req("birthday"))
    await cap.contribute(req("nothing"))  # no selection: the sink is not called
    assert sink.calls == [(SCOPE, ("t1", "t2")), (SCOPE, ("t2",))]


async def test_async_sink_is_awaited() -> None:
    sink = AsyncRecordingSink()
    await capability(INVOICE, sink=sink).contribute(req("invoice"))
    assert sink.calls == [("t1",)]


async def test_sink_runs_after_the_contribution_is_built() -> None:
    order: list[str] = []

    def ev(cond: str, cue: str) -> bool:
        order.append("evaluate")
        return True

    class Sink:
        def selected(self, scope: MemoryScope, triggers: Sequence[PendingTrigger]) -> None:
            order.append("sink")

    await capability(INVOICE, evaluator=ev, sink=Sink()).contribute(req("x"))
    assert order == ["evaluate", "sink"]


class BrokenSink:
    def selected(self, scope: MemoryScope, triggers: Sequence[PendingTrigger]) -> None:
        raise RuntimeError("audit db down")


class BrokenAsyncSink:
    async def selected(self, scope: MemoryScope, triggers: Sequence[PendingTrigger]) -> None:
        raise RuntimeError("audit db down")


@pytest.mark.parametrize("sink", [BrokenSink(), BrokenAsyncSink()])
async def test_failing_sink_never_breaks_the_turn(sink: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "symfonic_graph.memory.triggers"):
        [c] = await capability(INVOICE, sink=sink).contribute(req("invoice"))
    assert "Say the invoice is overdue." in c.content
    assert "sink" in caplog.text and "audit db down" in caplog.text


def test_audit_sink_needs_a_store() -> None:
    with pytest.raises(ValueError, match="graph backend"):
        Neo4jSelectionAuditSink(cast(GraphMemoryStore, None))


# -- composition -----------------------------------------------------------------


@dataclass
class Fixed:
    items: list[PluginContribution]

    async def contribute(self, request: object) -> list[PluginContribution]:
        return list(self.items)


class Exploding:
    async def contribute(self, request: object) -> list[PluginContribution]:
        raise RuntimeError("boom")


def block(content: str, position: str = "dynamic", order: int = 10, header: str = "") -> PluginContribution:
    return PluginContribution(content, position, order, header, f"test.{content}")


async def test_compose_orders_cached_before_dynamic_then_by_order() -> None:
    caps = [
        Fixed([block("d20", order=20), block("c9", "cached", 9)]),
        Fixed([block("d5", order=5), block("c1", "cached", 1), block("d20b", order=20)]),
        GrantEffects("memory-read"),  # skipped: not a prompting capability
    ]
    composed = await compose_prompt(caps, req(""))
    assert [c.content for c in composed.contributions] == ["c1", "c9", "d5", "d20", "d20b"]
    assert composed.text == "c1\n\nc9\n\nd5\n\nd20\n\nd20b"
    assert composed.text_at("cached") == "c1\n\nc9"
    assert composed.dropped == () and composed.failed == ()


async def test_compose_renders_headers() -> None:
    composed = await compose_prompt([Fixed([block("body", header="## H")])], req(""))
    assert composed.text == "## H\nbody"


async def test_compose_drops_over_budget_and_reports_it() -> None:
    big, small = block("x" * 50, order=1), block("y" * 5, order=2)
    composed = await compose_prompt([Fixed([block("c" * 10, "cached", 1), big, small])], req(""), budget_chars=20)
    assert [c.content for c in composed.contributions] == ["c" * 10, "y" * 5]  # 10 + 2 + 5 = 17
    assert composed.dropped == (big,)
    assert len(composed.text) <= 20


async def test_selected_trigger_may_still_be_dropped_by_composition() -> None:
    sink = RecordingSink()
    caps = [Fixed([block("rules " * 20, "cached", 5)]), *prospective_trigger_capabilities(
        ListSource([INVOICE]), contains, SCOPE, sink=sink)]
    composed = await compose_prompt(caps, req("invoice"), budget_chars=150)
    assert sink.calls == [(SCOPE, ("t1",))]  # selected ...
    assert [c.origin for c in composed.dropped] == ["symfonic.prospective"]  # ... but not delivered


async def test_compose_survives_a_failing_capability(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, "symfonic_graph.memory.composition"):
        composed = await compose_prompt([Exploding(), Fixed([block("ok")])], req(""))
    assert isinstance(composed, ComposedPrompt)
    assert [c.content for c in composed.contributions] == ["ok"]
    assert composed.failed == ("Exploding",)
    assert "boom" in caplog.text


@pytest.mark.parametrize("budget", [-1, 1.5, True, "10"])
async def test_compose_validates_budget(budget: Any) -> None:
    with pytest.raises(ValueError, match="budget_chars"):
        await compose_prompt([], req(""), budget_chars=budget)
