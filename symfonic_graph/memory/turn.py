"""TurnMemory: everything a turn reads from the graph, in one round trip.

Before the model runs, ``await memory.begin(scope)`` reads the tenant's catalog
version, the pending triggers of the scope and, only when the catalog moved
since the last turn, the tenant's skills. The snapshot then serves the three
questions of the turn without another query:

- ``snapshot.preflight(state)``: the cached, byte-stable pre-flight block;
- ``snapshot`` as a trigger source (``pending(scope)``) for
  ``ProspectiveTriggerCapability``;
- ``memory.get_active_skills`` for the gate: the skills of the scope's latest
  snapshot, so the rules the model was shown are the rules enforced.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symfonic_graph import telemetry
from symfonic_graph._store import GraphMemoryStore, positive_count
from symfonic_graph._store.packed import rows_of
from symfonic_graph.errors import StoreUnavailableError, ValidationError
from symfonic_graph.memory._catalog import COMPACT_JSON, Catalog, Compiler
from symfonic_graph.memory._coalesce import Coalescer
from symfonic_graph.memory._recheck import DEFAULT_RECHECK, edited, recheck_after
from symfonic_graph.memory._snapshot import Saved, SnapshotDir, guarded_by, name_guarded
from symfonic_graph.memory.triggers import PendingTrigger
from symfonic_graph.memory.turn_scope import ScopeFrom, scope_from_turn, scope_of
from symfonic_graph.rules.preflight import preflight_block
from symfonic_graph.rules.ruleset import RuleSet
from symfonic_graph.shape import _embedding
from symfonic_graph.shape._time import instant
from symfonic_graph.shape.contributions import PluginContribution
from symfonic_graph.shape.models import Skill
from symfonic_graph.shape.scope import MemoryScope

log = logging.getLogger("symfonic_graph.turn")

DEFAULT_MAX_AGE = 10.0
"""Seconds the gate's snapshot may be reused before the catalog version is read again (see ``TurnMemory``)."""
DEFAULT_OUTAGE_GRACE = 600.0
"""Seconds beyond ``max_age`` a scope's last catalog is still enforced while the store is down."""
DEFAULT_MAX_TRIGGERS = 100
"""Triggers a turn reads at most (those it may offer now), oldest first."""
_TORN_READS = 3  # reads when a concurrent re-seed was caught half applied
BIG_CATALOG = 250
"""Skills from which a scope's catalog is shipped in a query of its own, never in a shared batch."""
SNAPSHOT_REWRITE = 60.0
"""Seconds between two writes of a scope's snapshot file while its rules do not change."""


@dataclass(frozen=True, slots=True)
class TurnSnapshot:
    """What one turn read: the catalog version, the compiled skills and the pending triggers.

    ``skills`` is a :class:`~symfonic_graph.rules.ruleset.RuleSet`: iterating it
    yields the ``Skill`` objects, and the gate and pre-flight use its compiled
    rules. The tenant-wide part is one object shared by every cached scope of
    the tenant.

    Example:
        >>> snapshot = await memory.begin(MemoryScope("acme", "user-7"))
        >>> block = snapshot.preflight({"channel": "slack"})
    """

    scope: MemoryScope
    version: int | None
    skills: RuleSet
    triggers: tuple[PendingTrigger, ...]
    taken_at: float
    include_negative: bool = False
    stale: bool = False
    """True when the store was unavailable and these are the last rules read (see ``outage_grace``)."""

    def preflight(self, state: Mapping[str, Any] | None = None) -> PluginContribution | None:
        """The ``## ENFORCED PRE-FLIGHT RULES`` block of this turn, or None."""
        return preflight_block(self.skills, state, include_negative=self.include_negative)

    async def pending(self, scope: MemoryScope) -> list[PendingTrigger]:
        """Pending triggers, as a ``ProspectiveTriggerCapability`` source of this scope."""
        if scope != self.scope:
            log.error("turn snapshot of %s asked for triggers of %s; returning none", self.scope, scope)
            return []
        return list(self.triggers)


