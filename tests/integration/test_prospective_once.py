"""``once=True`` through a real Neo4j: a trigger acknowledged when it is first offered, exactly once under races.

"Next time I ask about the weather, remind me to take an umbrella": offered on
the first turn that selects it and never again; a turn that does not select it
leaves it pending; turns racing for it offer it once between them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool

from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory
from symfonic_graph.errors import ValidationError
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.triggers import GraphPendingTriggers, ProspectiveTriggerCapability
from tests._cli import run_cli_on
from tests._fakes import Scripted
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio

UMBRELLA = "Remind the user to take an umbrella."


def mentions(condition: str, cue: str) -> bool:
    return condition in cue


async def test_a_once_trigger_is_offered_on_the_first_selecting_turn_only(
    store: GraphMemoryStore, tenant: str
) -> None:
    scope = MemoryScope(tenant, "u1")
    layer = ProspectiveLayer(store)
    tid = await layer.set_trigger(scope, condition="weather", task=UMBRELLA, once=True)
    kept = await layer.set_trigger(scope, condition="weather", task="Mention the forecast page.")
    capability = ProspectiveTriggerCapability(GraphPendingTriggers(store), mentions, scope)

    assert await capability.contribute({"prompt": "hello"}) == []  # not selected: not acknowledged
    assert {t.id for t in await layer.get_pending(scope)} == {tid, kept}
    [first] = await capability.contribute({"prompt": "what is the weather?"})
    assert first.content == f"## PENDING REMINDERS\n- {UMBRELLA}\n- Mention the forecast page."
    [second] = await capability.contribute({"prompt": "and the weather tomorrow?"})
    assert second.content == "## PENDING REMINDERS\n- Mention the forecast page."  # the default stays pending
    [done] = await layer.get_done(scope)
    assert (done.id, done.resolution, done.once) == (tid, "acknowledged", True)


async def test_racing_turns_offer_a_once_trigger_exactly_once(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "u1")
    layer = ProspectiveLayer(store)
    for round_ in range(10):
        await layer.set_trigger(scope, task=f"Round {round_}.", due_at=1_000_000, once=True)
        offered: list[int] = []

        async def turn(offered: list[int]) -> None:
            capability = ProspectiveTriggerCapability(GraphPendingTriggers(store), mentions, scope)
            offered.append(len(await capability.contribute({"prompt": ""})))

        async with anyio.create_task_group() as group:
            for _ in range(16):
                group.start_soon(turn, offered)
        assert sum(offered) == 1, (round_, offered)
    assert await layer.get_pending(scope) == []


async def test_without_a_claim_a_once_trigger_is_not_offered(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant)
    await ProspectiveLayer(store).set_trigger(scope, task=UMBRELLA, due_at=1_000_000, once=True)
    source = GraphPendingTriggers(store)

    class Plain:  # a source of the caller's own, without claim_once
        async def pending(self, scope: MemoryScope) -> Any:
            return await source.pending(scope)

    assert await ProspectiveTriggerCapability(Plain(), mentions, scope).contribute({"prompt": ""}) == []
    assert len(await ProspectiveLayer(store).get_pending(scope)) == 1


async def test_bad_once_is_refused_naming_the_field(store: GraphMemoryStore, tenant: str) -> None:
    with pytest.raises(ValidationError, match=r"^once: must be true or false"):
        await ProspectiveLayer(store).set_trigger(MemoryScope(tenant), task="x", condition="c", once="yes")  # type: ignore[arg-type]


def _forecast(city: str) -> str:
    return f"rain in {city}"


async def test_the_middleware_offers_a_once_reminder_on_one_model_call(store: GraphMemoryStore, tenant: str) -> None:
    scope = MemoryScope(tenant, "user-7")
    layer = ProspectiveLayer(store)
    tid = await layer.set_trigger(scope, task=UMBRELLA, due_at=1_000_000, once=True)
    tool = StructuredTool.from_function(_forecast, name="forecast", description="The forecast.")
    model = Scripted(responses=[
        AIMessage("", tool_calls=[{"name": "forecast", "args": {"city": "Paris"}, "id": "c1"}]),
        AIMessage("Rain: take an umbrella."),
        AIMessage("Hello again."),
    ])
    agent = create_agent(model, [tool], middleware=[MemoryMiddleware(TurnMemory(store))])
    await agent.ainvoke({"messages": [HumanMessage("weather in Paris?")]}, context=scope)
    await agent.ainvoke({"messages": [HumanMessage("hi")]}, context=scope)

    shown = [str(call[-1].content) for call in model.seen]
    assert shown[0] == f"## PENDING REMINDERS\n- {UMBRELLA}"
    assert not any("PENDING REMINDERS" in s for s in shown[1:])
    assert [t.id for t in await layer.get_done(scope)] == [tid]


async def test_a_seed_file_and_the_cli_write_once(
    store: GraphMemoryStore, tenant: str, tmp_path: Path, neo4j_settings: Neo4jSettings, _schema: None
) -> None:
    from symfonic_graph.ops.seedfile import load_seed_file
    from symfonic_graph.ops.seeding import apply_seed, plan_seed

    path = tmp_path / "once.yaml"
    path.write_text(f"triggers:\n  - condition: weather\n    task: {UMBRELLA}\n    once: true\n")
    await apply_seed(store, plan_seed(load_seed_file(path), MemoryScope(tenant)))
    [seeded] = await ProspectiveLayer(store).get_pending(MemoryScope(tenant))
    assert seeded.once is True

    result = await anyio.to_thread.run_sync(lambda: run_cli_on(
        neo4j_settings, "triggers", "add", "--task", "Once.", "--due-in", "1h", "--once",
        "--tenant", tenant, "--namespace", "u1", "--json"))
    assert result.returncode == 0, result.stderr
    tid = json.loads(result.stdout)["id"]
    [cli_added] = [t for t in await ProspectiveLayer(store).get_pending(MemoryScope(tenant, "u1")) if t.id == tid]
    assert cli_added.once is True
