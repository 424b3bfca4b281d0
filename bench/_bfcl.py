"""The Berkeley Function Calling Leaderboard's multi-turn data, read and executed for bench/compliance.py.

Needs the optional ``bench`` extra (``pip install --no-deps bfcl-eval==2026.3.23 mpmath``);
without it, bench.compliance prints :data:`INSTALL_HINT` and exits 2.

A task's ground truth is a list of turns, each a list of Python call strings
(``"cd(folder='document')"``). :func:`parse_call` reads one with ``ast`` (never
``eval``) and :class:`Env` runs calls on fresh instances of the task's API
classes, loaded with the task's ``initial_config`` as BFCL itself does.

Example:
    >>> parse_call("mv(source='a', destination='b')")
    Call(name='mv', args={'source': 'a', 'destination': 'b'}, positional=())
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACKAGE = "bfcl-eval==2026.3.23"
INSTALL_HINT = f"bench.compliance needs bfcl-eval and mpmath (the bench extra): pip install --no-deps {PACKAGE} mpmath"
DATASET = "BFCL_v4_multi_turn_base.json"
# The classes of the multi-turn categories (the package's other backends import heavy dependencies).
MULTI_TURN_CLASSES = (
    "GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot", "TravelAPI",
    "VehicleControlAPI",
)

# How the API classes report a precondition that was not met (read from their source):
# everything else they return with an "error" key is an ordinary failure (not found, bad value...).
PRECONDITION_ERRORS = (
    "not authenticated",  # TwitterAPI, TicketAPI, TradingBot
    "no user is currently logged in",  # MessageAPI
    "doors must be locked before starting",  # VehicleControlAPI.startEngine
    "brake pedal needs to be pressed",  # VehicleControlAPI.startEngine
    "must press the brake fully",  # VehicleControlAPI.startEngine
    "start the engine before",  # VehicleControlAPI.setCruiseControl
    "token not initialized",  # TravelAPI
    "token expired",  # TravelAPI
    "invalid access token",  # TravelAPI: a token other than the one the last authenticate_travel returned
)


def bfcl_installed() -> bool:
    """Whether bfcl-eval and mpmath (the ``bench`` extra) can be imported."""
    try:
        importlib.import_module("bfcl_eval.constants.executable_backend_config")
        importlib.import_module("mpmath")
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Call:
    """One tool call: its name and keyword arguments (``positional`` until bound to a signature)."""

    name: str
    args: dict[str, Any]
    positional: tuple[Any, ...] = ()


def parse_call(source: str) -> Call:
    """One ground-truth call string as a :class:`Call` (literal arguments only).

    Example:
        >>> parse_call("sort('report.pdf')")
        Call(name='sort', args={}, positional=('report.pdf',))
    """
    node = ast.parse(source.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {source!r}")
    args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
    return Call(node.func.id, args, tuple(ast.literal_eval(a) for a in node.args))


@dataclass
class Task:
    """One multi-turn task: its ground truth (turns of calls, bound to keyword arguments) and its setup."""

    id: str
    questions: list[str]
    turns: list[list[Call]]
    initial_config: dict[str, Any]
    involved_classes: list[str]
    tools: dict[str, str] = field(default_factory=dict)  # tool name -> class name

    @property
    def calls(self) -> list[Call]:
        """The ground truth as one flat sequence."""
        return [call for turn in self.turns for call in turn]


def data_dir() -> Path:
    import bfcl_eval

    return Path(bfcl_eval.__file__).parent / "data"


def _classes() -> dict[str, type]:
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    return {name: getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name) for name in MULTI_TURN_CLASSES}


def _public_methods(cls: type) -> dict[str, Any]:
    return {n: m for n, m in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}


def bind(call: Call, function: Any) -> Call:
    """``call`` with its positional arguments named after ``function``'s parameters."""
    if not call.positional:
        return call
    bound = inspect.signature(function).bind_partial(None, *call.positional, **call.args)
    args = {k: v for k, v in bound.arguments.items() if k != "self"}
    return Call(call.name, args)


def load_tasks(limit: int | None = None) -> list[Task]:
    """The multi-turn base tasks with their ground truth, in file order."""
    root = data_dir()
    with (root / "possible_answer" / DATASET).open() as f:
        truth = {e["id"]: e["ground_truth"] for e in map(json.loads, f)}
    classes = _classes()
    tasks = []
    with (root / DATASET).open() as f:
        for entry in map(json.loads, f):
            tools = {n: c for c in entry["involved_classes"] for n in _public_methods(classes[c])}
            methods = {n: _public_methods(classes[c])[n] for n, c in tools.items()}
            turns = [[bind(parse_call(s), methods[parse_call(s).name]) for s in turn] for turn in truth[entry["id"]]]
            questions = [" ".join(m["content"] for m in turn if m.get("role") == "user") for turn in entry["question"]]
            tasks.append(Task(entry["id"], questions, turns, entry["initial_config"], entry["involved_classes"], tools))
            if limit is not None and len(tasks) >= limit:
                break
    return tasks


def is_error(result: object) -> bool:
    """Whether an API result reports a failure (an ``error`` key, or an ``Error...`` string)."""
    if isinstance(result, Mapping):
        return "error" in result
    if isinstance(result, list) and result:
        return is_error(result[0])
    return isinstance(result, str) and result.lower().startswith("error")


def is_precondition_error(result: object) -> bool:
    """Whether a failure is one of the preconditions the API classes enforce."""
    return is_error(result) and any(p in str(result).lower() for p in PRECONDITION_ERRORS)


class Env:
    """Fresh instances of a task's API classes, loaded with its ``initial_config``.

    Example:
        >>> env = Env(task)  # doctest: +SKIP
        >>> env.call("startEngine", {"ignitionMode": "START"})  # doctest: +SKIP
        ('{"error": "All doors must be locked before starting the engine. ..."}', True, True)
    """

    def __init__(self, task: Task) -> None:
        from bfcl_eval.constants.executable_backend_config import STATELESS_CLASSES

        classes = _classes()
        self.instances: dict[str, Any] = {}
        for name in task.involved_classes:
            instance = classes[name]()
            if name not in STATELESS_CLASSES:
                instance._load_scenario(copy.deepcopy(task.initial_config.get(name, {})), long_context=False)
            self.instances[name] = instance
        self.tools = task.tools

    def call(self, name: str, args: Mapping[str, Any]) -> tuple[str, bool, bool]:
        """Run one call: ``(result text, failed, failed on a precondition)``."""
        instance = self.instances.get(self.tools.get(name, ""))
        if instance is None:
            return f"Error: no tool {name!r}", True, False
        try:
            result = getattr(instance, name)(**copy.deepcopy(dict(args)))
        except Exception as exc:  # the API classes raise on bad input; BFCL reports it the same way
            return f"Error during execution: {exc}", True, False
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        return text, is_error(result), is_precondition_error(result)

    def state(self) -> dict[str, dict[str, Any]]:
        """Each instance's public attributes, the state BFCL's own checker compares."""
        return {
            name: {k: copy.deepcopy(v) for k, v in vars(inst).items() if not k.startswith("_")}
            for name, inst in self.instances.items()
        }


def iter_calls(task: Task) -> Iterator[tuple[int, Call]]:
    """``(turn index, call)`` over the ground truth."""
    for t, turn in enumerate(task.turns):
        for call in turn:
            yield t, call
