"""The pieces of bench/compliance.py on a tiny fixture (the benchmark itself is a script, not a test).

The pure pieces (perturbation, the scripted obeying model, traces, the
library miner) run on a two-tool shop; the BFCL pieces are skipped when
bfcl-eval is not installed (it is in the optional ``bench`` extra).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from bench import compliance
from bench._bfcl import INSTALL_HINT, Call
from bench.compliance import (
    AuthoredRule,
    Sequence_,
    Step,
    make_trace,
    perturbations,
    run_sequence,
)
from symfonic_graph.gate import called_tools
from symfonic_graph.learning.mining import mine_rules
from symfonic_graph.learning.traces import Outcome, Trace
from tests._skills import skill, state_pred


class Shop:
    """A two-tool API that, like BFCL's, refuses ``buy`` before ``login``."""

    def __init__(self, logged_in: bool = False) -> None:
        self.logged_in = logged_in
        self.orders: list[str] = []

    def call(self, name: str, args: Mapping[str, Any]) -> tuple[str, bool, bool]:
        if name == "login":
            self.logged_in = True
            return json.dumps({"login": args.get("user")}), False, False
        if name == "buy":
            if not self.logged_in:
                return json.dumps({"error": "User not authenticated."}), True, True
            self.orders.append(args["item"])
            return json.dumps({"ok": True}), False, False
        return "{}", False, False

    def state(self) -> dict[str, Any]:
        return {"logged_in": self.logged_in, "orders": list(self.orders)}


LOGIN, BUY, LOOK = Call("login", {"user": "ann"}), Call("buy", {"item": "tea"}), Call("look", {})
TRUTH = Sequence_("t1", ["buy tea"], (Step(0, LOOK), Step(0, LOGIN), Step(0, BUY)))
# "login before buy", unless the session starts logged in (as the bench's authored rules read session flags)
BUY_RULE = skill("buy", ["login", state_pred("session.logged_in", "eq", False)], label="Shop login")
GUARDS = {"login": {"buy"}}


def test_perturbation_removes_each_precondition_call_that_a_later_guarded_call_needs() -> None:
    [copy] = perturbations(TRUTH, GUARDS)
    assert [s.call.name for s in copy.steps] == ["look", "buy"]
    assert copy.removed == 1 and copy.removed_call == LOGIN
    # a login after the last buy guards nothing: no copy
    late = Sequence_("t2", ["q"], (Step(0, BUY), Step(0, LOGIN)))
    assert perturbations(late, GUARDS) == []


def test_without_the_gate_the_perturbed_copy_hits_the_apis_own_precondition_error() -> None:
    [copy] = perturbations(TRUTH, GUARDS)
    truth, plain = run_sequence(TRUTH, Shop()), run_sequence(copy, Shop())
    assert truth.precondition_errors == 0 and truth.state == {"logged_in": True, "orders": ["tea"]}
    assert plain.precondition_errors == 1
    assert plain.state != truth.state


def test_the_obeying_model_calls_what_the_gate_names_then_retries_and_ends_in_the_truth_state() -> None:
    [copy] = perturbations(TRUTH, GUARDS)
    gated = run_sequence(copy, Shop(), rules=[BUY_RULE], gate_state={"session": {"logged_in": False}})
    assert [d.missing for d in gated.blocks] == [("login",)]
    assert gated.recovery_calls == 1 and gated.precondition_errors == 0 and gated.unrecovered == 0
    assert gated.state == run_sequence(TRUTH, Shop()).state
    # the login the model made used the removed call's arguments, and its result came before the retried buy
    calls = [m["tool_calls"][0] for m in gated.messages if m["role"] == "assistant"]
    assert [(c["name"], c["args"]) for c in calls] == [
        ("look", {}), ("buy", {"item": "tea"}), ("login", {"user": "ann"}), ("buy", {"item": "tea"})]


def test_the_gates_injected_result_does_not_count_as_a_call() -> None:
    [copy] = perturbations(TRUTH, GUARDS)
    gated = run_sequence(copy, Shop(), rules=[BUY_RULE], gate_state={"session": {"logged_in": False}})
    first_buy_answer = gated.messages[4]
    assert first_buy_answer["status"] == "error" and first_buy_answer["content"].startswith("Missing precondition")
    assert called_tools(gated.messages[:5]) == {"look"}


def test_no_false_block_when_the_session_already_meets_the_rule() -> None:
    no_login = Sequence_("t3", ["buy tea"], (Step(0, BUY),))
    gated = run_sequence(no_login, Shop(logged_in=True), rules=[BUY_RULE], gate_state={"session": {"logged_in": True}})
    assert gated.blocks == [] and gated.state == {"logged_in": True, "orders": ["tea"]}
    # blind (the session unknown): the same correct sequence is blocked
    blind = run_sequence(no_login, Shop(logged_in=True), rules=[BUY_RULE], gate_state={"session": {"logged_in": False}})
    assert len(blind.blocks) == 1


def test_a_model_that_does_not_know_the_missing_calls_arguments_gives_up() -> None:
    no_login = Sequence_("t4", ["buy tea"], (Step(0, BUY),))
    gated = run_sequence(no_login, Shop(), rules=[BUY_RULE], gate_state={"session": {"logged_in": False}})
    assert gated.unrecovered == 1 and gated.state == {"logged_in": False, "orders": []}


