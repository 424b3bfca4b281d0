"""The public import path; the implementation lives in ``symfonic_graph/memory/decision_log.py``."""

from symfonic_graph.memory.decision_log import Decision, DecisionSink, Neo4jDecisionLog

__all__ = ["Decision", "DecisionSink", "Neo4jDecisionLog"]
