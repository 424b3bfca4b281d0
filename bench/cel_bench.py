"""Two CEL runtimes side by side: ``common-expression-language`` (module ``cel``, Rust core) and ``cel-python``
(module ``celpy``, pure Python).

For a few policy-like expressions over a tau-bench airline reservation and user profile, prints:

- compile: µs to parse and check one expression (the catalog pays it once per rule);
- convert: µs to turn the Python activation (``args``, ``result``, ``now``) into the runtime's values
  (``celpy.json_to_cel``; ``cel`` converts inside ``execute``, so its figure is ``execute`` on the same
  expression over a small and over a full activation, the difference being the conversion);
- evaluate: µs per evaluation of a compiled expression (``cel``: ``Program.execute(dict)``, conversion
  included; ``celpy``: ``Runner.evaluate`` over an activation converted beforehand, and with conversion);
- how each behaves on errors (missing field, wrong type, no such overload, int beside double) and on a
  timestamp string without a zone (tau-bench's ``created_at`` is one: "2024-05-02T03:10:19");
- each package's version and its dependencies as installed.

Needs both packages (``pip install common-expression-language cel-python``). Run:
    python -m bench.cel_bench
    python -m bench.cel_bench --repeat 2000
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

import cel
import celpy
from celpy import celtypes

NOW = dt.datetime(2024, 5, 15, 15, 0, tzinfo=dt.UTC)

RESERVATION: dict[str, Any] = {
    "reservation_id": "4WQ150", "user_id": "chen_jackson_3290", "origin": "DFW", "destination": "LAX",
    "flight_type": "round_trip", "cabin": "economy",
    "flights": [
        {"origin": "DFW", "destination": "LAX", "flight_number": "HAT170", "date": "2024-05-22", "price": 883},
        {"origin": "LAX", "destination": "DFW", "flight_number": "HAT022", "date": "2024-05-26", "price": 779},
    ],
    "passengers": [
        {"first_name": "Chen", "last_name": "Jackson", "dob": "1956-07-07"},
        {"first_name": "Raj", "last_name": "Smith", "dob": "1967-04-01"},
        {"first_name": "Fatima", "last_name": "Martin", "dob": "1970-01-20"},
    ],
    "payment_history": [{"payment_id": "gift_card_3576581", "amount": 4986}],
    "created_at": "2024-05-15T03:10:19Z", "total_baggages": 5, "nonfree_baggages": 0, "insurance": "no",
}
USER: dict[str, Any] = {
    "name": {"first_name": "Mia", "last_name": "Li"},
    "address": {"address1": "975 Sunset Drive", "address2": "Suite 217", "city": "Austin", "country": "USA",
                "state": "TX", "zip": "78750"},
    "email": "mia.li3818@example.com", "dob": "1990-04-05",
    "payment_methods": {
        "credit_card_4421486": {"source": "credit_card", "brand": "visa", "last_four": "7447",
                                "id": "credit_card_4421486"},
        "certificate_4856383": {"source": "certificate", "amount": 100, "id": "certificate_4856383"},
        "certificate_7504069": {"source": "certificate", "amount": 250, "id": "certificate_7504069"},
        "credit_card_1955700": {"source": "credit_card", "brand": "visa", "last_four": "1907",
                                "id": "credit_card_1955700"},
    },
    "saved_passengers": [{"first_name": "Amelia", "last_name": "Ahmed", "dob": "1957-03-21"}],
    "membership": "gold", "reservations": ["NO6JO3", "AIXC49", "HKEG34"],
}
BOOK_ARGS: dict[str, Any] = {
    "user_id": "mia_li_3668", "origin": "JFK", "destination": "SEA", "flight_type": "one_way", "cabin": "economy",
    "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}],
    "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
    "payment_methods": [{"payment_id": "certificate_7504069", "amount": 250},
                        {"payment_id": "credit_card_4421486", "amount": 5}],
    "total_baggages": 1, "nonfree_baggages": 0, "insurance": "no",
}

# (name, expression, activation): what a fact's `where` or a check would say.
EXPRESSIONS: list[tuple[str, str, dict[str, Any]]] = [
    ("cancel eligibility (fact)",
     'result.cabin == "business" || timestamp(result.created_at) > now - duration("24h")',
     {"result": RESERVATION, "now": NOW, "args": {"reservation_id": "4WQ150"}}),
    ("at most five passengers (check)", "args.passengers.size() <= 5", {"args": BOOK_ARGS, "now": NOW}),
    ("pay from the profile (fact)", "args.payment_methods.all(p, p.payment_id in result.payment_methods)",
     {"args": BOOK_ARGS, "result": USER, "now": NOW}),
    ("at most one certificate (check)",
     'args.payment_methods.filter(p, p.payment_id.startsWith("certificate_")).size() <= 1',
     {"args": BOOK_ARGS, "now": NOW}),
    ("no flown segment (fact)", 'result.flights.all(f, timestamp(f.date + "T00:00:00Z") > now)',
     {"result": RESERVATION, "now": NOW}),
]

# (what, expression, activation): how each runtime fails.
ERROR_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("missing field", 'result.cabin == "business"', {"result": {"reservation_id": "X"}}),
    ("has() on a missing field", "has(result.cabin)", {"result": {"reservation_id": "X"}}),
    ("field of a string result", 'result.cabin == "business"', {"result": "Error: reservation not found"}),
    ("size() of an int", "args.passengers.size() <= 5", {"args": {"passengers": 5}}),
    ("string == int", "result.cabin == 3", {"result": {"cabin": "business"}}),
    ("int + string", 'args.n + "x"', {"args": {"n": 1}}),
    ("int > double", "args.amount > 100.5", {"args": {"amount": 200}}),
    ("int == double", "args.amount == 200.0", {"args": {"amount": 200}}),
    ("null field", "result.insurance.size() > 0", {"result": {"insurance": None}}),
    ("syntax error", 'result.cabin ==', {}),
    ("zone-less timestamp", 'timestamp(result.created_at) > now - duration("24h")',
     {"result": {"created_at": "2024-05-15T03:10:19"}, "now": NOW}),
    ("timestamp with offset", 'timestamp(result.created_at) > now - duration("24h")',
     {"result": {"created_at": "2024-05-15T03:10:19+02:00"}, "now": NOW}),
    ("integer beyond int64", "args.n > 0", {"args": {"n": 2**70}}),
]

_ZONELESS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?")


def with_utc(value: Any) -> Any:
    """A copy of ``value`` with every zone-less ISO timestamp string given a ``Z`` (a workaround ``cel`` needs)."""
    if isinstance(value, str):
        return value + "Z" if _ZONELESS.fullmatch(value) else value
    if isinstance(value, dict):
        return {k: with_utc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [with_utc(v) for v in value]
    return value


def per_call_us(fn: Callable[[], Any], repeat: int) -> float:
    """Best of 5 runs of ``repeat`` calls, µs per call."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter_ns() - start) / repeat / 1000)
    return best


