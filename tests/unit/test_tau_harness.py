"""bench/tau_compliance.py without Neo4j or tau-bench: the policy files against the perturbations."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from bench._tau import DOMAINS, WRITES, Table
from bench.tau_compliance import clause_for, clauses, policy_file
from bench.tau_perturb import PERTURBATIONS
from symfonic_graph.shape.expressions import compile_expression


def expressions(node: Any, where: str) -> list[tuple[str, str]]:
    """Every ``where`` of a policy file, with where it sits."""
    if isinstance(node, dict):
        return [(f"{where}.{k}", v) for k, v in node.items() if k == "where"] + [
            e for k, v in node.items() for e in expressions(v, f"{where}.{k}")]
    if isinstance(node, list):
        return [e for i, v in enumerate(node) for e in expressions(v, f"{where}[{i}]")]
    return []


@pytest.mark.parametrize("domain", DOMAINS)
def test_one_skill_per_write_tool_and_every_expression_compiles(domain: str) -> None:
    data = yaml.safe_load(policy_file(domain).read_text(encoding="utf-8"))
    assert sorted(s["action_tool"] for s in data["skills"]) == sorted(WRITES[domain])
    found = expressions(data, domain)
    assert len(found) >= 10
    for where, text in found:
        compile_expression(text, where)


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_clause_has_a_perturbation_and_each_names_one_clause(domain: str) -> None:
    all_clauses = clauses(domain)
    covered = {clause_for(all_clauses, p.tool, p.clause) for p in PERTURBATIONS[domain]}
    assert [c for c in all_clauses if c not in covered] == []


def test_a_run_writes_to_its_own_copy_of_a_row() -> None:
    table = Table({"u1": {"orders": ["#W1"]}, "u2": {"orders": []}})
    table["u1"]["orders"].append("#W2")
    table["u3"] = {"orders": []}
    assert table.base["u1"] == {"orders": ["#W1"]}
    assert dict(table.items())["u1"] == {"orders": ["#W1", "#W2"]}
    assert list(table) == ["u1", "u2", "u3"] and len(table) == 3 and "u3" in table and table.get("u4") is None
