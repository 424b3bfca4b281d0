"""Rules checked against the agent's tools, without a database."""

from __future__ import annotations

import doctest
import importlib
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from symfonic_graph.cli._rules import read_tools
from symfonic_graph.errors import ValidationError
from symfonic_graph.rules.lint import ToolLinter, lint_rules
from symfonic_graph.rules.preflight import preflight_block
from symfonic_graph.rules.ruleset import RuleSet
from tests._skills import skill

TYPO = skill("delete_acount", ["verify_identity"], label="Close account", id="sk-1", tenant_id="acme")
MANAGER = skill("issue_refund", ["lookup_order", "request_manager_approval"], label="Refunds", id="sk-2",
                tenant_id="acme")
FINE = skill("issue_refund", ["lookup_order"], label="Refund lookup", id="sk-3", tenant_id="acme")
TOOLS = ["lookup_order", "issue_refund", "verify_identity", "delete_account"]


@pytest.mark.parametrize("name", [
    "symfonic_graph.rules.lint", "symfonic_graph.shape._limits", "symfonic_graph.cli._rules"])
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_a_typo_in_the_action_tool_is_a_warning_and_a_missing_precondition_tool_an_error() -> None:
    findings = lint_rules([TYPO, MANAGER, FINE], TOOLS)
    assert [(f.level, f.skill_id, f.tool) for f in findings] == [
        ("WARNING", "sk-1", "delete_acount"), ("ERROR", "sk-2", "request_manager_approval")]
    assert findings[0].line().startswith("WARNING Close account: action tool `delete_acount`")
    assert "`issue_refund` can never run" in findings[1].line()
    assert findings[0].tenant_id == "acme"


def test_tools_may_be_names_tool_objects_or_provider_dicts() -> None:
    tools = [SimpleNamespace(name="lookup_order"), {"name": "issue_refund"},
             {"type": "function", "function": {"name": "request_manager_approval"}}]
    assert lint_rules([MANAGER, FINE], tools) == []


def test_the_linter_logs_each_catalog_once_and_keeps_out_rules_for_missing_action_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    linter = ToolLinter(TOOLS)
    rules = RuleSet([TYPO, MANAGER, FINE])
    with caplog.at_level(logging.DEBUG, logger="symfonic_graph.lint"):
        for _ in range(3):
            linter.check(rules)
            linter.check(RuleSet([TYPO, MANAGER, FINE]))  # the same findings from a re-read catalog
    assert [r.levelname for r in caplog.records] == ["DEBUG", "ERROR"]  # a missing action tool is quiet
    block = preflight_block(linter.for_preflight(rules))
    assert block is not None and "delete_acount" not in block.content
    assert "`request_manager_approval` BEFORE calling `issue_refund`" in block.content
    assert linter.for_preflight(rules) is linter.for_preflight(rules)  # computed once per catalog
    assert ToolLinter([]).check(rules) == []  # no tools known: nothing to say


def test_read_tools_takes_a_list_a_json_file_or_a_file_of_lines(tmp_path: Path) -> None:
    assert read_tools("a, b,,c") == ["a", "b", "c"]
    (tmp_path / "t.json").write_text('["x", "y"]')
    assert read_tools(str(tmp_path / "t.json")) == ["x", "y"]
    (tmp_path / "t.txt").write_text("x\n# a comment\n\ny\n")
    assert read_tools(str(tmp_path / "t.txt")) == ["x", "y"]
    (tmp_path / "bad.json").write_text('[1, 2]')
    with pytest.raises(ValidationError, match="JSON list of tool names"):
        read_tools(str(tmp_path / "bad.json"))
    with pytest.raises(ValidationError):
        read_tools(" , ")
