"""bench/policies/tau_airline.yaml and tau_retail.yaml, seeded into a real Neo4j and decided by the real gate.

Hand-written conversations (tau_policy_cases.yaml beside this file) test the files without
tau-bench. With tau-bench present (``$SYMFONIC_TAU_BENCH`` or ``../shared/tau-bench`` beside the
repository), a few ground-truth tasks and perturbed copies run through bench/tau_compliance.py's
harness on the shipped tools and data; without it those tests skip, saying where they looked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench._tau import ENV_VAR, load_domain, tau_bench_root
from bench.tau_compliance import NOW, play, policy_file, seed_policy
from bench.tau_perturb import PERTURBATIONS
from symfonic_graph import GraphMemoryStore
from symfonic_graph.gate import gate_decisions
from symfonic_graph.rules.ruleset import RuleSet, rules_of
from tests._cli import run_cli_on
from tests.conftest import Neo4jSettings

pytestmark = pytest.mark.anyio
CASES = yaml.safe_load((Path(__file__).with_name("tau_policy_cases.yaml")).read_text(encoding="utf-8"))["cases"]
ROOT = tau_bench_root()
needs_tau_bench = pytest.mark.skipif(
    ROOT is None, reason=f"tau-bench not found: set {ENV_VAR} or put it at ../shared/tau-bench beside the repository")


def conversation(case: dict[str, Any]) -> list[dict[str, Any]]:
    """The case as chat messages: a user message, then each call and its result, then the decided call."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": case["name"]}]
    for i, event in enumerate(case["events"]):
        name, args = event["call"]
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"id": f"c{i}", "name": name, "args": args}]})
        failed = "error" in event
        content = event["error"] if failed else event["result"]
        result = {"role": "tool", "tool_call_id": f"c{i}", "name": name,
                  "content": content if isinstance(content, str) else json.dumps(content)}
        messages.append({**result, "status": "error"} if failed else result)
    name, args = case["decide"]
    messages.append({"role": "assistant", "content": "", "tool_calls": [{"id": "decided", "name": name, "args": args}]})
    return messages


async def seeded(store: GraphMemoryStore, tenant: str) -> dict[str, RuleSet]:
    return {domain: rules_of(await seed_policy(store, tenant, domain)) for domain in ("airline", "retail")}


async def test_both_policy_files_seed_through_the_cli_and_a_second_run_changes_nothing(
    neo4j_settings: Neo4jSettings, tenant: str, forget: list[str]
) -> None:
    for domain, skills in (("airline", 6), ("retail", 7)):
        first = run_cli_on(neo4j_settings, "seed", str(policy_file(domain)), "--tenant", tenant, "--namespace", domain)
        assert first.returncode == 0, first.stderr
        assert f"seeded {skills} skills" in first.stdout
        second = run_cli_on(neo4j_settings, "seed", str(policy_file(domain)), "--tenant", tenant,
                            "--namespace", domain)
        assert f"skills: 0 created, 0 updated, {skills} unchanged" in second.stdout, second.stdout


async def test_hand_written_conversations_are_decided_as_the_policies_say(
    store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    rules = await seeded(store, tenant)
    wrong = []
    for case in CASES:
        [decision] = gate_decisions(conversation(case), rules[case["domain"]], {}, now=NOW)
        text = decision.content() or ""
        if decision.allowed != (case["expect"] == "allowed") or case.get("says", "") not in text:
            wrong.append(f"{case['name']}: {decision.verdict}: {text[:300]}")
    assert not wrong, "\n".join(wrong)
    assert {c["expect"] for c in CASES} == {"allowed", "blocked"} and len(CASES) >= 20


@needs_tau_bench
async def test_ground_truth_tasks_run_on_the_shipped_tools_without_a_block(
    store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    assert ROOT is not None
    rules = await seeded(store, tenant)
    for domain_name, task_ids in (("airline", ("tasks_test:0", "tasks_test:3", "tasks_test:22", "tasks_test:45")),
                                  ("retail", ("tasks_test:0", "tasks_test:1", "tasks_train:0", "tasks_dev:0"))):
        domain = load_domain(ROOT, domain_name)
        for task in [t for t in domain.tasks if t.id in task_ids]:
            run = play(domain, task, rules[domain_name])
            assert run.writes and not run.blocks, (task.id, [w.decision.content() for w in run.blocks if w.decision])
            assert not any(w.failed for w in run.writes), task.id


@needs_tau_bench
async def test_a_ground_truth_cancel_of_a_trip_already_flown_is_blocked(
    store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    assert ROOT is not None
    rules = await seeded(store, tenant)
    domain = load_domain(ROOT, "airline")
    [task] = [t for t in domain.tasks if t.id == "tasks_test:26"]
    [blocked] = play(domain, task, rules["airline"]).blocks
    assert blocked.action.name == "cancel_reservation" and blocked.decision is not None
    assert "The agent can only cancel the whole trip that is not flown." in (blocked.decision.content() or "")


@needs_tau_bench
async def test_perturbed_copies_are_blocked_at_the_breaking_call(
    store: GraphMemoryStore, tenant: str, forget: list[str]
) -> None:
    assert ROOT is not None
    rules = await seeded(store, tenant)
    for domain_name, task_id in (("airline", "tasks_test:3"), ("airline", "tasks_test:0"), ("retail", "tasks_test:0"),
                                 ("retail", "tasks_train:1")):
        domain = load_domain(ROOT, domain_name)
        [task] = [t for t in domain.tasks if t.id == task_id]
        tried = 0
        for perturbation in PERTURBATIONS[domain_name]:
            run = play(domain, task, rules[domain_name], perturbation)
            if not run.applicable:
                continue
            tried += 1
            [breaking] = [w for w in run.writes if w.breaking]
            assert breaking.decision is not None and not breaking.decision.allowed, (task_id, perturbation.how)
        assert tried >= 3, (task_id, tried)
    assert NOW.isoformat() == "2024-05-15T15:00:00+00:00"


async def test_replay_of_the_cases_as_gzip_traces_lists_each_blocked_call_at_tau_bench_clock(
    neo4j_settings: Neo4jSettings, tenant: str, forget: list[str], tmp_path: Path
) -> None:
    import gzip

    for domain in ("airline", "retail"):
        seeded_file = run_cli_on(neo4j_settings, "seed", str(policy_file(domain)), "--tenant", tenant,
                                 "--namespace", domain)
        assert seeded_file.returncode == 0, seeded_file.stderr
        cases = [c for c in CASES if c["domain"] == domain]
        path = tmp_path / f"{domain}.jsonl.gz"
        path.write_bytes(gzip.compress("".join(
            json.dumps({"id": f"case-{i}", "messages": conversation(c)}) + "\n" for i, c in enumerate(cases)).encode()))
        result = run_cli_on(neo4j_settings, "rules", "replay", str(path), "--tenant", tenant, "--namespace", domain,
                            "--now", "2024-05-15T15:00:00", "--json")
        assert result.returncode == 0, result.stderr
        decisions = {d["trace"]: d for d in json.loads(result.stdout)["decisions"] if d["call_id"] == "decided"}
        for i, case in enumerate(cases):
            found = decisions.get(f"case-{i}")
            if case["expect"] == "allowed":
                assert found is None, (case["name"], found)
            else:
                assert found is not None and found["mode"] == "enforce", case["name"]
                assert found["tool"] == case["decide"][0] and found["index"] == len(case["events"])
                says = case.get("says", "").removeprefix("Not allowed: ").removeprefix("Missing precondition: ")
                assert says[:40] in found["reason"], (case["name"], found["reason"])
