"""The public import path; the implementation lives in ``symfonic_graph/integrations/langgraph.py``."""

from symfonic_graph.integrations.langgraph import (
    GuardedNode,
    build_agent_graph,
    create_guarded_tool_node,
)

__all__ = [
    "GuardedNode",
    "build_agent_graph",
    "create_guarded_tool_node",
]
