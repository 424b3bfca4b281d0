"""No torn rules: turns racing live re-seeds never see half a skill.

A writer re-seeds a tenant's skills over and over, switching every skill
between two precondition lists in one transaction; readers take turn
snapshots meanwhile. Every skill a turn receives must carry exactly one of
the two lists: never a mix, never fewer, never none.
"""

from __future__ import annotations

import time

import anyio
import pytest

from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer, TurnMemory
from symfonic_graph.layers import SkillSpec
from tests.reliability._stats import SCALE

pytestmark = [pytest.mark.anyio, pytest.mark.reliability]

SKILLS = 100
READERS = 3
MIN_READS = 1_500 * SCALE  # each read races the writer: ~40 re-seeds per run at the default scale
DEADLINE_S = 300.0
BEFORE = ("a0", "a1", "a2")
AFTER = ("b0", "b1")


def _specs(preconditions: tuple[str, ...]) -> list[SkillSpec]:
    return [SkillSpec(label=f"Skill {i}", steps=[f"act_{i}"], source_tag="authored:race", action_tool=f"act_{i}",
                      precondition=list(preconditions), identifier=f"skill-{i}") for i in range(SKILLS)]


@pytest.mark.slow
async def test_turns_racing_reseeds_never_receive_a_torn_skill(store: GraphMemoryStore, scope: MemoryScope) -> None:
    layer = ProceduralLayer(store)
    await layer.seed_skills(scope, _specs(BEFORE))
    reads = 0
    torn: list[tuple[str, object]] = []
    reseeds = 0
    done = anyio.Event()
    started = time.monotonic()

    async def writer() -> None:
        nonlocal reseeds
        while not done.is_set():
            await layer.seed_skills(scope, _specs(AFTER if reseeds % 2 == 0 else BEFORE))
            reseeds += 1

    async def reader() -> None:
        nonlocal reads
        memory = TurnMemory(store, max_age=0.0)  # every turn reads the skills afresh
        while reads < MIN_READS and time.monotonic() - started < DEADLINE_S:
            snapshot = await memory.begin(scope)
            reads += 1
            assert len(snapshot.skills) == SKILLS
            for skill in snapshot.skills:
                got = tuple(skill.precondition or ())
                if got not in (BEFORE, AFTER):
                    torn.append((skill.id, got))

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        async with anyio.create_task_group() as readers:
            for _ in range(READERS):
                readers.start_soon(reader)
        done.set()
    print(f"torn rules: {reads} turn reads racing {reseeds} re-seeds of {SKILLS} skills: {len(torn)} torn")
    assert reads >= MIN_READS, f"only {reads} reads in {DEADLINE_S}s"
    assert reseeds > 10
    assert torn == []
