"""Perturbations of tau-bench tasks for bench/tau_compliance.py: each breaks one clause of bench/policies/tau_*.yaml.

A perturbation targets the first ground-truth call of ``tool`` in a task and
breaks the clause named by ``clause`` (words of its message) in one of four
ways: ``data`` changes the shipped data before the run (the read the clause
looks at then shows the breach), ``args`` changes the call's arguments,
``drop`` leaves reads out until that call, ``repeat`` makes the same call again
right after it. ``data`` returns False, or ``args`` None, when the task has
nothing to break (it is then not counted).

Example:
    >>> _fake("gift_card_7359776")
    'gift_card_0000000'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bench._tau import Action, Task

Data = dict[str, Any]
ALLOWANCE = {"regular": {"basic_economy": 0, "economy": 1, "business": 2},
             "silver": {"basic_economy": 1, "economy": 2, "business": 3},
             "gold": {"basic_economy": 2, "economy": 3, "business": 3}}
"""Free checked bags per passenger (airline wiki.md, "Checked bag allowance")."""


@dataclass(frozen=True)
class Perturbation:
    tool: str
    clause: str
    how: str
    data: Callable[[Data, Action, Task], bool] | None = None
    args: Callable[[Data, Action, Task], dict[str, Any] | None] | None = None
    drop: frozenset[str] = frozenset()
    repeat: bool = False


def _fake(payment_id: str) -> str:
    """A payment id of the same kind that no profile holds."""
    return payment_id.rsplit("_", 1)[0] + "_0000000"


def _with(args: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    return {**args, **changes}


def _add_methods(kind: str, n: int) -> tuple[Callable[[Data, Action, Task], bool],
                                              Callable[[Data, Action, Task], dict[str, Any]]]:
    """Add ``n`` methods of ``kind`` to the booking user's profile, and pay with all of them too."""
    ids = [f"{kind}_900000{i}" for i in range(n)]

    def data(d: Data, a: Action, t: Task) -> bool:
        methods = d["users"][a.args["user_id"]]["payment_methods"]
        for pid in ids:
            methods[pid] = {"source": kind, "id": pid, **({"amount": 100} if kind != "credit_card" else {})}
        return True

    def args(d: Data, a: Action, t: Task) -> dict[str, Any]:
        extra = [{"payment_id": p, "amount": 0} for p in ids]
        return _with(a.args, payment_methods=[*a.args["payment_methods"], *extra])

    return data, args


def _reservation(d: Data, a: Action) -> dict[str, Any]:
    row: dict[str, Any] = d["reservations"][a.args["reservation_id"]]
    return row


def _not_owned(d: Data, a: Action, t: Task) -> bool:
    """The reservation is no longer in the task user's profile."""
    owned = d["users"][t.user_id]["reservations"]
    if a.args["reservation_id"] not in owned:
        return False
    owned.remove(a.args["reservation_id"])
    return True


def _late_economy(d: Data, a: Action, t: Task) -> bool:
    _reservation(d, a).update(created_at="2024-05-01T00:00:00", cabin="economy", insurance="no")
    return True


def _flown(d: Data, a: Action, t: Task) -> bool:
    _reservation(d, a)["flights"][0]["date"] = "2024-05-14"
    return True


def _basic_and_new_flights(d: Data, a: Action, t: Task) -> bool:
    res = _reservation(d, a)
    old = {(f["flight_number"], f["date"]) for f in res["flights"]}
    if old == {(f["flight_number"], f["date"]) for f in a.args["flights"]}:
        return False  # a cabin change only: allowed for basic economy too
    res["cabin"] = "basic_economy"
    return True


def _certificate(d: Data, a: Action, t: Task) -> bool:
    user = _reservation(d, a)["user_id"]
    d["users"][user]["payment_methods"]["certificate_9000000"] = {"source": "certificate", "amount": 500,
                                                                 "id": "certificate_9000000"}
    return True


def _fewer_bags_than_booked(d: Data, a: Action, t: Task) -> bool:
    _reservation(d, a)["total_baggages"] = a.args["total_baggages"] + 1
    return True


