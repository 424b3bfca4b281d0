"""``symfonic-graph rules lint``: a scope's rules checked against an agent's tools."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio

from symfonic_graph.cli._common import add_json_flag, add_scope_flags, emit, scope_of
from symfonic_graph.cli._connect import open_store
from symfonic_graph.errors import ValidationError
from symfonic_graph.memory.layers import ProceduralLayer
from symfonic_graph.rules.lint import lint_rules


def register(rules: Any) -> None:
    """``rules lint``, into the ``rules`` command's actions."""
    lint = rules.add_parser(
        "lint", help="report rules whose tools the agent lacks (exit 1 when any)",
        description="Report rules whose action tool the agent lacks (WARNING: the rule never applies), "
                    "rules whose precondition tools it lacks or whose preconditions can never be met (ERROR: "
                    "the action can never run), and rules whose action_tool is no tool name (ERROR: a tool "
                    "name is 1 to 128 ASCII letters, digits, '_', '-' or '.'). Exit 1 when there are findings.")
    add_scope_flags(lint)
    add_json_flag(lint)
    lint.add_argument("--tools", required=True, metavar="a,b,c|FILE",
                      help="the agent's tool names: comma-separated, or a file (a JSON list, or one name a line)")
    lint.set_defaults(handler=lambda a: anyio.run(_lint, a))


def read_tools(value: str) -> list[str]:
    """The tool names ``--tools`` gives: a file's (JSON list or one a line) when it names a file, else the list.

    Example:
        >>> read_tools("lookup_order, issue_refund")
        ['lookup_order', 'issue_refund']
    """
    path = Path(value)
    if not path.is_file():
        names = [name.strip() for name in value.split(",") if name.strip()]
        if not names:
            raise ValidationError("--tools", "give the agent's tool names (a,b,c) or a file listing them")
        return names
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise ValidationError(f"--tools {path}", f"cannot be read: {exc}") from None
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"--tools {path}", f"not a JSON list: {exc}") from None
        if not isinstance(data, list) or not all(isinstance(n, str) for n in data):
            raise ValidationError(f"--tools {path}", "must be a JSON list of tool names (strings)")
        return [n.strip() for n in data if n.strip()]
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


async def _lint(args: argparse.Namespace) -> int:
    tools = read_tools(args.tools)
    async with open_store() as store:
        skills = await ProceduralLayer(store).query_skills(scope_of(args))
    findings = lint_rules(skills, tools)
    text = "\n".join(f.line() for f in findings) or f"no problems found ({len(skills)} skills, {len(tools)} tools)"
    emit(args, [asdict(f) for f in findings], text)
    return 1 if findings else 0
