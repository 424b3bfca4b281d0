"""The public import path; the implementation lives in ``symfonic_graph/rules/gate.py``."""

from symfonic_graph.rules.gate import (
    ENFORCE_FLAG,
    GATE_MARKER_KEY,
    GATE_MARKER_VALUE,
    GateDecision,
    SkillCheck,
    SkillLookup,
    ToolCallRef,
    called_tools,
    create_precondition_gate_node,
    decide_call,
    explain_tool_call,
    gate_decisions,
    gate_errors,
    precondition_condition,
    run_gate,
    terminal_tool_calls,
)

__all__ = [
    "ENFORCE_FLAG",
    "GATE_MARKER_KEY",
    "GATE_MARKER_VALUE",
    "GateDecision",
    "SkillCheck",
    "SkillLookup",
    "ToolCallRef",
    "called_tools",
    "create_precondition_gate_node",
    "decide_call",
    "explain_tool_call",
    "gate_decisions",
    "gate_errors",
    "precondition_condition",
    "run_gate",
    "terminal_tool_calls",
]
