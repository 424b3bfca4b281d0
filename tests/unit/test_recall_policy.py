"""Memory layers, the retrieval policy and the Lucene escaping, without a database."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from symfonic_graph._store.cypher import query
from symfonic_graph.errors import MemoryContractError
from symfonic_graph.recall import (
    MemoryLayer,
    RecallHit,
    RetrievalPolicy,
    escape_lucene,
    recall_policy_for,
    without_prospective_recall,
)
from symfonic_graph.shape.contributions import GrantEffects
from symfonic_graph.shape.scope import MemoryScope
from symfonic_graph.triggers import PendingTrigger, ProspectiveTriggerCapability

ALL = frozenset(MemoryLayer)


class NoTriggers:
    async def pending(self, scope: MemoryScope) -> list[PendingTrigger]:
        return []


def trigger_capability() -> ProspectiveTriggerCapability:
    return ProspectiveTriggerCapability(NoTriggers(), lambda c, q: True, MemoryScope("acme"))


def test_layers() -> None:
    assert [m.value for m in MemoryLayer] == ["semantic", "episodic", "procedural", "prospective", "working"]
    assert MemoryLayer("working") is MemoryLayer.WORKING


def test_default_policy_enables_every_layer_and_is_frozen() -> None:
    policy = RetrievalPolicy()
    assert policy.enabled_layers == ALL
    with pytest.raises(FrozenInstanceError):
        policy.enabled_layers = frozenset()  # type: ignore[misc]
    assert RetrievalPolicy() == RetrievalPolicy()
    assert hash(RetrievalPolicy()) == hash(RetrievalPolicy(ALL))


def test_policy_accepts_strings_and_rejects_nonsense() -> None:
    assert RetrievalPolicy(frozenset({"semantic"})).enabled_layers == {MemoryLayer.SEMANTIC}  # type: ignore[arg-type]
    with pytest.raises(MemoryContractError, match="unknown memory layer 'dreams'"):
        RetrievalPolicy(frozenset({"dreams"}))  # type: ignore[arg-type]
    with pytest.raises(MemoryContractError, match="at least one enabled layer"):
        RetrievalPolicy(frozenset())
    with pytest.raises(MemoryContractError, match="collection"):
        RetrievalPolicy("semantic")  # type: ignore[arg-type]


def test_without_prospective_recall() -> None:
    assert without_prospective_recall().enabled_layers == ALL - {MemoryLayer.PROSPECTIVE}
    narrowed = RetrievalPolicy(frozenset({MemoryLayer.SEMANTIC, MemoryLayer.PROSPECTIVE}))
    assert without_prospective_recall(narrowed).enabled_layers == {MemoryLayer.SEMANTIC}
    already = RetrievalPolicy(frozenset({MemoryLayer.PROCEDURAL}))
    assert without_prospective_recall(already) is already


def test_without_prospective_recall_refuses_to_leave_nothing() -> None:
    only = RetrievalPolicy(frozenset({MemoryLayer.PROSPECTIVE}))
    with pytest.raises(MemoryContractError, match="leaves no layer"):
        without_prospective_recall(only)
    assert issubclass(MemoryContractError, ValueError)


def test_recall_policy_for_applies_only_with_a_trigger_capability() -> None:
    assert recall_policy_for([]) is None
    assert recall_policy_for([GrantEffects("memory-read"), object()]) is None
    custom = RetrievalPolicy(frozenset({MemoryLayer.SEMANTIC, MemoryLayer.PROSPECTIVE}))
    assert recall_policy_for([object()], custom) is custom

    applied = recall_policy_for([GrantEffects("memory-read"), trigger_capability()])
    assert applied is not None and applied.enabled_layers == ALL - {MemoryLayer.PROSPECTIVE}
    narrowed = recall_policy_for([trigger_capability()], custom)
    assert narrowed is not None and narrowed.enabled_layers == {MemoryLayer.SEMANTIC}
    with pytest.raises(MemoryContractError):
        recall_policy_for([trigger_capability()], RetrievalPolicy(frozenset({MemoryLayer.PROSPECTIVE})))


def test_recall_policy_for_accepts_any_iterable() -> None:
    policy = recall_policy_for(iter([trigger_capability()]))
    assert policy is not None and not policy.allows("prospective")


def test_nothing_applies_the_policy_by_default() -> None:
    assert RetrievalPolicy().allows(MemoryLayer.PROSPECTIVE)


def test_hit_renders_layer_and_content() -> None:
    hit = RecallHit(MemoryLayer.PROSPECTIVE, "t1", "invoice -> Say it is overdue.", 1.0)
    assert str(hit) == "[prospective] invoice -> Say it is overdue."


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("invoice", "invoice"),
        ("what? (a) [b] {c}", r"what\? \(a\) \[b\] \{c\}"),
        ('"quoted" ~fuzzy* a:b c/d e\\f', r'\"quoted\" \~fuzzy\* a\:b c\/d e\\f'),
        ("a && b || !c +d -e ^f", r"a \&\& b \|\| \!c \+d \-e \^f"),
        ("cats AND dogs OR NOT TO", "cats and dogs or not to"),
        ("  spaced\n\tout  ", "spaced out"),
        ("", ""),
    ],
)
def test_escape_lucene(raw: str, escaped: str) -> None:
    assert escape_lucene(raw) == escaped


def test_escape_lucene_caps_the_number_of_terms() -> None:
    assert len(escape_lucene("w " * 5000).split()) == 256


def test_recall_query_takes_the_user_text_and_layers_as_parameters() -> None:
    q = query("memory_recall")
    assert {"search", "search_unstamped", "labels", "tenant_id", "namespace", "write_id", "limit"} == q.params
    assert "queryNodes('symfonic_memory_text_v3', search)" in q.text
    assert "kind IN $labels" in q.text
    assert "node.status = 'approved'" in q.text and "node.status = 'pending'" in q.text
