"""Decision records: which gate decisions become records, their log lines, and the log's bounded queue."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from symfonic_graph._store.store import GraphMemoryStore
from symfonic_graph.cli._decisions import age_seconds
from symfonic_graph.decisions import Decision, DecisionSink, Neo4jDecisionLog
from symfonic_graph.errors import StoreUnavailableError, ValidationError
from symfonic_graph.rules.decisions import decisions_of, emit
from symfonic_graph.rules.gate import GateDecision
from symfonic_graph.rules.ruleset import SkillCheck

_check = st.builds(SkillCheck, st.sampled_from(["A", None]), st.sampled_from(["sk-1", "sk-2"]),
                   st.just(("x",)), st.sampled_from([(), ("x",)]), shadow=st.booleans())


@st.composite
def _gate(draw: Any) -> GateDecision:
    verdict = draw(st.sampled_from(["allowed", "blocked", "store_unavailable"]))
    blocking = draw(_check) if verdict == "blocked" else None
    shadowed = tuple(draw(st.lists(_check, max_size=2))) if verdict != "store_unavailable" else ()
    return GateDecision(draw(st.sampled_from(["deploy", "refund"])), draw(st.sampled_from(["c1", None])),
                        verdict, blocking=blocking, shadowed=shadowed)


@given(st.lists(_gate(), max_size=5), st.booleans(), st.booleans(), st.sampled_from([False, True, "guarded"]))
def test_each_kept_decision_is_one_record_and_allows_give_none(
    gate: list[GateDecision], outage: bool, stale: bool, strict: object,
) -> None:
    exc = StoreUnavailableError("down") if outage else None
    records = decisions_of(gate, tenant_id="acme", namespace="u", strict=strict, outage=exc, stale=stale, at=1.0)
    kinds = [r.decision for r in records]
    assert kinds.count("block") == sum(d.verdict == "blocked" for d in gate)
    assert kinds.count("refused") == sum(d.verdict == "store_unavailable" for d in gate)
    assert kinds.count("would_block") == sum(bool(d.shadowed) for d in gate)
    assert kinds.count("pass_through") == (sum(d.verdict == "allowed" for d in gate) if outage else 0)
    assert kinds.count("stale_rules") == (len(gate) if stale else 0)
    assert all(r.tenant_id == "acme" and r.namespace == "u" and r.at == 1.0 for r in records)
    if not outage and not stale:  # an allowed call without shadow rules leaves no record
        assert len(records) == sum(d.verdict != "allowed" for d in gate) + sum(bool(d.shadowed) for d in gate)


def test_an_outage_pass_through_names_every_call_the_gate_returned_nothing_for() -> None:
    records = decisions_of((), tenant_id="acme", outage=StoreUnavailableError("down"),
                           calls=[("deploy", "c1"), ("refund", "c2")])
    assert [(r.decision, r.tool, r.call_id, r.mode) for r in records] == [
        ("pass_through", "deploy", "c1", "lenient"), ("pass_through", "refund", "c2", "lenient")]


@pytest.mark.anyio
async def test_the_log_line_carries_the_stable_fields_and_a_failing_sink_never_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        async def record(self, decisions: Any) -> None:
            raise RuntimeError("boom")

    d = Decision("acme", None, "deploy", "c1", ("sk-1",), "block", "enforce", "missing run_tests", 1.0)
    assert isinstance(Broken(), DecisionSink)
    with caplog.at_level(logging.INFO, logger="symfonic_graph.decisions"):
        await emit([d], Broken())
    line, failure = caplog.records
    assert line.levelname == "WARNING"
    assert line.getMessage() == ("block tenant=acme namespace=None tool=deploy call_id=c1 rule_ids=sk-1 "
                                 "mode=enforce reason=missing run_tests")
    assert line.decision["rule_ids"] == ["sk-1"]  # type: ignore[attr-defined]
    assert failure.levelname == "ERROR" and "not kept" in failure.getMessage()


@pytest.mark.anyio
async def test_a_full_queue_drops_counts_and_logs_and_record_never_waits(caplog: pytest.LogCaptureFixture) -> None:
    # The writer task never runs here (nothing yields to it), so nothing reaches the store.
    log = Neo4jDecisionLog(cast(GraphMemoryStore, object()), max_queue=3)
    decisions = [Decision("acme", "u", "deploy", f"c{i}", (), "refused", "strict", "down", 1.0) for i in range(5)]
    with caplog.at_level(logging.WARNING, logger="symfonic_graph.decisions"):
        await log.record(decisions)
    assert log.dropped == 2
    dropped = [r for r in caplog.records if "queue full" in r.getMessage()]
    assert len(dropped) == 2 and "c4" in dropped[-1].getMessage() and "2 dropped so far" in dropped[-1].getMessage()
    assert log._writer is not None
    log._writer.cancel()
    await asyncio.gather(log._writer, return_exceptions=True)


def test_ages_read_as_the_cli_takes_them() -> None:
    assert age_seconds("--older-than", "30d") == 30 * 86400
    assert age_seconds("--since", "2w") == 14 * 86400 and age_seconds("--since", "45") == 45
    with pytest.raises(ValidationError, match="--older-than"):
        age_seconds("--older-than", "thirty days")
