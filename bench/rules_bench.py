"""Cost of mining and replay: 100,000 synthetic traces of 20 tool calls each.

Each trace is a conversation of one shop agent: a user message, then 20 AI
messages of one tool call each, each answered by its result. The tools come
in a mostly fixed order, with a precondition skipped now and then, so the
miner finds rules and replay blocks some calls. Traces are generated one at
a time (nothing holds them all), so the figures are the library's own.

Prints, for mining and replay: CPU time (one core; wall time beside it), and the peak of the
memory Python allocated while running (tracemalloc) at N/10 and at N traces:
memory that does not grow with the number of traces shows as two equal peaks.
Also times reading the same traces back from a JSONL file.

Run:
    python -m bench.rules_bench              # 100,000 traces
    python -m bench.rules_bench --traces 20000
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from symfonic_graph import Trace, load_traces, mine_rules, replay

TOOLS = ["lookup_customer", "verify_identity", "get_cart", "check_stock", "quote_price", "apply_coupon",
         "reserve_stock", "take_payment", "confirm_order", "send_receipt"]
CALLS = 20


def _messages(rng: random.Random, trace: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "I want to order"}]
    names: list[str] = []
    while len(names) < CALLS:
        for tool in TOOLS:
            if rng.random() < 0.03:
                continue  # a precondition skipped now and then
            names.append(tool)
    for n, name in enumerate(names[:CALLS]):
        call_id = f"t{trace}c{n}"
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"id": call_id, "name": name, "args": {"order": trace}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": "ok"})
    return messages


def synthetic(count: int, seed: int = 1) -> Iterator[Trace]:
    """``count`` traces, generated one at a time."""
    rng = random.Random(seed)
    for i in range(count):
        yield Trace(f"t{i}", _messages(rng, i), "success" if rng.random() < 0.9 else "failure")


def skills() -> list[Any]:
    """Nine rules in the shape the gate reads: each tool needs the one before it; two are shadow rules."""
    out = []
    for i, (before, action) in enumerate(itertools.pairwise(TOOLS)):
        meta = {"label": f"{before} before {action}", "action_tool": action, "precondition": [before]}
        if i % 4 == 3:
            meta["enforcement"] = "shadow"
        out.append(SimpleNamespace(id=f"rule-{i}", metadata=meta))
    return out


def _timed(work: Callable[[], Any]) -> tuple[str, Any]:
    """``("<cpu> s CPU (<wall> s wall)", result)``: CPU time is the one-core figure on a shared machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return f"{time.process_time() - cpu:.1f} s CPU ({time.perf_counter() - wall:.1f} s wall)", result


def _peak(work: Callable[[], Any]) -> float:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1] / 2**10
    finally:
        tracemalloc.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--skip-file", action="store_true", help="skip the JSONL round trip")
    args = parser.parse_args(argv)
    n = args.traces
    rules = skills()
    print(f"{n} synthetic traces of {CALLS} tool calls ({2 * CALLS + 1} messages) each, {len(rules)} rules")

    gen_s, _ = _timed(lambda: sum(1 for _ in synthetic(n)))
    mine_s, proposals = _timed(lambda: mine_rules(synthetic(n)))
    replay_s, report = _timed(lambda: replay(synthetic(n), rules))
    print(f"generating the traces alone: {gen_s} (included in the figures below)")
    print(f"mine_rules: {mine_s}, {len(proposals)} proposals")
    print(f"replay:     {replay_s}, {sum(r.blocked for r in report.rules)} calls blocked "
          f"of {sum(r.checked for r in report.rules)} checked")

    small = max(n // 10, 1)
    print("peak traced memory (KiB)      at N/10    at N")
    print(f"  mine_rules                   {_peak(lambda: mine_rules(synthetic(small))):6.1f} "
          f"{_peak(lambda: mine_rules(synthetic(n))):7.1f}")
    print(f"  replay                       {_peak(lambda: replay(synthetic(small), rules)):6.1f} "
          f"{_peak(lambda: replay(synthetic(n), rules)):7.1f}")

    if not args.skip_file:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "traces.jsonl"
            with path.open("w", encoding="utf-8") as out:
                for trace in synthetic(n):
                    out.write(json.dumps({"id": trace.id, "messages": trace.messages, "outcome": trace.outcome}))
                    out.write("\n")
            size = path.stat().st_size / 2**20
            load_s, _ = _timed(lambda: sum(1 for _ in load_traces(path)))
            file_mine_s, _ = _timed(lambda: mine_rules(load_traces(path)))
            print(f"JSONL file of {size:.0f} MiB: load_traces alone {load_s}; "
                  f"load_traces + mine_rules {file_mine_s}")


if __name__ == "__main__":
    main()
