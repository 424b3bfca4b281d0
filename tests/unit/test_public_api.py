"""Every name of SPEC §8 is importable from the top-level package."""

from __future__ import annotations

import pytest

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


EXPORTED = [
    "AnyPrecondition", "AuthenticationError", "AuthorityError", "ConfigurationError", "Fact", "GrantEffects",
    "GraphMemoryStore", "GraphPendingTriggers", "MemoryContractError", "MemoryLayer", "MemoryScope",
    "NotFoundError", "PendingTrigger", "PluginContribution", "ProceduralLayer", "ProspectiveLayer",
    "ProspectiveTriggerCapability", "QueryError", "ReplayReport", "RetrievalPolicy", "RuleProposal", "RuleReplay",
    "ScopeError", "Skill", "StatePrecondition", "StoreUnavailableError", "SymfonicGraphError", "TextPrecondition",
    "ToolPrecondition", "Trace", "Trigger", "TriggerSelectionSink", "TurnMemory", "TurnSnapshot", "ValidationError",
    "build_preflight_contribution", "create_precondition_gate_node", "filter_skills_by_state_predicates",
    "load_traces", "mine_rules", "precondition_condition", "prospective_trigger_capabilities", "recall_policy_for",
    "replay", "without_prospective_recall",
]


def test_the_surface_is_exactly_these_names() -> None:
    assert symfonic_graph.__all__ == sorted(EXPORTED)
    assert len(symfonic_graph.__all__) <= 45
    internals = {"GateDecision", "SkillCheck", "SkillSpec", "DroppedSkill", "scope_of", "ToolCallRef", "owned_by"}
    assert not internals & set(symfonic_graph.__all__)


def test_moved_names_still_import_for_one_release_with_a_warning() -> None:
    import warnings

    from symfonic_graph.gate import GateDecision

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert symfonic_graph.GateDecision is GateDecision  # type: ignore[attr-defined]
    assert any(issubclass(w.category, DeprecationWarning) and "symfonic_graph.gate" in str(w.message)
               for w in caught)
    with pytest.raises(AttributeError):
        symfonic_graph.no_such_name  # type: ignore[attr-defined]  # noqa: B018