def celpy_activation(activation: dict[str, Any]) -> dict[str, Any]:
    return {k: celtypes.TimestampType(v) if isinstance(v, dt.datetime) else celpy.json_to_cel(v)
            for k, v in activation.items()}


_ENV = celpy.Environment()


def celpy_program(src: str) -> Any:
    return _ENV.program(_ENV.compile(src))


def outcome(fn: Callable[[], Any]) -> str:
    try:
        value = fn()
    except Exception as exc:
        text = str(exc).replace("\n", " ")
        return f"raises {type(exc).__name__}: {text[:90]}"
    return f"= {value!r}"[:100]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1000)
    opts = parser.parse_args()
    n = opts.repeat

    for dist in ("common-expression-language", "cel-python"):
        md = metadata.metadata(dist)
        requires = ", ".join(sorted({r.split(";")[0].split(" ")[0].split(">")[0].split("=")[0]
                                     for r in (metadata.requires(dist) or []) if "extra" not in r}))
        print(f"{dist} {md['Version']}: requires {requires or '(nothing)'}")
    print()

    print(f"{'expression':34} {'compile µs':>21} {'convert µs':>12} {'evaluate µs':>33}")
    print(f"{'':34} {'cel':>10} {'celpy':>10} {'celpy':>12} {'cel':>10} {'celpy':>10} {'celpy+conv':>11}")
    totals = [0.0] * 5
    for name, src, activation in EXPRESSIONS:
        prog = cel.compile(src)
        runner = celpy_program(src)
        converted = celpy_activation(activation)
        want = prog.execute(activation)
        got = runner.evaluate(converted)
        assert bool(got) == want, (name, want, got)
        row = [
            per_call_us(lambda src=src: cel.compile(src), n),
            per_call_us(lambda src=src: celpy_program(src), max(n // 10, 10)),
            per_call_us(lambda a=activation: celpy_activation(a), n),
            per_call_us(lambda p=prog, a=activation: p.execute(a), n),
            per_call_us(lambda r=runner, c=converted: r.evaluate(c), n),
        ]
        totals = [t + v for t, v in zip(totals, row, strict=True)]
        print(f"{name:34} {row[0]:10.1f} {row[1]:10.1f} {row[2]:12.1f} {row[3]:10.1f} {row[4]:10.1f}"
              f" {row[2] + row[4]:11.1f}")
    print(f"{'sum of the five':34} {totals[0]:10.1f} {totals[1]:10.1f} {totals[2]:12.1f} {totals[3]:10.1f}"
          f" {totals[4]:10.1f} {totals[2] + totals[4]:11.1f}")
    print()

    small = cel.compile("args.passengers.size() <= 5")
    tiny_args = {"args": {"passengers": [1]}}
    full = {"args": BOOK_ARGS, "result": USER, "state": {}, "now": NOW}
    t_small = per_call_us(lambda: small.execute(tiny_args), n)
    t_full = per_call_us(lambda: small.execute(full), n)
    ctx = cel.Context(full)
    t_ctx_build = per_call_us(lambda: cel.Context(full), n)
    t_ctx = per_call_us(lambda: small.execute(ctx), n)
    print("cel activation conversion (execute converts every variable handed to it):")
    print(f"  one-field activation {t_small:.1f} µs, full activation (args + user profile) {t_full:.1f} µs:"
          f" conversion ~{t_full - t_small:.1f} µs")
    print(f"  cel.Context(full) built once {t_ctx_build:.1f} µs, then execute(ctx) {t_ctx:.1f} µs")
    reused = cel.Context({"result": USER, "now": NOW})
    t_add_args = per_call_us(lambda: reused.add_variable("args", BOOK_ARGS), n)
    profile = cel.compile("args.payment_methods.all(p, p.payment_id in result.payment_methods)")
    t_reused = per_call_us(lambda: profile.execute(reused), n)
    print(f"  a Context holding the profile, args added per call: add_variable(args) {t_add_args:.1f} µs,"
          f" 'pay from the profile' on it {t_reused:.1f} µs")
    asked: list[str] = []

    def resolve(name: str) -> Any:
        asked.append(name)
        return full.get(name)

    lazy = cel.Context()
    lazy.set_variable_resolver(resolve)
    small.execute(lazy)
    print(f"  a variable resolver is asked only for the names used: {sorted(set(asked))}")
    t_fix = per_call_us(lambda: with_utc(RESERVATION), n)
    print(f"  with_utc(reservation) (zone-less timestamps -> 'Z', a workaround cel needs) {t_fix:.1f} µs")
    print()

    print("errors and edge cases:")
    for what, src, activation in ERROR_CASES:
        print(f"  {what}: {src}")
        print(f"    cel   {outcome(lambda s=src, a=activation: cel.compile(s).execute(a))}")
        print(f"    celpy {outcome(lambda s=src, a=activation: celpy_program(s).evaluate(celpy_activation(a)))}")
    zoneless = {"result": {"created_at": "2024-05-15T03:10:19"}, "now": NOW}
    src = 'timestamp(result.created_at) > now - duration("24h")'
    fixed = outcome(lambda: cel.compile(src).execute(with_utc(zoneless)))
    print(f"  zone-less timestamp through with_utc: cel {fixed}")


if __name__ == "__main__":
    main()
