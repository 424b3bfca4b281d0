"""The one-minute tour of symfonic-graph, runnable as it stands.

    eval "$(.venv/bin/symfonic-graph server start)"     # or export NEO4J_URI / NEO4J_USER / NEO4J_PASSWORD
    .venv/bin/python examples/quickstart.py

It writes to the tenant named by QUICKSTART_TENANT (default "quickstart") and
can be run again: the skill is keyed by its identifier, and the reminder is
resolved at the end.
"""

from __future__ import annotations

import asyncio
import os
from types import SimpleNamespace

import neo4j
from langchain_core.messages import AIMessage

from symfonic_graph import (
    GraphMemoryStore,
    MemoryScope,
    ProceduralLayer,
    ProspectiveLayer,
    ProspectiveTriggerCapability,
    TurnMemory,
    create_precondition_gate_node,
)


async def main() -> None:
    uri, user, password = os.environ["NEO4J_URI"], os.environ.get("NEO4J_USER", "neo4j"), os.environ["NEO4J_PASSWORD"]
    driver = neo4j.AsyncGraphDatabase.driver(uri, auth=(user, password))  # yours to own and close
    try:
        store = GraphMemoryStore(driver)
        await store.apply_schema()  # versioned, idempotent constraints and indexes
        tenant = os.environ.get("QUICKSTART_TENANT", "quickstart")
        user_7 = MemoryScope(tenant, namespace="user-7")  # a tenant, and optionally one end user in it

        # Procedural memory: a skill whose action needs an earlier call, only on Slack.
        await ProceduralLayer(store).seed_authored_skill(
            MemoryScope(tenant), label="Deliver the weekly report", steps=["deliver"],
            source_tag="authored:reports", action_tool="deliver", identifier="deliver-weekly",
            precondition=["get_integration_status", {"state": {"path": "channel", "op": "eq", "value": "slack"}}],
        )

        # Prospective memory: a reminder, matched by your own evaluator on each turn.
        reminders = ProspectiveLayer(store)
        reminder = await reminders.set_trigger(user_7, condition="invoice", task="Say invoice 4711 is overdue.")

        # Every turn: one read (catalog version, skills only if changed, pending triggers).
        memory = TurnMemory(store)  # one per process
        await memory.warm_up()  # as the process starts: Neo4j plans the turn's queries before a turn waits for it
        snapshot = await memory.begin(user_7)

        # Pre-flight: the rules for the cached system prompt (byte-identical while the catalog is unchanged).
        block = snapshot.preflight(state={"channel": "slack"})
        print(block.content if block is not None else "(no rules apply)")

        # Triggers: the reminders this turn satisfies, as a prompt contribution.
        capability = ProspectiveTriggerCapability(
            snapshot, evaluator=lambda condition, cue: condition in cue, scope=user_7)
        request = SimpleNamespace(prompt="Has the invoice been paid?")  # any object with .prompt
        for contribution in await capability.contribute(request):
            print(contribution.content)

        # Gate: the model asks for `deliver` before `get_integration_status`; the gate answers with an error.
        gate = create_precondition_gate_node(memory.get_active_skills)
        asked = AIMessage("", tool_calls=[{"name": "deliver", "args": {}, "id": "call-1"}])
        update = await gate({"memory_scope": user_7, "channel": "slack", "messages": [asked]})
        for message in update.get("messages", []):
            print(f"blocked {message.name}: {message.content}")

        await reminders.resolve_trigger(user_7, reminder)  # leave the tenant as we found it
    finally:
        await driver.close()


if __name__ == "__main__":
    asyncio.run(main())