class TurnMemory:
    """One read per turn, with the tenant's skills cached by catalog version.

    The one lookup behind the gate, the pre-flight block and the LangGraph
    wiring. With ``begin()`` once per turn a change that bumps the catalog
    version (every library write, ``cypher run``, the documented seed
    pattern) is enforced from the next turn on; a gate-only wiring within
    ``max_age`` seconds; a plain-Cypher edit that does not bump the version
    within ``recheck_every`` seconds (logged at WARNING when found).

    Args:
        store: the graph store.
        max_age: seconds the snapshot the gate reuses may be old, after which
            the catalog version is read again (default 10). ``0`` reads on
            every call, the skills too.
        recheck_every: seconds after which a catalog whose version did not
            move is shipped again, to catch a plain-Cypher edit that did not
            bump it (default None: 300, or 0 when ``max_age`` is 0). Each
            scope's comes up to a quarter early, its own share, so scopes
            read together do not ship again together. Rows identical to the
            cached ones reuse their compiled rules; rows that differ are an
            un-bumped edit: a WARNING names the skills, and when tenant-wide
            skills changed every cached scope of the tenant reads them on
            its next turn.
        scope_from: how the lookups find a turn's scope (default
            :func:`~symfonic_graph.turn_scope.scope_from_turn`: the runtime
            context, then ``config["configurable"]``, then ``state["memory_scope"]``).
        include_negative: add the ``DO NOT`` sibling lines to the block.
        max_scopes: how many scopes' caches to keep (least recently used go).
        max_triggers: pending triggers a turn reads at most, oldest first
            (``doctor`` reports scopes holding more).
        coalesce_window: seconds within which concurrent ``begin()`` calls
            share one query. ``0``, the default, batches the calls made in
            the same event-loop iteration, which costs a lone turn about
            30 us and lets concurrent conversations share round trips; a
            longer window batches more but every turn waits for it (1 ms
            costs about 1.5 ms at c=1). ``None`` turns coalescing off: every
            call reads on its own. A scope whose catalog has ``BIG_CATALOG``
            (250) skills or more ships it in a query of its own, so that its
            neighbours' turns do not wait for it. No neighbour can fail or
            stall a turn: a batch runs under no caller's deadline, a caller
            waits for it at most about a second and then reads its own scope
            alone, under its own deadline (see ``_coalesce``).
        outage_grace: seconds beyond ``max_age`` for which, while the store
            is unavailable (``StoreUnavailableError``), ``begin()`` enforces
            the last catalog it read for the scope, with a WARNING and a
            guardrail record saying the rules are stale (default 600). Only
            a scope without such a catalog (in memory, or in ``snapshot_dir``)
            gets the outage error, and with it the gate's pass-through /
            strict policy. ``0`` keeps a catalog for ``max_age`` only.
        clock: the monotonic clock ``max_age`` and ``outage_grace`` are
            measured with (default ``time.monotonic``; tests pass a fake).
        snapshot_dir: a folder where the last catalog of each scope read is
            kept on local disk (default None: in memory only), so that a
            process started during an outage enforces it too, within the same
            ``max_age + outage_grace`` of when it was read (wall clock, across
            restarts). One JSON file per scope, named by a hash of (tenant,
            namespace), written atomically when the rules change (and at most
            once a minute while they do not), read only while the store is
            unavailable. A file that cannot be read is treated as absent, with
            a WARNING. Past the grace, the file still tells the gate which
            tools the scope's rules guarded (``strict="guarded"``).
        wall_clock: epoch seconds (default ``time.time``) a time trigger's due
            time, a snooze and an expiry are compared with: a turn reads only
            the triggers it may offer at ``wall_clock()`` (tests pass a fake).
        similarity: the cosine a turn's ``embedding`` (``begin``) must reach
            with a semantic trigger's for it to be offered (default 0.75).

    Example:
        >>> memory = TurnMemory(store)
        >>> snapshot = await memory.begin(MemoryScope("acme", "user-7"))
        >>> gate = create_precondition_gate_node(memory.get_active_skills)
    """

    def __init__(
        self,
        store: GraphMemoryStore,
        *,
        max_age: float = DEFAULT_MAX_AGE,
        scope_from: ScopeFrom | None = None,
        include_negative: bool = False,
        max_scopes: int = 10_000,
        max_triggers: int = DEFAULT_MAX_TRIGGERS,
        coalesce_window: float | None = 0.0,
        outage_grace: float = DEFAULT_OUTAGE_GRACE,
        clock: Callable[[], float] = time.monotonic,
        snapshot_dir: str | Path | None = None,
        recheck_every: float | None = None,
        wall_clock: Callable[[], float] = time.time,
        similarity: float = _embedding.DEFAULT_SIMILARITY,
    ) -> None:
        self.max_triggers = positive_count("max_triggers", max_triggers)
        self.similarity = _embedding.similarity("similarity", similarity)
        if coalesce_window is not None and (
            isinstance(coalesce_window, bool) or not isinstance(coalesce_window, (int, float))
            or not 0 <= coalesce_window <= 1
        ):
            raise ValidationError("coalesce_window", f"must be None or seconds from 0 to 1, got {coalesce_window!r}")
        self._coalescer = None if coalesce_window is None else Coalescer(self._read_many, window=coalesce_window)
        if isinstance(max_age, bool) or not isinstance(max_age, (int, float)) or not 0 <= max_age < float("inf"):
            raise ValidationError("max_age", f"must be a finite number of seconds >= 0, got {max_age!r}")
        if isinstance(outage_grace, bool) or not isinstance(outage_grace, (int, float)) or not (
            0 <= outage_grace < float("inf")
        ):
            raise ValidationError("outage_grace", f"must be a finite number of seconds >= 0, got {outage_grace!r}")
        if not callable(clock):
            raise ValidationError("clock", f"must be a () -> float callable, got {type(clock).__name__}")
        if recheck_every is None:
            recheck_every = DEFAULT_RECHECK if max_age > 0 else 0.0
        if isinstance(recheck_every, bool) or not isinstance(recheck_every, (int, float)) or not (
            0 <= recheck_every < float("inf")
        ):
            raise ValidationError("recheck_every", f"must be None or a finite number of seconds >= 0, "
                                  f"got {recheck_every!r}")
        self.store = store
        self.max_age = float(max_age)
        self.recheck_every = float(recheck_every)
        self.outage_grace = float(outage_grace)
        if not callable(wall_clock):
            raise ValidationError("wall_clock", f"must be a () -> float callable, got {type(wall_clock).__name__}")
        self.clock = clock
        self.wall_clock = wall_clock
        self.scope_from = scope_from or scope_from_turn()
        self.include_negative = include_negative
        self.max_scopes = max_scopes
        self._catalogs: OrderedDict[MemoryScope, Catalog] = OrderedDict()
        self._snapshots: OrderedDict[MemoryScope, TurnSnapshot] = OrderedDict()
        self._compiler = Compiler()
        self._disk = SnapshotDir(snapshot_dir) if snapshot_dir is not None else None
        self._written: OrderedDict[MemoryScope, tuple[RuleSet, float]] = OrderedDict()  # what each file holds
        self._loaded: OrderedDict[MemoryScope, Saved | None] = OrderedDict()  # files read in this outage
        self._saving: set[MemoryScope] = set()
        # Tenants whose first reads read the rows, never the packed text (invalidate()); None: every tenant.
        self._unpacked: set[str] | None = set()
        self._began = 0  # turns begun, in order
        self._stored: OrderedDict[MemoryScope, int] = OrderedDict()  # which begun turn stored each catalog

    @telemetry.traced_turn
    async def begin(self, scope: MemoryScope, *, embedding: Sequence[float] | None = None) -> TurnSnapshot:
        """Read this turn's memory in one query and remember it for the gate.

        ``embedding`` (of what the turn said, e.g. the last user message):
        the semantic triggers whose embedding reaches ``similarity`` with it
        are among the pending triggers; without it, none is.

        While Neo4j is unavailable, a scope whose last catalog is at most
        ``max_age + outage_grace`` seconds old gets that catalog again, in a
        snapshot marked ``stale`` (with a WARNING and a guardrail record).

        Every round trip of the turn (a re-read of moved or torn skills too)
        shares one ``query_timeout``.

        Raises:
            ScopeError: ``scope`` is not a usable scope.
            StoreUnavailableError: Neo4j did not answer, and no catalog of the
                scope is recent enough to enforce meanwhile; its ``guarded``
                names the tools the scope's rules guarded when last seen (None
                when never seen).
        """
        meaning = _embedding.meaning(embedding, self.similarity)  # a bad vector is refused before any read
        with self.store.deadline():
            return await self._begin(scope, meaning)

    async def _begin(self, scope: MemoryScope, meaning: Mapping[str, Any]) -> TurnSnapshot:
        scope = scope_of(scope, where="begin(scope)")
        now = self.clock()
        self._began += 1
        began = self._began  # what this turn read never replaces what a turn of the scope begun later stored
        cached = self._catalogs.get(scope)
        # A version read once may have met a write half applied (Neo4j applies a commit's records one by one
        # under readers that take no lock: the new version, then old skills): it is shipped again past
        # max_age, once, and trusted for recheck_every only when a second read finds the same version.
        period = recheck_after(self.recheck_every, scope) if cached is not None and cached.confirmed else self.max_age
        fresh = cached is not None and now - cached.fetched_at < period
        known = cached.version if cached is not None and fresh else None
        last = cached  # the catalog an outage falls back to
        # A first read may take the rows the last library write packed (max_age > 0, and no invalidate() of
        # the tenant: it says an edit left them behind); a re-read of a held version ships the rows themselves
        # (it checks what was read before, an edit without a bump included).
        packed = cached is None and self._packed_ok(scope.tenant_id)
        shipped = False
        for _ in range(_TORN_READS):
            try:
                row = await self._read(scope, known, meaning, packed)
            except StoreUnavailableError as exc:
                if self._stored.get(scope, 0) > began:  # a turn begun later read the store meanwhile
                    last = self._catalogs.get(scope, last)
                return self._last_rules(scope, last, now, exc)
            if not row["skills_fresh"] and cached is not None:
                break
            rows = row["skills"]
            if row.get("packed") is not None:
                # invalidate() while the read was under way (an edit the text does not hold) reads the rows too
                rows = rows_of(row["packed"], row["version"]) if self._packed_ok(scope.tenant_id) else None
                if rows is None:  # not of the version read, or not readable: ship the rows themselves
                    known, packed = None, False
                    continue
            cached, torn = self._compiler.catalog(scope, row["version"], rows, cached, now)
            shipped = True
            if not torn:
                break
            known, packed = None, False  # caught a re-seed half applied: read the rows again
        else:
            log.error("skills of %s still look torn after %d reads; using the last read "
                      "(run `symfonic-graph doctor`)", scope, _TORN_READS)
        telemetry.note_turn_read(row.get("query", "turn_snapshot"), skills_cached=not row["skills_fresh"])
        assert cached is not None
        triggers = self._compiler.pending(scope, row["triggers"])
        snapshot = TurnSnapshot(scope, row["version"], cached.skills, triggers, now, self.include_negative)
        if self._stored.get(scope, 0) > began:
            # A turn of this scope begun later stored what it read first (this read was slower: a batch held
            # by a neighbour, a retry): an older read never replaces the catalog and snapshot the gate decides
            # by. This turn still gets what it read.
            return snapshot
        _remember(self._stored, scope, began, self.max_scopes)
        if not shipped:  # the version was confirmed: an outage's grace counts from this read
            cached.read_at = now
        same_version = last is not None and row["version"] is not None and row["version"] == last.version
        if shipped:
            cached.confirmed = same_version
        if shipped and last is not None and cached.skills is not last.skills and same_version:
            self._unbumped(scope, last, cached)
        _remember(self._catalogs, scope, cached, self.max_scopes)
        _remember(self._snapshots, scope, snapshot, self.max_scopes)  # both before any await: stored together
        self._loaded.pop(scope, None)  # the store answers: a later outage reads the file afresh
        if self._disk is not None and scope not in self._saving:  # rewritten when changed, else once a minute
            await self._save(self._disk, scope, cached)
        return snapshot

    def _packed_ok(self, tenant_id: str) -> bool:
        """Whether the tenant's skills may come as the text the last library write packed (see ``invalidate``)."""
        return self.max_age > 0 and self._unpacked is not None and tenant_id not in self._unpacked

    def _unbumped(self, scope: MemoryScope, before: Catalog, after: Catalog) -> None:
        """A re-read found other skills under the same catalog version: an edit that did not bump it.

        Logged at WARNING with the skills that changed; when a tenant-wide one
        did, every cached scope of the tenant reads the skills on its next turn.
        """
        changed = edited(before.skills, after.skills)
        if not changed:
            return
        if not before.confirmed:  # the first read of the version may have met the write half applied
            log.info("skills of %s differ from the first read of catalog version %s: %s (a write half applied "
                     "when first read, or an edit without a version bump since)", scope, after.version,
                     ", ".join(i for i, _ in changed[:10]) + (" ..." if len(changed) > 10 else ""))
        else:
            self._warn_unbumped(scope, after, changed)
        if any(namespace is None for _, namespace in changed):
            self.invalidate(MemoryScope(scope.tenant_id))

    def _warn_unbumped(self, scope: MemoryScope, after: Catalog, changed: Sequence[tuple[str, str | None]]) -> None:
        log.warning("skills of %s changed without a catalog version bump (version %s): %s; bump the version "
                    "after every plain-Cypher edit (docs/graph-model.md), or turns see such an edit only "
                    "within recheck_every (%.0f s)", scope, after.version,
                    ", ".join(i for i, _ in changed[:10]) + (" ..." if len(changed) > 10 else ""),
                    self.recheck_every)

    def _last_rules(
        self, scope: MemoryScope, last: Catalog | None, now: float, exc: StoreUnavailableError
    ) -> TurnSnapshot:
        """The snapshot an outage leaves: the scope's last catalog while it is recent enough.

        The last catalog is the one held in memory or, when that is missing
        or too old, the snapshot file's (read once per outage).

        Raises:
            StoreUnavailableError: ``exc``, when no catalog is recent enough; its
                ``guarded`` names the tools the scope's rules guarded when last
                seen (None: never seen).
        """
        limit = self.max_age + self.outage_grace
        guarded = guarded_by(last.skills) if last is not None else None
        if self._disk is not None and (last is None or not now - last.read_at <= limit):
            saved = self._saved(self._disk, scope)
            read_at = now - (time.time() - saved.read_at) if saved is not None else -math.inf
            if saved is not None and (last is None or read_at > last.read_at):
                guarded = saved.guarded
                if saved.skills is not None:  # fetched_at -inf: the store's rows replace it on the next read
                    rules = RuleSet(saved.skills, pack=True)
                    last = Catalog(saved.version, -math.inf, rules, None, read_at)
                    if now - read_at <= limit:
                        _remember(self._catalogs, scope, last, self.max_scopes)
        age = now - (last.read_at if last is not None else -math.inf)
        if last is None or not age <= limit:
            raise name_guarded(exc, guarded)
        log.warning("store unavailable for %s (%s); enforcing the last rules read %.0fs ago (stale; "
                    "outage_grace %.0fs beyond max_age)", scope, exc, age, self.outage_grace)
        telemetry.note_stale_rules(age, str(exc))
        # no reminders meanwhile: the pending ones cannot be read, and old ones may have been done
        snapshot = TurnSnapshot(scope, last.version, last.skills, (), now, self.include_negative, stale=True)
        _remember(self._snapshots, scope, snapshot, self.max_scopes)
        return snapshot

    def _saved(self, disk: SnapshotDir, scope: MemoryScope) -> Saved | None:
        """The scope's snapshot file, read once per outage (absent and unreadable files too)."""
        if scope in self._loaded:
            return self._loaded[scope]
        saved = disk.load(scope)
        _remember(self._loaded, scope, saved, self.max_scopes)
        return saved

    async def _save(self, disk: SnapshotDir, scope: MemoryScope, catalog: Catalog) -> None:
        """Keep the scope's catalog on disk: when its rules changed, else at most every ``SNAPSHOT_REWRITE`` s.

        Written in a worker thread (about 3 ms for 20 skills, 110 ms for 2,000): the turn waits, the
        event loop does not; one write per scope at a time.
        """
        read_at = time.time() - (self.clock() - catalog.read_at)
        held = self._written.get(scope)
        if held is not None and held[0] is catalog.skills and read_at - held[1] < SNAPSHOT_REWRITE:
            return
        self._saving.add(scope)
        try:
            if await asyncio.to_thread(disk.save, scope, catalog.version, catalog.skills, read_at):
                _remember(self._written, scope, (catalog.skills, read_at), self.max_scopes)
        finally:
            self._saving.discard(scope)

    def invalidate(self, scope: MemoryScope | None = None) -> None:
        """Mark cached catalogs stale: the next ``begin()`` of each ships the skills again.

        ``invalidate()`` marks every scope; ``invalidate(MemoryScope("acme"))``
        every cached scope of tenant ``acme``, its namespaces included (they
        see the tenant-wide skills); ``invalidate(MemoryScope("acme", "u1"))``
        that scope only. For a process that learns of a change the catalog
        version does not show (a plain-Cypher edit that does not bump it) and
        will not wait ``recheck_every``. Rows identical to the cached ones still
        reuse their compiled rules; the gate's snapshot of the current turn
        is kept. From then on, the first reads of the marked tenants (of
        every tenant, for ``invalidate()``) read the rows themselves, never
        the text the last library write packed, which such an edit leaves
        behind.

        Example:
            >>> memory.invalidate(MemoryScope("acme"))
        """
        if scope is None:
            self._unpacked = None
        else:
            scope = scope_of(scope, where="invalidate(scope)")
            if self._unpacked is not None:
                self._unpacked.add(scope.tenant_id)
        for each, cached in list(self._catalogs.items()):
            if scope is None or each == scope or (
                scope.namespace is None and each.tenant_id == scope.tenant_id
            ):  # stale now; rows identical to its own still reuse its compiled rules
                self._catalogs[each] = dataclasses.replace(cached, fetched_at=-math.inf)

    async def warm_up(self, *, timeout: float = 120.0) -> None:
        """Have Neo4j plan the turn's queries now, so that no turn waits for it; call it as a process starts.

        Neo4j plans a query the first time it meets it and keeps the plan
        until it restarts. The turn's queries (a first read, a warm read, each
        with and without the semantic reminders) take about a second each to
        plan on a small idle server, more on a loaded one: time the first
        turns after a deployment or a Neo4j
        restart would otherwise spend within their ``query_timeout`` (the
        gate then passing through, as in an outage). Each runs once for a
        scope no tenant can hold (its id has a control character), so they
        read nothing; ``timeout`` bounds each instead of ``query_timeout``.

        Raises:
            StoreUnavailableError: Neo4j did not answer within ``timeout``.

        Example:
            >>> memory = TurnMemory(store)
            >>> await memory.warm_up()  # before the process serves turns
        """
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise ValidationError("timeout", f"must be a finite number of seconds > 0, got {timeout!r}")
        nobody = {"tenant_id": "\x07warm-up", "namespace": None}
        now = instant("wall_clock()", self.wall_clock())
        for name, known in (("turn_snapshot", None), ("turn_snapshot_warm", 0)):
            for suffix, vector in (("", None), ("_semantic", (1.0, 0.0))):
                entry = _entry(nobody, known, _embedding.meaning(vector, self.similarity), packed=True)
                await self.store.plan(name + suffix, {"scopes": [entry], "max_triggers": self.max_triggers,
                                                      "now": now}, timeout=float(timeout))

    async def _read(
        self, scope: MemoryScope, known: int | None, meaning: Mapping[str, Any], packed: bool,
    ) -> dict[str, Any]:
        params = _entry(scope.params(), known, meaning, packed=packed)
        cached = self._catalogs.get(scope)
        big = known is None and cached is not None and len(cached.skills) >= BIG_CATALOG
        if self._coalescer is not None and not big:  # a big catalog to ship would slow every scope of a batch
            return await self._coalescer.read(params)
        [row] = await self._read_many([params])
        return row

    async def _read_many(self, scopes: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """One row per entry of ``scopes``, in order, each naming the query that read it (``query``).

        When every entry has a cached version (the steady state), the smaller
        ``turn_snapshot_warm`` runs; the entries whose catalog moved are then
        read again with ``turn_snapshot``, which ships their skills. A batch
        where some entry carries the turn's embedding reads their
        ``_semantic`` forms, which offer the semantic triggers too (the others
        leave that part of the plan out: about a tenth of a warm read's server
        time).
        """
        with self.store.deadline():  # a batch runs in a context of its own: one query_timeout for it
            warm = all(entry["known_version"] is not None for entry in scopes)
            semantic = "_semantic" if any(entry["vector"] is not None for entry in scopes) else ""
            name = ("turn_snapshot_warm" if warm else "turn_snapshot") + semantic
            now = instant("wall_clock()", self.wall_clock())
            rows = await self.store.read(name, scopes=scopes, max_triggers=self.max_triggers, now=now)
            for row in rows:
                row["query"] = name
            moved = [i for i, row in enumerate(rows) if row["skills_fresh"]] if warm else []
            if moved:
                again = await self.store.read("turn_snapshot" + semantic, scopes=[scopes[i] for i in moved],
                                              max_triggers=self.max_triggers, now=now)
                for i, row in zip(moved, again, strict=True):
                    rows[i] = {**row, "query": "turn_snapshot" + semantic}
        for row in rows:  # what the coalescer weighs: a scope that ships a lot is read outside batches
            row["shipped"] = _shipped(row["skills"]) + _shipped(row["triggers"]) + len(row.get("packed") or "")
        return rows

    async def get_active_skills(self, state: Any) -> Sequence[Skill]:
        """The gate's lookup: the skills of this scope's snapshot, read again when older than ``max_age``.

        Raises:
            ScopeError: the turn has no usable scope (see ``scope_from``).
        """
        return (await self.gate_snapshot(self.scope_from(state))).skills

    async def gate_snapshot(self, scope: MemoryScope) -> TurnSnapshot:
        """The snapshot the gate decides by: the scope's last one, read again when older than ``max_age``."""
        snapshot = self._snapshots.get(scope)
        if snapshot is None or self.clock() - snapshot.taken_at >= self.max_age:
            snapshot = await self.begin(scope)
        return snapshot


def _entry(
    scope: Mapping[str, Any], known: int | None, meaning: Mapping[str, Any], *, packed: bool,
) -> dict[str, Any]:
    """A scope's entry of the turn queries' ``$scopes``: the one shape every turn read, and ``warm_up``, send.

    ``packed``: a first read, whose skills may come as the text the last library write packed (as a held
    version that moved may).
    """
    return {**scope, "known_version": known, "write_id": None, "include_drafts": False, "include_retracted": False,
            "packed": packed, **meaning}


def _shipped(rows: list[Any]) -> int:
    """The size of shipped rows (skills, triggers): their length as JSON text (encoded in C, a few times
    cheaper than walking them), or their characters of text when a value is not plain JSON."""
    if not rows:
        return 0
    try:
        return len(COMPACT_JSON.encode(rows))
    except (TypeError, ValueError):
        return _chars(rows)


def _chars(value: Any, depth: int = 0) -> int:
    """Characters of text in a shipped value (strings in maps and lists; other values count 8)."""
    if isinstance(value, str):
        return len(value)
    if depth > 6:
        return 8
    if isinstance(value, Mapping):
        return sum(_chars(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_chars(v, depth + 1) for v in value)
    return 8


def _remember(cache: OrderedDict[MemoryScope, Any], scope: MemoryScope, value: Any, limit: int) -> None:
    cache[scope] = value
    cache.move_to_end(scope)
    while len(cache) > limit:
        cache.popitem(last=False)
