"""A TriggerBench-style replay: is a reminder offered on the right turn, whatever the history's length?

Run against a real Neo4j (``eval "$(symfonic-graph server start)"`` first)::

    python -m bench.triggerbench            # 12 cases per cell
    python -m bench.triggerbench --cases 4  # a smoke run

The labelled turns are built here. Each case is one end user's scope
holding one target trigger, and one probe turn sent through
``MemoryMiddleware`` (a real ``create_agent`` agent, the chat model
scripted, ``TurnMemory(wall_clock=...)``) after a history of filler turns of
1K, 10K or 100K tokens (4 characters a token). For each kind:

* ``time``: due at an instant; *positive*, the probe's clock is that
  instant; *negative*, a minute before;
* ``event``: on ``issue_refund`` with ``order_id``; *positive*, the history
  ends with the matching call's successful result; *negative*, the refund of
  another order, or the matching one failed;
* ``text``: a condition word matched by a deterministic evaluator (the word
  in the last human message); *positive*, the probe names it; *negative*,
  it names another;
* ``semantic``: a condition about travelling abroad, embedded by a
  deterministic topic model (``bench/_embeddings.py``) and matched by the
  store at the default similarity; *positive*, the probe asks about booking
  a flight (no word in common with the condition's topic words but the
  topic); *negative*, about something else.

The *overloaded* variants add 200 unrelated triggers of every kind (due
next week, on other tools, on other words, on other topics) to a positive
or negative case.
A turn's offer is right when it holds the target exactly on positive turns
and nothing else. Prints, per kind and history length, precision and recall
of "offered on the right turn" and the false-offer rate (turns offering
something their labels do not call for, over all turns).
"""

from __future__ import annotations

import argparse
import os
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pydantic import Field

from bench._embeddings import TopicEmbeddings
from symfonic_graph import GraphMemoryStore, MemoryScope, ProspectiveLayer, TurnMemory
from symfonic_graph.langchain import MemoryMiddleware
from symfonic_graph.memory.layers.prospective import trigger_row

# the probe's instant: after every created_at (a trigger's offer key is never before it)
T0 = float(int(time.time()) + 7 * 86400)
LENGTHS = (1_000, 10_000, 100_000)
KINDS = ("time", "event", "text", "semantic")
TRAVEL = "The user talks about travelling abroad"
VARIANTS = ("positive", "negative", "overloaded+", "overloaded-")
UNRELATED = 200
CHARS_PER_TOKEN = 4


class Recording(FakeMessagesListChatModel):
    """A scripted model that keeps the last message of each call (the reminders, when offered)."""

    last: list[str] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[object], **kwargs: object) -> Recording:
        return self

    async def ainvoke(self, input: object, config: object = None, **kwargs: object) -> BaseMessage:
        shown = list(input)  # type: ignore[call-overload]
        self.last.append(str(shown[-1].content))
        return await super().ainvoke(input, config, **kwargs)  # type: ignore[arg-type]


def filler(tokens: int) -> list[BaseMessage]:
    """Alternating user and assistant turns of about ``tokens`` tokens, about nothing the triggers name."""
    turn = "We talked about the weather and the garden; nothing to do with any order or plan. " * 5
    out: list[BaseMessage] = []
    while sum(len(str(m.content)) for m in out) < tokens * CHARS_PER_TOKEN:
        out.append(HumanMessage(turn) if len(out) % 2 == 0 else AIMessage(turn))
    return out


def refund(order: str, call_id: str, *, failed: bool = False) -> list[BaseMessage]:
    return [AIMessage("", tool_calls=[{"name": "issue_refund", "args": {"order_id": order}, "id": call_id}]),
            ToolMessage("refused" if failed else "refund issued", tool_call_id=call_id,
                        status="error" if failed else "success")]


def word_in_cue(condition: str, cue: str) -> bool:
    """The deterministic evaluator: the condition word appears in the cue."""
    return condition.lower() in re.findall(r"\w+", cue.lower())


@dataclass
class Case:
    kind: str
    variant: str
    length: int
    n: int

    @property
    def positive(self) -> bool:
        return self.variant in ("positive", "overloaded+")


