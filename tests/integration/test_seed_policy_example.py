"""The policy example of docs/seed-files.md seeds through the CLI and decides as the text under it says."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

ROOT = Path(__file__).resolve().parents[2]
NOW = "2024-05-15T15:00:00"
pytestmark = pytest.mark.anyio


def documented_policy() -> str:
    """The ``~~~yaml`` example of docs/seed-files.md, *Rules over results, arguments and counts*."""
    doc = (ROOT / "docs" / "seed-files.md").read_text(encoding="utf-8")
    [example] = re.findall(r"~~~yaml\n(.*?)~~~", doc, flags=re.S)
    return example


def conversation(*calls: tuple[str, dict[str, Any], dict[str, Any]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "cancel my trip"}]
    for i, (name, args, result) in enumerate(calls):
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"id": f"c{i}", "name": name, "args": args}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "name": name, "content": json.dumps(result)})
    return messages


def read(reservation: str, cabin: str, created_at: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    return ("get_reservation_details", {"reservation_id": reservation},
            {"reservation_id": reservation, "cabin": cabin, "created_at": created_at})


def cancel(reservation: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    return ("cancel_reservation", {"reservation_id": reservation, "reason": "change_of_plan"}, {"status": "cancelled"})


async def test_the_documented_policy_seeds_and_decides_as_described(
    neo4j_settings: Neo4jSettings, tenant: str, forget: list[str], tmp_path: Path
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(documented_policy(), encoding="utf-8")
    seeded = run_cli_on(neo4j_settings, "seed", str(path), "--tenant", tenant, "--namespace", "u1")
    assert seeded.returncode == 0, seeded.stderr

    def decide(messages: list[dict[str, Any]], reservation: str, reason: str = "change_of_plan") -> str:
        file = tmp_path / "conversation.json"
        file.write_text(json.dumps(messages), encoding="utf-8")
        done = run_cli_on(neo4j_settings, "explain", "--tenant", tenant, "--namespace", "u1",
                          "--tool", "cancel_reservation", "--messages", str(file), "--now", NOW, "--json",
                          "--args", json.dumps({"reservation_id": reservation, "reason": reason}))
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["content"] or "allowed"

    assert decide(conversation(), "R1").startswith("Missing precondition: call get_reservation_details")
    old_economy = conversation(read("R1", "economy", "2024-05-01T09:00:00"))
    assert decide(old_economy, "R1").startswith("Not allowed: All reservations can be cancelled within 24 hours")
    fresh = conversation(read("R1", "economy", "2024-05-15T09:00:00"))
    assert decide(fresh, "R1") == "allowed"
    assert decide(fresh, "R1", reason="weather").startswith("Not allowed: The reason must be change of plan")
    business = read("R3", "business", "2024-05-01T09:00:00")
    assert decide(conversation(business), "R3") == "allowed"
    two_done = conversation(read("R1", "business", NOW), cancel("R1"), read("R2", "business", NOW), cancel("R2"),
                            business)
    assert decide(two_done, "R3").startswith("Not allowed: At most two cancellations a day.")
