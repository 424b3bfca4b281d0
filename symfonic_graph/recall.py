"""The public import path; the implementation lives in ``symfonic_graph/memory/recall.py``."""

from symfonic_graph.memory.recall import (
    MAX_TERM_CHARS,
    MAX_TERMS,
    RECALL_INDEX,
    MemoryLayer,
    RecallHit,
    RetrievalPolicy,
    escape_lucene,
    recall,
    recall_policy_for,
    recall_search,
    without_prospective_recall,
)

__all__ = [
    "MemoryLayer",
    "RecallHit",
    "RetrievalPolicy",
    "MAX_TERMS",
    "MAX_TERM_CHARS",
    "RECALL_INDEX",
    "escape_lucene",
    "recall",
    "recall_policy_for",
    "recall_search",
    "without_prospective_recall",
]
