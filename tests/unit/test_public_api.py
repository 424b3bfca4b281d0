"""Every name of SPEC §8 is importable from the top-level package."""

from __future__ import annotations

import symfonic_graph

SPEC_NAMES = [
    "MemoryScope",
    "GraphMemoryStore",
    "ProceduralLayer",
    "ProspectiveLayer",
    "MemoryLayer",
    "RetrievalPolicy",
    "MemoryContractError",
    "PluginContribution",
    "GrantEffects",
    "create_precondition_gate_node",
    "precondition_condition",
    "filter_skills_by_state_predicates",
    "build_preflight_contribution",
    "PendingTrigger",
    "GraphPendingTriggers",
    "ProspectiveTriggerCapability",
    "TriggerSelectionSink",
    "prospective_trigger_capabilities",
    "recall_policy_for",
    "without_prospective_recall",
]


def test_spec_names_are_exported() -> None:
    for name in SPEC_NAMES:
        assert name in symfonic_graph.__all__, name
        assert getattr(symfonic_graph, name) is not None


def test_all_is_sorted_and_resolvable() -> None:
    assert symfonic_graph.__all__ == sorted(symfonic_graph.__all__)
    for name in symfonic_graph.__all__:
        getattr(symfonic_graph, name)


def test_errors_share_one_root_and_validation_is_value_error() -> None:
    from symfonic_graph import MemoryContractError, ScopeError, SymfonicGraphError, ValidationError

    for err in (MemoryContractError, ScopeError, ValidationError):
        assert issubclass(err, SymfonicGraphError) and issubclass(err, ValueError)
