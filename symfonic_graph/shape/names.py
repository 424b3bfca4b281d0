"""Tool names: what every path (writes, graph nodes, metadata, the gate, pre-flight, lint) accepts as one.

**A tool name** is 1 to 128 ASCII letters, digits, ``_``, ``-`` or ``.``: every
name OpenAI (``^[a-zA-Z0-9_-]{1,64}$``), Anthropic (``^[a-zA-Z0-9_-]{1,128}$``)
and MCP (1-128 of letters, digits, ``_``, ``-``, ``.``) accept. A *tool
reference* is a tool name, optionally followed by an argument list that is
ignored (``get_status(brand_id=<x>)`` names ``get_status``).

Example:
    >>> bare_identifier("get_status(brand_id=<x>)"), is_tool_name("issue refund")
    ('get_status', False)
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MAX_TOOL_NAME", "TOOL_NAME_RULE", "action_tool_problem", "bare_identifier", "is_tool_name",
           "tool_name_problem"]

MAX_TOOL_NAME: Final = 128
TOOL_NAME_RULE: Final = (
    "a tool name is 1 to 128 ASCII letters, digits, '_', '-' or '.' (what OpenAI, Anthropic and MCP accept)")
"""The accepted character set, as every error and report states it."""
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_TOOL_REFERENCE: Final = re.compile(r"([A-Za-z0-9_.\-]{1,128})\s*(\(.*\))?")


def is_tool_name(value: object) -> bool:
    """True iff ``value`` is exactly a tool name (no blanks, no argument list).

    Example:
        >>> is_tool_name("issue-refund"), is_tool_name("mcp.orders.lookup"), is_tool_name("issue refund")
        (True, True, False)
    """
    return isinstance(value, str) and _TOOL_NAME.fullmatch(value) is not None


def bare_identifier(value: object) -> str | None:
    """The tool name of a tool reference (a name, optionally with an argument list), else None.

    Surrounding blanks are ignored. Anything with another character (a space,
    a comma, a non-ASCII letter) or a name over 128 characters is no reference.

    Example:
        >>> bare_identifier("  get_status(brand_id=<x>) ")
        'get_status'
        >>> bare_identifier("issue-refund"), bare_identifier("mcp.orders.lookup(id=1)")
        ('issue-refund', 'mcp.orders.lookup')
        >>> bare_identifier("Check the status first.") is None
        True
    """
    if not isinstance(value, str):
        return None
    match = _TOOL_REFERENCE.fullmatch(value.strip())
    return match.group(1) if match else None


def tool_name_problem(value: object) -> str:
    """Why ``value`` is no tool reference, in the words every error and report uses.

    Example:
        >>> tool_name_problem("issue refund")[:40]
        "'issue refund' is not a tool name (a too"
    """
    shown = repr(value) if not isinstance(value, str) or len(value) <= 80 else f"{value[:60]!r}... ({len(value)} chars)"
    return f"{shown} is not a tool name ({TOOL_NAME_RULE})"


def action_tool_problem(action_tool: object) -> str | None:
    """What a reader should know about a skill's ``action_tool`` property, or None when it names a tool.

    A blank or absent ``action_tool`` is no problem (``steps[0]`` is the guarded
    tool). Anything else that is no tool reference is reported: the gate then
    guards ``steps[0]`` when that is a tool name, else nothing.

    Example:
        >>> action_tool_problem("issue-refund") is None, action_tool_problem(None) is None
        (True, True)
        >>> action_tool_problem("issue refund").startswith("action_tool: 'issue refund' is not a tool name")
        True
    """
    if action_tool is None or (isinstance(action_tool, str) and not action_tool.strip()):
        return None
    if bare_identifier(action_tool) is not None:
        return None
    return f"action_tool: {tool_name_problem(action_tool)}: the gate guards steps[0] instead, if it is a tool name"