def _too_many_free_bags(d: Data, a: Action, t: Task) -> dict[str, Any]:
    membership = d["users"][a.args["user_id"]]["membership"]
    free = ALLOWANCE[membership][a.args["cabin"]] * len(a.args["passengers"])
    return _with(a.args, total_baggages=free + 1, nonfree_baggages=0)


def _no_compensation(d: Data, a: Action, t: Task) -> bool:
    user = d["users"][a.args["user_id"]]
    user["membership"] = "regular"
    for rid in user["reservations"]:
        d["reservations"][rid].update(insurance="no", cabin="economy")
    return True


AIRLINE = [
    Perturbation("book_reservation", "at most five passengers", "6 passengers",
                 args=lambda d, a, t: _with(a.args, passengers=[a.args["passengers"][0]] * 6)),
    Perturbation("book_reservation", "at most one travel certificate", "2 more certificates (in the profile)",
                 *_add_methods("certificate", 2)),
    Perturbation("book_reservation", "at most one credit card", "2 more credit cards (in the profile)",
                 *_add_methods("credit_card", 2)),
    Perturbation("book_reservation", "at most three gift cards", "4 more gift cards (in the profile)",
                 *_add_methods("gift_card", 4)),
    Perturbation("book_reservation", "already be in user profile", "a payment id not in the profile",
                 args=lambda d, a, t: _with(a.args, payment_methods=[
                     {**a.args["payment_methods"][0], "payment_id": _fake(a.args["payment_methods"][0]["payment_id"])},
                     *a.args["payment_methods"][1:]])),
    Perturbation("book_reservation", "Checked bag allowance", "one bag over the free allowance, none paid",
                 args=_too_many_free_bags),
    Perturbation("cancel_reservation", "obtain the user id", "the reservation is not in the user's profile",
                 data=_not_owned),
    Perturbation("cancel_reservation", "within 24 hours", "booked 2024-05-01, economy, no insurance",
                 data=_late_economy),
    Perturbation("cancel_reservation", "not flown", "first segment dated 2024-05-14", data=_flown),
    Perturbation("update_reservation_flights", "obtain the user id", "the reservation is not in the user's profile",
                 data=_not_owned),
    Perturbation("update_reservation_flights", "Basic economy flights cannot be modified (all",
                 "reservation made basic economy (tasks that change flights)", data=_basic_and_new_flights),
    Perturbation("update_reservation_flights", "one gift card or credit card",
                 "pay with a certificate (added to the profile)", data=_certificate,
                 args=lambda d, a, t: _with(a.args, payment_id="certificate_9000000")),
    Perturbation("update_reservation_flights", "already be in user profile", "a payment id not in the profile",
                 args=lambda d, a, t: _with(a.args, payment_id=_fake(a.args["payment_id"]))),
    Perturbation("update_reservation_baggages", "obtain the user id", "the reservation is not in the user's profile",
                 data=_not_owned),
    Perturbation("update_reservation_baggages", "add but not remove", "one bag fewer than booked",
                 data=_fewer_bags_than_booked),
    Perturbation("update_reservation_baggages", "already be in user profile", "a payment id not in the profile",
                 args=lambda d, a, t: _with(a.args, payment_id=_fake(a.args["payment_id"]))),
    Perturbation("update_reservation_passengers", "obtain the user id", "the reservation is not in the user's profile",
                 data=_not_owned),
    Perturbation("update_reservation_passengers", "number of passengers", "one passenger more",
                 args=lambda d, a, t: _with(a.args, passengers=[*a.args["passengers"], a.args["passengers"][0]])),
    Perturbation("send_certificate", "silver/gold member", "regular member, no reservation insured or business",
                 data=_no_compensation),
    Perturbation("send_certificate", "times the number of passengers", "amount + 1",
                 args=lambda d, a, t: _with(a.args, amount=a.args["amount"] + 1)),
]