async def run_case(
    store: GraphMemoryStore, case: Case, history: list[BaseMessage], max_triggers: int
) -> tuple[bool, bool]:
    """(target offered, something else or the target wrongly offered) for one probe turn."""
    scope = MemoryScope(f"bench-triggerbench-{uuid.uuid4().hex}", "u1")
    embeddings = TopicEmbeddings()
    layer = ProspectiveLayer(store, clock=lambda: T0 - 3600, embeddings=embeddings)
    target = f"Target {case.kind} {case.n}."
    order, word = f"A-{case.n}", f"pelican{case.n}"
    if case.kind == "time":
        await layer.set_trigger(scope, task=target, due_at=T0)
    elif case.kind == "event":
        await layer.set_trigger(scope, task=target, on_tool="issue_refund", same_args={"order_id": order})
    elif case.kind == "semantic":
        await layer.set_trigger(scope, task=target, kind="semantic", condition=TRAVEL)
    else:
        await layer.set_trigger(scope, task=target, condition=word)
    if case.variant.startswith("overloaded"):
        others = embeddings.embed_documents([f"{topic} walrus{k}" for k, topic in
                                             enumerate(["invoice", "doctor", "puppy"] * (UNRELATED // 3 + 1))])
        rows = [trigger_row(scope, task=f"Unrelated {k}.", due_at=T0 + 7 * 86400 + k) if k % 4 == 0 else
                trigger_row(scope, task=f"Unrelated {k}.", on_tool=f"other_tool_{k}") if k % 4 == 1 else
                trigger_row(scope, task=f"Unrelated {k}.", condition=f"walrus{k}") if k % 4 == 2 else
                trigger_row(scope, task=f"Unrelated {k}.", condition=f"other topic {k}", embedding=others[k])
                for k in range(UNRELATED)]
        await layer.write_triggers(scope, rows)
    clock = T0 if case.positive or case.kind != "time" else T0 - 60
    messages = list(history)
    if case.kind == "event":
        messages += refund(order if case.positive else f"B-{case.n}", "r1")
        if not case.positive:
            messages += refund(order, "r2", failed=True)
    cue = (f"Anything about {word}?" if case.kind == "text" and case.positive
           else f"Can you help with booking a flight, heron{case.n}?" if case.kind == "semantic" and case.positive
           else f"Anything about heron{case.n}?")
    messages.append(HumanMessage(cue))
    model = Recording(responses=[AIMessage("Noted.")], last=[])
    memory = TurnMemory(store, wall_clock=lambda: clock, coalesce_window=None, max_triggers=max_triggers)
    agent = create_agent(model, [], middleware=[MemoryMiddleware(memory, evaluator=word_in_cue,
                                                                 embeddings=embeddings)])
    try:
        await agent.ainvoke({"messages": messages}, context=scope)
    finally:
        await store.driver.execute_query("MATCH (t:Trigger {tenant_id: $tenant}) DETACH DELETE t",
                                         tenant=scope.tenant_id, database_=store.database)
    shown = model.last[0]
    tasks = [line[2:] for line in shown.splitlines()[1:]] if shown.startswith("## PENDING REMINDERS") else []
    hit = target in tasks
    wrong = (hit and not case.positive) or any(t != target for t in tasks)
    return hit, wrong


async def main(args: argparse.Namespace) -> None:
    uri = os.environ.get("NEO4J_URI", "bolt://localhost:7687")
    user, pw = os.environ.get("NEO4J_USER", "neo4j"), os.environ.get("NEO4J_PASSWORD", "")
    tally: dict[tuple[str, int], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    start = time.perf_counter()
    async with GraphMemoryStore.connect(uri, user, pw, database=os.environ.get("NEO4J_DATABASE") or None,
                                        query_timeout=120) as store:
        await store.apply_schema()
        for length in LENGTHS:
            history = filler(length)
            for kind in KINDS:
                for variant in VARIANTS:
                    for n in range(args.cases):
                        case = Case(kind, variant, length, n)
                        hit, wrong = await run_case(store, case, history, args.max_triggers)
                        t = tally[(kind, length)]
                        t["turns"] += 1
                        t["positives"] += case.positive
                        t["tp"] += hit and case.positive
                        t["fp"] += hit and not case.positive
                        t["false_offer_turns"] += wrong
    print(f"{args.cases} cases per kind, variant and length; {len(VARIANTS)} variants (positive, negative, and "
          f"each with {UNRELATED} unrelated triggers); max_triggers {args.max_triggers}; "
          f"{time.perf_counter() - start:.1f} s")
    print(f"{'kind':<8} {'history':>8} {'turns':>6} {'positive':>8} {'precision':>9} {'recall':>7} "
          f"{'false-offer rate':>16}")
    for kind in KINDS:
        for length in LENGTHS:
            t = tally[(kind, length)]
            offered = t["tp"] + t["fp"]
            precision = t["tp"] / offered if offered else float("nan")
            print(f"{kind:<8} {length:>8,} {t['turns']:>6} {t['positives']:>8} {precision:>9.3f} "
                  f"{t['tp'] / t['positives']:>7.3f} {t['false_offer_turns'] / t['turns']:>16.3f}")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.triggerbench", description=__doc__.split("\n")[0])
    p.add_argument("--cases", type=int, default=12, help="cases per kind, variant and length (default 12)")
    p.add_argument("--max-triggers", type=int, default=100, help="TurnMemory's max_triggers (default 100)")
    return p.parse_args(argv)


if __name__ == "__main__":
    anyio.run(main, parse())
