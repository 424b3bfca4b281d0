"""tau-bench's airline and retail domains, read and executed for bench/tau_compliance.py.

The data (``shared/tau-bench``, MIT) is found through ``SYMFONIC_TAU_BENCH`` or
``../shared/tau-bench`` beside the repository; nothing of it is copied here.
The tools (``tau_bench/envs/<domain>/tools/*.py``) are imported from there by
path and need only the standard library. The task files import
``tau_bench.types`` (pydantic models); a two-class stand-in is registered under
that name instead, so no dependency is needed. ``envs/<domain>/__init__.py``
imports the LLM user simulator, which is not shipped: the domain packages are
registered without running it.

Each run gets its own copy of the data: a table row is deep-copied the first
time a tool reads it by key, so a run's writes never reach the shipped data
(the tools that scan a whole table only read it).

Example:
    >>> table = Table({"a": {"n": 1}})
    >>> table["a"]["n"] = 2
    >>> table["a"]["n"], table.base["a"]["n"]
    (2, 1)
"""

from __future__ import annotations

import copy
import gzip
import importlib
import json
import os
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_VAR = "SYMFONIC_TAU_BENCH"
DOMAINS = ("airline", "retail")
TABLES = {"airline": ("flights", "reservations", "users"), "retail": ("orders", "products", "users")}
TASK_FILES = {"airline": (("tasks_test", "TASKS"),),
              "retail": (("tasks_test", "TASKS_TEST"), ("tasks_dev", "TASKS_DEV"), ("tasks_train", "TASKS_TRAIN"))}
WRITES = {
    "airline": ("book_reservation", "cancel_reservation", "update_reservation_flights", "update_reservation_baggages",
                "update_reservation_passengers", "send_certificate"),
    "retail": ("cancel_pending_order", "modify_pending_order_address", "modify_pending_order_items",
               "modify_pending_order_payment", "modify_user_address", "return_delivered_order_items",
               "exchange_delivered_order_items"),
}
"""The tools that write, per domain (the guarded tools: one skill each in bench/policies/tau_<domain>.yaml)."""


def tau_bench_root(repo: Path | None = None) -> Path | None:
    """Where tau-bench is: ``$SYMFONIC_TAU_BENCH``, else ``../shared/tau-bench`` beside the repository, or None."""
    repo = repo or Path(__file__).resolve().parents[1]
    env = os.environ.get(ENV_VAR)
    root = Path(env) if env else repo.parent / "shared" / "tau-bench"
    return root if (root / "tau_bench" / "envs" / "airline" / "tools").is_dir() else None


class Table(dict):  # type: ignore[type-arg]
    """One table of the shipped data; a row is deep-copied the first time it is read by key."""

    def __init__(self, base: Mapping[str, Any]) -> None:
        super().__init__()
        self.base = base

    def __getitem__(self, key: str) -> Any:
        if not dict.__contains__(self, key):
            dict.__setitem__(self, key, copy.deepcopy(self.base[key]))
        return dict.__getitem__(self, key)

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self.base

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self:
            return default
        return self[key]

    def __iter__(self) -> Iterator[str]:
        yield from self.base
        yield from (k for k in dict.keys(self) if k not in self.base)

    def __len__(self) -> int:
        return len(self.base) + sum(1 for k in dict.keys(self) if k not in self.base)

    def keys(self) -> Any:
        return list(self)

    def items(self) -> Any:  # a scan reads (copied rows where a run wrote, else the shipped ones)
        return [(k, dict.__getitem__(self, k) if dict.__contains__(self, k) else self.base[k]) for k in self]

    def values(self) -> Any:
        return [v for _, v in self.items()]


@dataclass(frozen=True)
class Action:
    """One tool call: its name and arguments."""

    name: str
    args: Mapping[str, Any]


@dataclass(frozen=True)
class Task:
    """A tau-bench task: its id (``<file>:<index>``), user, instruction and ground-truth actions."""

    id: str
    user_id: str
    instruction: str
    actions: tuple[Action, ...]


@dataclass
class Domain:
    """A domain's tools (name -> ``invoke(data, **args)``), tasks and shipped data."""

    name: str
    tools: dict[str, Callable[..., str]]
    tasks: list[Task]
    shipped: dict[str, Any]

    def data(self) -> dict[str, Table]:
        """A fresh copy of the data for one run."""
        return {name: Table(rows) for name, rows in self.shipped.items()}

    def call(self, data: Mapping[str, Any], action: Action) -> tuple[str, bool]:
        """Run ``action`` on ``data``: (the tool's text, whether it failed)."""
        tool = self.tools.get(action.name)
        if tool is None:
            return f"Error: unknown tool {action.name}", True
        try:
            text = tool(data, **action.args)
        except Exception as exc:  # a tool that raises (bad arguments) is a failed call, as tau-bench's env says
            return f"Error: {exc}", True
        text = "" if text is None else str(text)
        return text, text.startswith("Error")


class _Record:
    """Stand-in for tau_bench.types.Task and Action (pydantic models): keeps the keyword arguments."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _register(root: Path) -> None:
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    stand_in = types.ModuleType("tau_bench.types")
    stand_in.Task = stand_in.Action = _Record  # type: ignore[attr-defined]
    sys.modules.setdefault("tau_bench.types", stand_in)
    for domain in DOMAINS:  # the package without its __init__ (which imports the user simulator)
        name = f"tau_bench.envs.{domain}"
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(root / "tau_bench" / "envs" / domain)]
            sys.modules[name] = package


def load_domain(root: Path, name: str) -> Domain:
    """The domain ``name`` of the tau-bench copy at ``root``."""
    _register(root)
    module = importlib.import_module(f"tau_bench.envs.{name}.tools")
    tools = {cls.get_info()["function"]["name"]: cls.invoke for cls in module.ALL_TOOLS}
    tasks = []
    for file, attr in TASK_FILES[name]:
        raw = getattr(importlib.import_module(f"tau_bench.envs.{name}.{file}"), attr)
        tasks += [Task(f"{file}:{i}", t.user_id, t.instruction,
                       tuple(Action(a.name, dict(a.kwargs)) for a in t.actions)) for i, t in enumerate(raw)]
    folder = root / "tau_bench" / "envs" / name / "data"
    shipped = {}
    for table in TABLES[name]:
        with gzip.open(folder / f"{table}.json.gz", "rt", encoding="utf-8") as fh:
            shipped[table] = json.load(fh)
    return Domain(name, tools, tasks, shipped)