def test_authored_rule_precondition_carries_the_session_predicate() -> None:
    rule = AuthoredRule("L", "buy", "login", "logged_in", "src")
    assert rule.precondition() == ["login", {"state": {"path": "session.logged_in", "op": "eq", "value": False}}]
    assert AuthoredRule("L", "buy", "login", None, "src").precondition() == ["login"]


def test_traces_have_the_trace_shape() -> None:
    run = run_sequence(TRUTH, Shop())
    trace = make_trace("t1", run.messages, "success")
    assert (trace.id, trace.outcome) == ("t1", "success")
    assert called_tools(trace.messages) == {"look", "login", "buy"}


def _trace(id: str, names: list[str], outcome: Outcome | None = "success") -> Trace:
    seq = Sequence_(id, ["q"], tuple(Step(0, Call(n, {"item": "x"} if n == "buy" else {})) for n in names))
    return Trace(id, run_sequence(seq, Shop()).messages, outcome)


def test_library_miner_on_bench_traces_follows_the_spec_semantics() -> None:
    traces = [_trace(f"ok{i}", ["login", "buy", "look"]) for i in range(5)]
    [p] = mine_rules(traces, actions=["buy"])
    assert (p.action, p.precondition, p.support, p.confidence) == ("buy", "login", 5, 1.0)
    assert p.failures_without == 0 and p.examples == ("ok0", "ok1", "ok2", "ok3", "ok4")
    # a buy with no earlier login is a violation: confidence drops below the bar
    assert mine_rules([*traces, _trace("bad", ["buy"])], actions=["buy"], min_confidence=0.9) == []
    # failed traces never count for support, and say how often B ran without A
    [q] = mine_rules([*traces, _trace("fail", ["buy"], "failure")], actions=["buy"])
    assert q.support == 5 and q.failures_without == 1


def test_library_miner_on_bench_traces_prunes_transitive_rules() -> None:
    traces = [_trace(f"t{i}", ["look", "login", "buy"]) for i in range(5)]
    rules = {(p.precondition, p.action) for p in mine_rules(traces)}
    assert rules == {("look", "login"), ("login", "buy")}  # look -> buy is enforced through login


def test_missing_bfcl_prints_one_line_hint(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(compliance, "bfcl_installed", lambda: False)
    with pytest.raises(SystemExit) as exc:
        compliance.main([])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == INSTALL_HINT


# --- the BFCL pieces (need the bench extra) ---------------------------------------------------


@pytest.fixture
def bfcl() -> Any:
    pytest.importorskip("bfcl_eval")
    pytest.importorskip("mpmath")
    from bench import _bfcl

    return _bfcl


def test_ground_truth_calls_parse_and_bind_to_keyword_arguments(bfcl: Any) -> None:
    [task] = bfcl.load_tasks(limit=1)
    assert task.id == "multi_turn_base_0" and len(task.turns) == len(task.questions)
    sort = next(c for c in task.calls if c.name == "sort")
    assert sort.args == {"file_name": "final_report.pdf"} and sort.positional == ()


def test_the_real_vehicle_api_refuses_to_start_with_unlocked_doors(bfcl: Any) -> None:
    task = bfcl.Task("fixture", ["start"], [[]], {"VehicleControlAPI": {}}, ["VehicleControlAPI"],
                     {"startEngine": "VehicleControlAPI", "lockDoors": "VehicleControlAPI",
                      "pressBrakePedal": "VehicleControlAPI"})
    env = bfcl.Env(task)
    text, failed, precondition = env.call("startEngine", {"ignitionMode": "START"})
    assert failed and precondition and "doors must be locked" in text
    assert compliance.session_state(env.instances)["session"]["doors_locked"] is False
    env.call("lockDoors", {"unlock": False, "door": ["driver", "passenger", "rear_left", "rear_right"]})
    env.call("pressBrakePedal", {"pedalPosition": 1.0})
    assert env.call("startEngine", {"ignitionMode": "START"})[1] is False
    assert env.state()["VehicleControlAPI"]["engine_state"] == "running"


def test_evaluate_on_a_few_tasks_blocks_no_ground_truth_sequence(bfcl: Any) -> None:
    tasks = [t for t in bfcl.load_tasks() if "VehicleControlAPI" in t.involved_classes][:3]
    skills = [skill(r.action, r.precondition(), label=r.label) for r in compliance.RULES]
    rows, traces, _ = compliance.evaluate(tasks, compliance.rules_of(skills))
    by_name = {r.name: r for r in rows}
    truth = by_name["ground truth, session state"]
    assert (truth.sequences, truth.blocks, truth.errors_no_gate, truth.gt_state_gated) == (3, 0, 0, 3)
    perturbed = by_name["perturbed, session state"]
    assert perturbed.sequences > 0 and perturbed.errors_no_gate > 0 and perturbed.errors_gated == 0
    assert perturbed.caught == perturbed.seqs_errors_no_gate and perturbed.needless == perturbed.missed == 0
    assert [t.id for t in traces] == [t.id for t in tasks]