def _order(d: Data, a: Action) -> dict[str, Any]:
    row: dict[str, Any] = d["orders"][a.args["order_id"]]
    return row


def _status(value: str) -> Callable[[Data, Action, Task], bool]:
    def change(d: Data, a: Action, t: Task) -> bool:
        _order(d, a)["status"] = value
        return True
    return change


def _order_not_owned(d: Data, a: Action, t: Task) -> bool:
    order = _order(d, a)
    d["users"][order["user_id"]]["orders"].remove(a.args["order_id"])
    return True


def _refund_card(d: Data, a: Action, t: Task) -> bool:
    user = _order(d, a)["user_id"]
    d["users"][user]["payment_methods"]["credit_card_9000000"] = {"source": "credit_card", "id": "credit_card_9000000"}
    return True


def _other_user(d: Data, a: Action, t: Task) -> dict[str, Any]:
    other = next(u for u in d["users"] if u != a.args["user_id"])
    return _with(a.args, user_id=other)


ORDER_WRITES = ("cancel_pending_order", "modify_pending_order_address", "modify_pending_order_items",
                "modify_pending_order_payment", "return_delivered_order_items", "exchange_delivered_order_items")
RETAIL = [
    *(Perturbation(tool, "find_user_id_by_email", "no user lookup", drop=frozenset({
        "find_user_id_by_email", "find_user_id_by_name_zip"})) for tool in ORDER_WRITES),
    Perturbation("modify_user_address", "via email", "another user's id", args=_other_user),
    *(Perturbation(tool, "if its status is 'pending'", "order status 'processed'", data=_status("processed"))
      for tool in ORDER_WRITES[:4]),
    *(Perturbation(tool, "if its status is 'delivered'", "order status 'processed'", data=_status("processed"))
      for tool in ORDER_WRITES[4:]),
    *(Perturbation(tool, "one user per conversation", "the order is not in the user's profile",
                   data=_order_not_owned) for tool in ORDER_WRITES),
    Perturbation("cancel_pending_order", "'no longer needed' or 'ordered by mistake'", "reason 'changed my mind'",
                 args=lambda d, a, t: _with(a.args, reason="changed my mind")),
    Perturbation("modify_pending_order_items", "if its status is 'pending'", "the same call again", repeat=True),
    Perturbation("exchange_delivered_order_items", "if its status is 'delivered'", "the same call again",
                 repeat=True),
    *(Perturbation(tool, "an available new item of the same product.", "an item id not in the order",
                   args=lambda d, a, t: _with(a.args, item_ids=["0000000000", *a.args["item_ids"][1:]]))
      for tool in ("modify_pending_order_items", "exchange_delivered_order_items")),
    Perturbation("return_delivered_order_items", "the list of items to be returned", "an item id not in the order",
                 args=lambda d, a, t: _with(a.args, item_ids=["0000000000", *a.args["item_ids"][1:]])),
    *(Perturbation(tool, "different product option", "one new item id fewer",
                   args=lambda d, a, t: _with(a.args, new_item_ids=a.args["new_item_ids"][:-1]))
      for tool in ("modify_pending_order_items", "exchange_delivered_order_items")),
    *(Perturbation(tool, "payment methods.", "a payment id not in the profile",
                   args=lambda d, a, t: _with(a.args, payment_method_id=_fake(a.args["payment_method_id"])))
      for tool in ("modify_pending_order_items", "modify_pending_order_payment", "return_delivered_order_items",
                   "exchange_delivered_order_items")),
    Perturbation("modify_pending_order_payment", "different from the original", "the original payment method",
                 args=lambda d, a, t: _with(a.args, payment_method_id=_order(d, a)["payment_history"][0][
                     "payment_method_id"])),
    Perturbation("return_delivered_order_items", "original payment method, or an existing gift card",
                 "refund to a credit card (added to the profile) that did not pay", data=_refund_card,
                 args=lambda d, a, t: _with(a.args, payment_method_id="credit_card_9000000")),
]

PERTURBATIONS = {"airline": AIRLINE, "retail": RETAIL}
