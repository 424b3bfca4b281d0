"""CPU of the gate and the pre-flight block per turn on a cached snapshot (a script, not a test).

20 skills are compiled once through the library's read path (precondition
nodes as the store holds them, ``read_skills``, ``RuleSet(pack=True)`` as
``TurnMemory`` compiles them) and the conversation is read once into events
(as both wirings keep it across the calls of a turn). Per turn, as the
wirings call them:

* pre-flight: ``linter.check`` and ``preflight_block(linter.for_preflight(rules), state, ...)`` (cached
  per catalog and state; the last column builds it afresh, as the first turn does);
* gate: ``run_gate`` deciding one tool call (``turn=(history, [call])``, a lookup
  returning the cached RuleSet), driven without an event loop (nothing in it
  suspends), so only its own CPU is timed.

Three catalogs: only ``after`` rules (tool entries); the new kinds mixed in
(``fact`` with ``where``, ``check``, ``any`` with a fact alternative,
``limit`` per conversation, ``state``); every skill on the new kinds. Each
over a conversation of 10 and of 60 events. The decided call is allowed
(every requirement of every matching rule is evaluated).

Each figure: µs per call, the median over batches of ``--batch`` calls,
the best of ``--runs`` runs (CPU time of this process, so a loaded machine slows it little).

``--fresh`` reads the conversation into events on every gate call instead (the gate column then includes
the read, and nothing the rules keep on earlier results is reused).

    python -m bench.gate_cpu_bench [--runs 5] [--batches 40] [--batch 200] [--fresh] [--profile MIX/EVENTS]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from symfonic_graph.rules._messages import read_conversation
from symfonic_graph.rules.gate import run_gate
from symfonic_graph.rules.lint import ToolLinter
from symfonic_graph.rules.preflight import build_preflight_contribution, preflight_block
from symfonic_graph.rules.ruleset import RuleSet
from symfonic_graph.shape.models import read_skills
from symfonic_graph.shape.records import precondition_from_input, precondition_node

NOW = datetime(2024, 5, 15, 15, tzinfo=UTC)
TOOLS = ["lookup_customer", "verify_identity", "get_order", "check_stock", "quote_price", "apply_coupon",
         "reserve_stock", "take_payment", "confirm_order", "send_receipt", "refund", "cancel_order"]
ACTION = "refund"  # the decided call; four of the 20 skills guard it
STATE_ENTRY = {"state": {"path": "channel", "op": "eq", "value": "web"}}


def _after_entries(i: int, action: str) -> list[Any]:
    """One to three ordering entries naming tools called before ``action`` (``ACTION``'s among the first three)."""
    before = TOOLS[:3] if action == ACTION else TOOLS[: max(1, TOOLS.index(action))]
    picks: list[Any] = [before[-1]]
    if i % 2 and before[0] != picks[0]:
        picks.append({"tool": before[0], "same_args": ["customer_id"]})
    if i % 3 == 0 and len(before) > 2:
        picks.append({"tool": before[len(before) // 2], "within": "user_turn"})
    return picks


def _new_entries(i: int) -> list[Any]:
    """The new kinds, rotated: a fact with ``where``, a check, an any-of with a fact alternative, a limit."""
    kinds: list[list[Any]] = [
        [{"fact": {"tool": "get_order", "same_args": ["order_id"], "where": 'result.status == "delivered"',
                   "message": "Only delivered orders."}}],
        [{"check": {"where": "args.amount <= 500", "message": "At most 500 per call."}}],
        [{"any": ["sso_login", {"fact": {"tool": "lookup_customer", "where": "result.verified == true",
                                                "message": "A verified customer."}}]}],
        [{"limit": {"max_calls": 3, "message": "Three times a conversation at most."}}],
    ]
    return kinds[i % 4]


def catalog(mix: str) -> list[dict[str, Any]]:
    """20 skills as rows of the store's read (skill props and precondition nodes); four guard ``ACTION``."""
    rows: list[dict[str, Any]] = []
    actions = [t for t in TOOLS if t not in ("lookup_customer", ACTION)]
    for i in range(20):
        action = ACTION if i % 5 == 4 else actions[i % len(actions)]
        entries: list[Any] = _after_entries(i, action)
        if mix == "mixed" and i % 2:
            entries = [entries[0], *_new_entries(i // 2)]
            if i % 5 == 4:
                entries.append(STATE_ENTRY)
        elif mix == "new kinds":
            entries = [*_new_entries(i), *_new_entries(i + 1)]
            if i % 3 == 0:
                entries.append(STATE_ENTRY)
        nodes = [precondition_node(precondition_from_input(e, f"p[{n}]"), n) for n, e in enumerate(entries)]
        rows.append({"skill": {"id": f"s{i}", "tenant_id": "acme", "status": "approved", "label": f"Skill {i}",
                               "identifier": f"skill-{i}", "steps": [action], "action_tool": action},
                     "preconditions": nodes})
    return rows


def conversation(events: int) -> list[Any]:
    """A user message, then calls of the pipeline's tools and their JSON results, then the refund call."""
    messages: list[Any] = [HumanMessage("I want a refund for order 7.")]
    i = 0
    while len(messages) < events - 1:
        name = TOOLS[i % 10]
        args: dict[str, Any] = {"customer_id": "c1", "order_id": "7"}
        result: dict[str, Any] = {"ok": True, "status": "delivered", "verified": True,
                                  "items": [{"sku": f"A{k}", "qty": 1, "price": 20} for k in range(3)]}
        messages.append(AIMessage("", tool_calls=[{"id": f"c{i}", "name": name, "args": args}]))
        messages.append(ToolMessage(json.dumps(result), tool_call_id=f"c{i}", name=name))
        i += 1
    messages.append(AIMessage("", tool_calls=[{"id": "final", "name": ACTION,
                                               "args": {"customer_id": "c1", "order_id": "7", "amount": 120}}]))
    return messages


def _sync(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never suspends, without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("the coroutine suspended")


class Turn:
    """One mix and conversation, compiled and read once, with the two per-turn steps."""

    def __init__(self, mix: str, events: int) -> None:
        skills, _ = read_skills(catalog(mix))
        self.rules = RuleSet(skills, pack=True)
        self.messages = conversation(events)
        self.state = {"messages": self.messages, "channel": "web"}
        self.linter = ToolLinter([*TOOLS, "sso_login"])
        self.history, self.calls = read_conversation(self.messages).turn()

        async def lookup(_: object) -> RuleSet:
            return self.rules

        self.lookup = lookup

    def preflight(self) -> Any:
        self.linter.check(self.rules)
        return preflight_block(self.linter.for_preflight(self.rules), self.state, include_negative=False)

    def preflight_built(self) -> Any:
        """The block built afresh (a new catalog version or a state not seen before: once, then cached)."""
        return build_preflight_contribution(self.linter.for_preflight(self.rules), self.state)

    def gate(self) -> Any:
        return _sync(run_gate(self.state, self.lookup, turn=(self.history, self.calls), now=NOW))

    def gate_fresh(self) -> Any:
        """The gate over a conversation read afresh (``--fresh``: nothing kept on earlier results is reused)."""
        return _sync(run_gate(self.state, self.lookup, turn=read_conversation(self.messages).turn(), now=NOW))


def measure(work: Callable[[], object], runs: int, batches: int, batch: int) -> float:
    """µs per call: the median over batches, the best of runs."""
    for _ in range(batch):
        work()
    best = float("inf")
    for _ in range(runs):
        per: list[float] = []
        for _ in range(batches):
            start = time.process_time()
            for _ in range(batch):
                work()
            per.append((time.process_time() - start) / batch * 1e6)
        best = min(best, statistics.median(per))
    return best


MIXES = ("after only", "mixed", "new kinds")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--profile", help="profile one case instead, e.g. 'mixed/60'")
    parser.add_argument("--fresh", action="store_true",
                        help="read the conversation into events on every gate call (a turn that keeps no events)")
    options = parser.parse_args()
    if options.profile:
        mix, events = options.profile.split("/")
        turn = Turn(mix, int(events))
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(5000):
            turn.gate()
            turn.preflight()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    print(f"load average {os.getloadavg()[0]:.2f}; µs per call, median of {options.batches} batches of "
          f"{options.batch}, best of {options.runs} runs")
    print(f"| catalog (20 skills) | events | rules on `{ACTION}` | verdict | pre-flight µs | gate µs | both µs "
          "| pre-flight built afresh µs |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for mix in MIXES:
        for events in (10, 60):
            turn = Turn(mix, events)
            [decision] = turn.gate()
            block = turn.preflight()
            assert block is not None
            pre = measure(turn.preflight, options.runs, options.batches, options.batch)
            gate = measure(turn.gate_fresh if options.fresh else turn.gate, options.runs, options.batches,
                           options.batch)
            built = measure(turn.preflight_built, options.runs, max(options.batches // 4, 3), options.batch)
            assert turn.preflight_built() == block
            print(f"| {mix} | {len(turn.messages)} | {len(decision.matched)} | {decision.verdict} | {pre:.1f} | "
                  f"{gate:.1f} | {pre + gate:.1f} | {built:.0f} |")


if __name__ == "__main__":
    main()
