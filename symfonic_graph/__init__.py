"""symfonic-graph: procedural and prospective memory for multi-tenant agents, in Neo4j.

The top level holds the contract (the memory API and the rules API), the
errors, the record types and ``TurnMemory``. Everything else lives in its
module (``symfonic_graph.gate``, ``symfonic_graph.recall``, ...); the
integrations are ``symfonic_graph.langchain`` and ``symfonic_graph.langgraph``
(optional extras). Names that moved off the top level in 0.2.0 still import
from here until 0.3.0, with a ``DeprecationWarning`` naming their new import
path (``_MOVED``). ``__version__`` is the installed distribution's version;
``dir(symfonic_graph)`` lists ``__all__`` and ``__version__`` only (the
deprecated names still resolve, but are not offered to autocompletion).

Example:
    >>> from symfonic_graph import GraphMemoryStore, MemoryScope, ProceduralLayer
"""

from __future__ import annotations

import importlib as _importlib
import sys as _sys
import types as _types
import warnings as _warnings
from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version
from typing import Any as _Any

from symfonic_graph._store import GraphMemoryStore
from symfonic_graph.errors import (
    AuthenticationError,
    AuthorityError,
    ConfigurationError,
    MemoryContractError,
    NotFoundError,
    QueryError,
    ScopeError,
    StoreUnavailableError,
    SymfonicGraphError,
    ValidationError,
)
from symfonic_graph.gate import create_precondition_gate_node, precondition_condition
from symfonic_graph.layers import ProceduralLayer, ProspectiveLayer
from symfonic_graph.learning.mining import RuleProposal, mine_rules
from symfonic_graph.learning.replay import ReplayReport, RuleReplay, replay
from symfonic_graph.learning.traces import Trace, load_traces
from symfonic_graph.memory.dispatch import TriggerDispatcher
from symfonic_graph.memory.turn import TurnMemory, TurnSnapshot
from symfonic_graph.models import Fact, Skill, Trigger
from symfonic_graph.preconditions import filter_skills_by_state_predicates
from symfonic_graph.recall import MemoryLayer, RetrievalPolicy, recall_policy_for, without_prospective_recall
from symfonic_graph.rules.preflight import build_preflight_contribution
from symfonic_graph.shape.contributions import GrantEffects, PluginContribution
from symfonic_graph.shape.records import (
    AnyPrecondition,
    CheckPrecondition,
    FactPrecondition,
    LimitPrecondition,
    StatePrecondition,
    TextPrecondition,
    ToolPrecondition,
)
from symfonic_graph.shape.scope import MemoryScope
from symfonic_graph.triggers import (
    GraphPendingTriggers,
    PendingTrigger,
    ProspectiveTriggerCapability,
    TriggerSelectionSink,
    prospective_trigger_capabilities,
)

__all__ = [
    "AnyPrecondition",
    "AuthenticationError",
    "AuthorityError",
    "CheckPrecondition",
    "ConfigurationError",
    "Fact",
    "FactPrecondition",
    "GrantEffects",
    "GraphMemoryStore",
    "GraphPendingTriggers",
    "LimitPrecondition",
    "MemoryContractError",
    "MemoryLayer",
    "MemoryScope",
    "NotFoundError",
    "PendingTrigger",
    "PluginContribution",
    "ProceduralLayer",
    "ProspectiveLayer",
    "ProspectiveTriggerCapability",
    "QueryError",
    "ReplayReport",
    "RetrievalPolicy",
    "RuleProposal",
    "RuleReplay",
    "ScopeError",
    "Skill",
    "StatePrecondition",
    "StoreUnavailableError",
    "SymfonicGraphError",
    "TextPrecondition",
    "ToolPrecondition",
    "Trace",
    "Trigger",
    "TriggerDispatcher",
    "TriggerSelectionSink",
    "TurnMemory",
    "TurnSnapshot",
    "ValidationError",
    "build_preflight_contribution",
    "create_precondition_gate_node",
    "filter_skills_by_state_predicates",
    "load_traces",
    "mine_rules",
    "precondition_condition",
    "prospective_trigger_capabilities",
    "recall_policy_for",
    "replay",
    "without_prospective_recall",
]

try:
    __version__: str = _version("symfonic-graph")
    """The installed distribution's version, e.g. ``"0.1.0"`` (PEP 440)."""
except _PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

_REMOVED_IN = "0.3.0"
"""The release that removes the deprecated top-level names of ``_MOVED``."""

_MOVED = {
    "ComposedPrompt": "symfonic_graph.composition",
    "compose_prompt": "symfonic_graph.composition",
    "DroppedSkill": "symfonic_graph.preconditions",
    "GateDecision": "symfonic_graph.gate",
    "SkillCheck": "symfonic_graph.gate",
    "explain_tool_call": "symfonic_graph.gate",
    "SkillSpec": "symfonic_graph.layers",
    "SemanticLayer": "symfonic_graph.layers",
    "Neo4jSelectionAuditSink": "symfonic_graph.triggers",
    "QueryFileError": "symfonic_graph.errors",
    "SchemaError": "symfonic_graph.errors",
    "RecallHit": "symfonic_graph.recall",
    "recall": "symfonic_graph.recall",  # served by _CallableModule below, not by __getattr__
    "StoreSkillGetter": "symfonic_graph.skill_source",
    "scope_from_state": "symfonic_graph.turn_scope",
    "scope_from_turn": "symfonic_graph.turn_scope",
    "scope_of": "symfonic_graph.turn_scope",
}
"""Names that left the top level in 0.2.0, and the public module that holds them (until 0.3.0)."""


def _warn_moved(name: str, stacklevel: int) -> None:
    module = _MOVED[name]
    _warnings.warn(
        f"symfonic_graph.{name} is deprecated and is removed in {_REMOVED_IN}: "
        f"use `from {module} import {name}`",
        DeprecationWarning, stacklevel=stacklevel + 1,
    )


def __getattr__(name: str) -> _Any:
    if name not in _MOVED:
        raise AttributeError(f"module 'symfonic_graph' has no attribute {name!r}")
    _warn_moved(name, stacklevel=2)
    return getattr(_importlib.import_module(_MOVED[name]), name)


def __dir__() -> list[str]:
    """The public names (``__all__``) and ``__version__``; deprecated names resolve but are not listed."""
    return sorted([*__all__, "__version__"])


class _CallableModule(_types.ModuleType):
    """The ``symfonic_graph.recall`` module, callable as the deprecated ``symfonic_graph.recall()`` function.

    ``symfonic_graph.recall`` cannot be served by ``__getattr__``: importing
    the submodule (as this package does above) makes the import system bind
    the package attribute ``recall`` to the module, and ``import
    symfonic_graph.recall`` / ``symfonic_graph.recall.recall_search`` need it
    to stay the module. So the module object itself answers a call: it warns
    and forwards to ``symfonic_graph.recall.recall``. Everything else about
    the module is unchanged. Removed in 0.3.0 with the rest of ``_MOVED``.
    """

    def __call__(self, *args: _Any, **kwargs: _Any) -> _Any:
        _warn_moved("recall", stacklevel=2)
        return self.recall(*args, **kwargs)


_sys.modules["symfonic_graph.recall"].__class__ = _CallableModule
