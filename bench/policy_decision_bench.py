"""CPU of one gate decision under the airline policy on a 60-event conversation (a script, not a test).

The policy is ``bench/policies/tau_airline.yaml`` compiled once (as a cached
snapshot holds it); the conversation is read once into events (as the
integrations keep it across the calls of a turn); each decision is timed alone:
``decide_call`` for the last call, a ``cancel_reservation``, after 59 events of
reads and results shaped like tau-bench's airline data.

    python -m bench.policy_decision_bench [--rounds 20000]
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from symfonic_graph.rules._messages import read_conversation
from symfonic_graph.rules.gate import decide_call
from symfonic_graph.rules.ruleset import RuleSet

POLICY = Path(__file__).parent / "policies" / "tau_airline.yaml"
NOW = datetime(2024, 5, 15, 15, tzinfo=UTC)


def policy_skills() -> list[dict[str, Any]]:
    """The airline skills as plain skills (metadata), in file order."""
    data = yaml.safe_load(POLICY.read_text(encoding="utf-8"))
    return [{"metadata": {k: v for k, v in skill.items() if k in ("label", "identifier", "steps", "action_tool",
                                                                   "precondition")}} for skill in data["skills"]]


def conversation(events: int = 60) -> list[dict[str, Any]]:
    """A user turn, then reads and their results until ``events`` events, then the cancel call."""
    user = {"user_id": "mia_li_3668", "membership": "gold", "reservations": [f"R{i:05d}" for i in range(8)],
            "payment_methods": {"credit_card_4421486": {"source": "credit_card"},
                                "certificate_7504069": {"source": "certificate", "amount": 250}},
            "name": {"first_name": "Mia", "last_name": "Li"}, "address": {"city": "Austin", "zip": "78701"}}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "I want to cancel my trip R00003."}]
    i = 0
    while len(messages) < events - 1:
        rid = f"R{i % 8:05d}"
        name, args, result = ("get_user_details", {"user_id": "mia_li_3668"}, user) if i % 4 == 0 else (
            "get_reservation_details", {"reservation_id": rid},
            {"reservation_id": rid, "user_id": "mia_li_3668", "cabin": "economy" if i % 3 else "business",
             "insurance": "no", "created_at": "2024-05-14T18:00:00", "status": None,
             "flights": [{"flight_number": "HAT001", "date": "2024-05-20", "origin": "SFO", "destination": "JFK",
                          "price": 180}] * 2,
             "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}]})
        messages.append({"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}", "name": name,
                                                                              "args": args}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": json.dumps(result)})
        i += 1
    messages.append({"role": "assistant", "content": "", "tool_calls": [
        {"id": "final", "name": "cancel_reservation",
         "args": {"reservation_id": "R00003", "reason": "change_of_plan"}}]})
    return messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20_000)
    options = parser.parse_args()
    rules = RuleSet(policy_skills())
    messages = conversation()
    history, calls = read_conversation(messages).turn()
    [call] = calls
    decision = decide_call(rules, call, history, {}, filtered=True, count_failed=False, now=NOW)
    print(f"events: {len(messages)}, rules: {len(rules)}, verdict: {decision.verdict}"
          + (f" ({decision.content()[:100]}...)" if decision.content() else ""))
    for _ in range(200):
        decide_call(rules, call, history, {}, filtered=True, count_failed=False, now=NOW)
    start = time.process_time()
    for _ in range(options.rounds):
        decide_call(rules, call, history, {}, filtered=True, count_failed=False, now=NOW)
    per = (time.process_time() - start) / options.rounds * 1e6
    start = time.process_time()
    reads = max(1, options.rounds // 20)
    for _ in range(reads):
        read_conversation(messages).turn()
    read = (time.process_time() - start) / reads * 1e6
    print(f"decision CPU: {per:.1f} us per call (history already read); reading the 60 messages afresh: "
          f"{read:.0f} us (the integrations read each message once per conversation)")


if __name__ == "__main__":
    main()
