"""Agents that share a tenant's catalog: a rule for another agent's tool is DEBUG, a missing precondition ERROR."""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symfonic_graph.rules.lint import ACTION_MISSING, ToolLinter, lint_rules
from symfonic_graph.rules.ruleset import RuleSet
from tests._skills import skill

NAMES = ["lookup_order", "issue_refund", "verify_identity", "delete_account", "deploy", "run_tests"]

rules_st = st.lists(
    st.tuples(st.sampled_from(NAMES), st.lists(st.sampled_from(NAMES), max_size=3, unique=True)),
    min_size=1, max_size=6)
agents_st = st.lists(st.sets(st.sampled_from(NAMES), min_size=1), min_size=1, max_size=4)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rules=rules_st, agents=agents_st)
def test_a_shared_catalog_logs_at_error_only_what_breaks_an_agents_own_tool(
    rules: list[tuple[str, list[str]]], agents: list[set[str]], caplog: pytest.LogCaptureFixture
) -> None:
    catalog = RuleSet([skill(action, pres, label=f"r{i}", id=f"sk-{i}", tenant_id="acme")
                       for i, (action, pres) in enumerate(rules)])
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="symfonic_graph.lint"):
        for tools in agents:
            linter = ToolLinter(sorted(tools))
            for _ in range(3):  # every turn of the scope while its catalog version is unchanged
                linter.check(catalog)
            expected_errors = sum(1 for action, pres in rules if action in tools for p in dict.fromkeys(pres)
                                  if p not in tools)
            expected_debug = sum(1 for action, _ in rules if action not in tools)
            records = [r for r in caplog.records if r.name == "symfonic_graph.lint"]
            assert sum(r.levelno >= logging.WARNING for r in records) == expected_errors
            assert all(r.levelno in (logging.DEBUG, logging.ERROR) for r in records)
            assert sum(r.levelno == logging.DEBUG for r in records) == expected_debug
            caplog.clear()
    # the CLI's findings are unchanged: a missing action tool is still a WARNING finding
    for tools in agents:
        found = lint_rules(catalog, tools)
        assert all(f.level == "WARNING" for f in found if f.code == ACTION_MISSING)
        assert sum(f.code == ACTION_MISSING for f in found) == sum(1 for a, _ in rules if a not in tools)
