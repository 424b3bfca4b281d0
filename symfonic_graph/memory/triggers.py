"""Prospective triggers: pending reminders offered to the turn.

A turn reads the scope's pending triggers from a source, asks a
deployment-supplied evaluator whether each condition holds for the turn's cue,
and offers the tasks of the selected ones as one dynamic prompt contribution.

Selection is not acknowledgement: the capability never writes, so a selected
trigger stays pending and is selected again on every later matching turn until
the deployment calls ``ProspectiveLayer.resolve_trigger``. There is no expiry
and no rate limit. Selection is not delivery either: prompt assembly (see
``symfonic_graph.composition``) may still drop the block, e.g. over a budget.

Example:
    >>> capability = ProspectiveTriggerCapability(
    ...     GraphPendingTriggers(store),
    ...     evaluator=lambda condition, cue: condition.lower() in cue.lower(),
    ...     scope=MemoryScope("acme", "user-42"))
    >>> [c.content for c in await capability.contribute(request)]
    ['## PENDING REMINDERS\\n- Tell them the invoice is overdue.']
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from symfonic_graph import telemetry
from symfonic_graph._store import GraphMemoryStore, positive_count
from symfonic_graph.errors import ValidationError
from symfonic_graph.memory._isolation import keep_visible
from symfonic_graph.memory.layers.prospective import ProspectiveLayer
from symfonic_graph.rules.events import CallResult
from symfonic_graph.shape._embedding import DEFAULT_SIMILARITY, vector
from symfonic_graph.shape._embedding import similarity as similarity_of
from symfonic_graph.shape.contributions import GrantEffects, PluginContribution
from symfonic_graph.shape.expressions import ExpressionError, Scope, bindable, compile_expression, evaluate_bool
from symfonic_graph.shape.models import Trigger
from symfonic_graph.shape.scope import MemoryScope

__all__ = [
    "TRIGGERS_HEADING",
    "TRIGGERS_ORDER",
    "TRIGGERS_ORIGIN",
    "TRIGGERS_POSITION",
    "GraphPendingTriggers",
    "Neo4jSelectionAuditSink",
    "PendingTrigger",
    "PendingTriggerSource",
    "ProspectiveTriggerCapability",
    "TriggerSelectionSink",
    "CueEmbedder",
    "embed_cue",
    "event_matches",
    "no_text_match",
    "prompt_cue",
    "prospective_trigger_capabilities",
]

log = logging.getLogger("symfonic_graph.triggers")

TRIGGERS_HEADING: Final = "## PENDING REMINDERS"
TRIGGERS_POSITION: Final = "dynamic"
TRIGGERS_ORDER: Final = 20
TRIGGERS_ORIGIN: Final = "symfonic.prospective"

Evaluator = Callable[[str, str], object]
CueFrom = Callable[[Any], str]
EventsFrom = Callable[[Any], Iterable[CallResult]]
Claim = Callable[[MemoryScope, Sequence[str]], Awaitable[Iterable[str]]]
"""Acknowledges the ``once`` triggers a turn selected; returns the ids it acknowledged (``claim_once``)."""


@dataclass(frozen=True, slots=True, weakref_slot=True)
class PendingTrigger:
    """One unresolved reminder, as offered to a turn.

    ``kind`` is ``"text"`` (the evaluator decides), ``"time"`` (due: the
    source hands it over only once its due time has passed), ``"semantic"``
    (the source hands it over only when the turn's embedding is near its
    condition's) or ``"event"``
    (offered once the conversation holds a successful call of ``on_tool``
    whose arguments include ``same_args``, JSON text of a mapping, and whose
    parsed ``result`` and arguments ``call`` satisfy ``where``, CEL). ``once``:
    the capability acknowledges it when it first selects it.

    Example:
        >>> PendingTrigger("t-1", "user mentions the invoice", "Say it is overdue.")
        PendingTrigger(trigger_id='t-1', condition='user mentions the invoice', task='Say it is overdue.', kind='text')
    """

    trigger_id: str
    condition: str
    task: str
    kind: str = "text"
    on_tool: str | None = None
    same_args: str | None = None
    where: str | None = None
    once: bool = False
    similarity: float | None = None  # a semantic trigger's cosine with the turn's embedding


@runtime_checkable
class PendingTriggerSource(Protocol):
    """Where a capability reads pending triggers from (``GraphPendingTriggers``, or your own)."""

    async def pending(self, scope: MemoryScope) -> Sequence[PendingTrigger]:
        """The unresolved triggers visible to ``scope``."""
        ...


@runtime_checkable
class TriggerSelectionSink(Protocol):
    """Observes each turn's selection, after the contribution is built.

    ``selected`` may be a plain or an ``async`` method. It is called only when
    at least one trigger was selected, with the selected triggers in source
    order. Whatever it raises is logged at WARNING and never breaks the turn;
    it runs inline, so keep it fast (``Neo4jSelectionAuditSink`` is bounded by
    the store's ``query_timeout``).

    Example:
        >>> class PrintSink:
        ...     def selected(self, scope, triggers):
        ...         print(scope.tenant_id, [t.trigger_id for t in triggers])
    """

    def selected(self, scope: MemoryScope, triggers: Sequence[PendingTrigger]) -> Awaitable[None] | None:
        """Record or react to ``triggers`` having been selected for ``scope``."""
        ...


class _PendingReader(Protocol):
    async def get_pending(
        self, scope: MemoryScope, *, limit: int | None = None, embedding: Sequence[float] | None = None,
    ) -> list[Trigger]: ...


class _OfferableAt:
    """The layer's read of what may be offered at ``clock()``, in the reader shape the source checks."""

    def __init__(self, layer: ProspectiveLayer, clock: Callable[[], float], similarity: float) -> None:
        self.layer, self.clock, self.similarity = layer, clock, similarity

    async def get_pending(
        self, scope: MemoryScope, *, limit: int | None = None, embedding: Sequence[float] | None = None,
    ) -> list[Trigger]:
        return await self.layer.get_offerable(scope, now=self.clock(), limit=limit, vector=embedding,
                                              similarity=self.similarity)


class GraphPendingTriggers:
    """The triggers a turn may be offered, read from the graph, one index-backed query per turn.

    Returns only what can be offered at ``clock()`` (epoch seconds, default
    ``time.time``): text triggers that are pending and time triggers that
    are due; none expired or snoozed. Visibility (tenant, namespace,
    retraction, publication, status) and time are enforced in the Cypher;
    every row is checked again on the way out and a row that does not belong
    to the scope is dropped and logged at ERROR. Given the ``embedding`` of
    what the turn said, semantic triggers reaching the cosine ``similarity``
    (default 0.75) with it too (a capability with ``embeddings`` passes it). Triggers from every write
    path are read: ``set_trigger``, a staged write after ``store.publish``,
    and nodes seeded with plain Cypher.

    Example:
        >>> source = GraphPendingTriggers(store)
        >>> [t.task for t in await source.pending(MemoryScope("acme", "user-42"))]
        ['Tell them the invoice is overdue.']
    """

    def __init__(
        self, store: GraphMemoryStore, *, max_triggers: int = 100, clock: Callable[[], float] = time.time,
        similarity: float = DEFAULT_SIMILARITY,
    ) -> None:
        if store is None:
            raise ValueError("pending triggers need a graph backend")
        if not callable(clock):
            raise TypeError(f"clock must be a () -> float callable (epoch seconds), got {type(clock).__name__}")
        self.store = store
        self.max_triggers = positive_count("max_triggers", max_triggers)
        self.clock = clock
        self._layer: _PendingReader = _OfferableAt(ProspectiveLayer(store, clock=clock), clock,
                                                   similarity_of("similarity", similarity))

    async def claim_once(self, scope: MemoryScope, trigger_ids: Sequence[str]) -> set[str]:
        """Acknowledge the selected ``once`` triggers; the ids this call acknowledged (see ``ProspectiveLayer``)."""
        return await ProspectiveLayer(self.store, clock=self.clock).claim_once(scope, trigger_ids)

    async def pending(self, scope: MemoryScope, *, embedding: Sequence[float] | None = None) -> list[PendingTrigger]:
        """The triggers ``scope`` may be offered now, oldest first (at most ``max_triggers``)."""
        offerable = await self._layer.get_pending(scope, limit=self.max_triggers, embedding=embedding)
        return [PendingTrigger(t.id, t.condition, t.task, t.kind, t.on_tool, t.same_args, t.where, t.once,
                               t.similarity)
                for t in keep_visible(scope, offerable, "trigger")]


def event_matches(trigger: PendingTrigger, result: CallResult) -> bool:
    """Whether a successful call ``result`` fires event ``trigger``: its tool, its ``same_args`` values, ``where``.

    A ``same_args`` that is not the JSON text of a mapping matches nothing
    (``doctor`` reports it). ``where`` is evaluated over ``result`` (the
    call's parsed result) and ``call`` (its arguments), as a rule's fact is;
    one that does not compile, cannot be evaluated or gives no boolean
    matches nothing, logged at WARNING naming the trigger.

    Example:
        >>> refund = CallResult("issue_refund", {"order_id": "A-17", "amount": 20}, False, 1)
        >>> event_matches(PendingTrigger("t", "", "Say it lands in 3 days.", "event", "issue_refund",
        ...                              '{"order_id": "A-17"}'), refund)
        True
    """
    if result.failed or result.name != trigger.on_tool:
        return False
    if trigger.same_args is None:
        return _where_holds(trigger, result)
    try:
        wanted = json.loads(trigger.same_args)
    except ValueError:
        return False
    args = result.args
    return isinstance(wanted, Mapping) and isinstance(args, Mapping) and all(
        name in args and args[name] == value and isinstance(args[name], bool) == isinstance(value, bool)
        for name, value in wanted.items()) and _where_holds(trigger, result)


def _where_holds(trigger: PendingTrigger, result: CallResult) -> bool:
    """``trigger.where`` over the call's ``result`` and ``call`` (True without one); False, logged, when it fails."""
    if trigger.where is None:
        return True
    try:
        expression = compile_expression(trigger.where, "where")
        scope: Scope | None = result.scope
        if scope is None:  # the rules bind the same two variables; either side's binding is reused
            scope = Scope({"result": bindable(result.content),
                           "call": bindable(result.args) if isinstance(result.args, Mapping) else {}})
            object.__setattr__(result, "scope", scope)
        return evaluate_bool(expression, {}, scope)
    except (ValidationError, ExpressionError) as exc:
        log.warning("event trigger %s: its where %r failed on a call of %s (%s); not offered on that call",
                    trigger.trigger_id, trigger.where, result.name, exc)
        return False


async def embed_cue(embeddings: Any, cue: str) -> list[float] | None:
    """The embedding of ``cue`` by ``embeddings`` (``aembed_query``); None when empty or when it fails (WARNING).

    A model that fails, or answers with something that is not a usable
    vector, costs the turn its semantic reminders only.
    """
    if embeddings is None or not cue.strip():
        return None
    try:
        return list(vector("embedding of the turn", await embeddings.aembed_query(cue)))
    except Exception as exc:
        log.warning("embedding the turn failed (%s: %s); no semantic reminders this turn", type(exc).__name__, exc)
        return None


class CueEmbedder:
    """The embedding of a turn's cue for semantic reminders, by the wiring's ``embeddings``, once per text.

    A run calls the model several times for one user message (around its
    tool calls); the cue is embedded once, and the last ``keep`` texts'
    embeddings are kept. No ``embeddings``, an empty cue or a failing model
    give None: no semantic reminder that turn (``embed_cue``).
    """

    __slots__ = ("_held", "_keep", "embeddings")

    def __init__(self, embeddings: Any, *, keep: int = 256) -> None:
        if embeddings is not None and not callable(getattr(embeddings, "aembed_query", None)):
            raise TypeError("embeddings must be a LangChain Embeddings (with aembed_query), "
                            f"got {type(embeddings).__name__}")
        self.embeddings = embeddings
        self._held: OrderedDict[str, list[float]] = OrderedDict()
        self._keep = keep

    async def __call__(self, cue: str) -> list[float] | None:
        if self.embeddings is None:
            return None
        held = self._held.get(cue)
        if held is not None:
            self._held.move_to_end(cue)
            return held
        vector = await embed_cue(self.embeddings, cue)
        if vector is not None:
            self._held[cue] = vector
            if len(self._held) > self._keep:
                self._held.popitem(last=False)
        return vector


def no_text_match(condition: str, cue: str) -> bool:
    """The evaluator of a wiring given none: no text trigger is selected; time triggers still are when due."""
    return False


def prompt_cue(request: object) -> str:
    """The default cue: ``request.prompt`` as a string, ``""`` when missing or None.

    A mapping request is read by key (``request["prompt"]``).

    Example:
        >>> from types import SimpleNamespace
        >>> prompt_cue(SimpleNamespace(prompt="hello")), prompt_cue(object())
        ('hello', '')
    """
    prompt = request.get("prompt") if isinstance(request, Mapping) else getattr(request, "prompt", None)
    if prompt is None:
        return ""
    return prompt if isinstance(prompt, str) else str(prompt)


def _close_awaitable(value: object) -> None:
    close = getattr(value, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # pragma: no cover - a broken awaitable; nothing else to do
            log.debug("closing an awaitable evaluator result failed", exc_info=True)


def _render(tasks: Sequence[str]) -> str:
    lines = [TRIGGERS_HEADING]
    for task in tasks:
        first, *rest = task.strip().splitlines()
        lines.append(f"- {first}")
        lines.extend(f"  {line}" for line in rest)
    return "\n".join(lines)


class ProspectiveTriggerCapability:
    """Offers the tasks of the pending triggers this turn satisfies.

    Per turn, a trigger is selected iff its task is non-empty (after
    stripping) and, for a text trigger, ``evaluator(condition, cue)``
    returns exactly ``True``; a time trigger is selected as the source hands
    it over (due: the source decides the time), without the evaluator; an
    event trigger when ``events_from(request)`` holds a successful call of
    its ``on_tool`` whose arguments include its ``same_args`` (equal
    values), never without ``events_from``. A kind this release does not
    know is never selected. A ``once`` trigger is selected only when
    ``claim`` acknowledges it (exactly one of the turns racing for it gets
    it; a failing claim selects none of them): the one exception to
    "the capability never writes".
    An evaluator that raises, returns a non-bool (``1``, ``"yes"``) or an
    awaitable selects nothing (the awaitable is closed, never left
    un-awaited); each case is logged at WARNING. The tasks of the selected
    triggers, and only the tasks, become one contribution::

        ## PENDING REMINDERS
        - <task>                        (continuation lines indented by two spaces)

    with ``position="dynamic"``, ``order=20``, ``header=""`` and
    ``origin="symfonic.prospective"``. Nothing selected, or a failing
    source or ``cue_from``, gives ``[]``. The capability never writes.

    Args:
        source: an object with ``async pending(scope)``, e.g. ``GraphPendingTriggers``.
        evaluator: synchronous ``(condition, cue) -> bool``; no default matcher is shipped.
        scope: whose triggers to read.
        sink: optional ``TriggerSelectionSink``, told about each non-empty selection.
        cue_from: ``request -> str``; by default ``request.prompt`` (``""`` if missing).
        events_from: ``request -> iterable of CallResult`` (``symfonic_graph.rules.events``): the
            calls made in the conversation, for event triggers; a failing one selects no event trigger.
        claim: ``async (scope, ids) -> acknowledged ids``, for ``once`` triggers; by default the
            source's ``claim_once`` (``GraphPendingTriggers`` has one); without either, none is selected.
        embeddings: a LangChain ``Embeddings``, for semantic triggers: the cue's embedding is passed
            to ``source.pending(scope, embedding=...)``, which hands over the ones near it in meaning.
            An empty cue or a failing model offers no semantic trigger that turn (WARNING).

    Example:
        >>> capability = ProspectiveTriggerCapability(
        ...     GraphPendingTriggers(store), lambda cond, cue: cond in cue, MemoryScope("acme"))
        >>> await capability.contribute(SimpleNamespace(prompt="about my invoice"))
        [PluginContribution(content='## PENDING REMINDERS\\n- Say it is overdue.', position='dynamic', ...)]
    """

    def __init__(
        self,
        source: PendingTriggerSource,
        evaluator: Evaluator,
        scope: MemoryScope,
        sink: TriggerSelectionSink | None = None,
        cue_from: CueFrom = prompt_cue,
        events_from: EventsFrom | None = None,
        claim: Claim | None = None,
        embeddings: Any = None,
    ) -> None:
        if not callable(getattr(source, "pending", None)):
            raise TypeError(
                f"source must have an async pending(scope) method, e.g. GraphPendingTriggers(store); "
                f"got {type(source).__name__}"
            )
        if not callable(evaluator):
            raise TypeError(
                "evaluator is required: a synchronous (condition, cue) -> bool callable; "
                f"got {type(evaluator).__name__}"
            )
        if inspect.iscoroutinefunction(evaluator):
            log.warning(
                "evaluator %r is async: its results are awaitables and select nothing; "
                "pass a synchronous (condition, cue) -> bool", evaluator,
            )
        if not isinstance(scope, MemoryScope):
            raise TypeError(f"scope must be a MemoryScope, got {type(scope).__name__}")
        if sink is not None and not callable(getattr(sink, "selected", None)):
            raise TypeError(f"sink must have a selected(scope, triggers) method, got {type(sink).__name__}")
        if not callable(cue_from):
            raise TypeError(f"cue_from must be a callable request -> str, got {type(cue_from).__name__}")
        self.source = source
        self.evaluator = evaluator
        self.scope = scope
        self.sink = sink
        if events_from is not None and not callable(events_from):
            raise TypeError(f"events_from must be a callable request -> results, got {type(events_from).__name__}")
        self.cue_from = cue_from
        self.events_from = events_from
        if claim is not None and not callable(claim):
            raise TypeError(f"claim must be an async (scope, ids) -> ids callable, got {type(claim).__name__}")
        self.claim: Claim | None = claim if claim is not None else getattr(source, "claim_once", None)
        self._embed = CueEmbedder(embeddings)  # refuses what is no Embeddings
        self.embeddings = embeddings

    async def contribute(self, request: object) -> list[PluginContribution]:
        """This turn's reminder block (at most one contribution)."""
        cue = self._cue(request)
        if cue is None:
            return []
        triggers = await self._pending(await self._embed(cue))
        if triggers is None:
            return []
        results = self._results(request) if any(t.kind == "event" for t in triggers) else ()
        selected = [t for t in triggers if self._selects(t, cue, results)]
        if any(t.once for t in selected):
            selected = await self._claimed(selected)
        if not selected:
            return []
        contribution = PluginContribution(
            content=_render([t.task for t in selected]),
            position=TRIGGERS_POSITION,
            order=TRIGGERS_ORDER,
            header="",
            origin=TRIGGERS_ORIGIN,
        )
        await self._notify(tuple(selected))
        return [contribution]

    async def _claimed(self, selected: list[PendingTrigger]) -> list[PendingTrigger]:
        """``selected`` without the ``once`` triggers this turn did not acknowledge."""
        once = [t.trigger_id for t in selected if t.once]
        try:
            if self.claim is None:
                raise TypeError("no claim: pass claim=ProspectiveLayer(store).claim_once")
            got = set(await self.claim(self.scope, once))
        except Exception as exc:
            log.warning("once triggers %s not offered: acknowledging them failed (%s: %s)",
                        ", ".join(once), type(exc).__name__, exc)
            got = set()
        return [t for t in selected if not t.once or t.trigger_id in got]

    def _cue(self, request: object) -> str | None:
        try:
            cue = self.cue_from(request)
        except Exception as exc:
            log.warning("cue_from failed (%s: %s); no reminders this turn", type(exc).__name__, exc)
            return None
        if not isinstance(cue, str):
            log.warning("cue_from returned %s, not a str; no reminders this turn", type(cue).__name__)
            return None
        return cue

    async def _pending(self, embedding: Sequence[float] | None = None) -> list[PendingTrigger] | None:
        try:
            result: Any = (self.source.pending(self.scope) if embedding is None
                           else self.source.pending(self.scope, embedding=embedding))  # type: ignore[call-arg]
            if inspect.isawaitable(result):
                result = await result
            items = list(result)
        except Exception as exc:
            log.warning(
                "pending-trigger source failed for tenant %r (%s: %s); no reminders this turn",
                self.scope.tenant_id, type(exc).__name__, exc,
            )
            return None
        good = []
        for item in items:
            if isinstance(item, PendingTrigger):
                good.append(item)
            else:
                log.warning("pending-trigger source returned %s, not a PendingTrigger; skipped", type(item).__name__)
        return good

    def _results(self, request: object) -> Sequence[CallResult]:
        if self.events_from is None:
            return ()
        try:
            return [r for r in self.events_from(request) if isinstance(r, CallResult) and not r.failed]
        except Exception as exc:
            log.warning("events_from failed (%s: %s); no event reminders this turn", type(exc).__name__, exc)
            return ()

    def _selects(self, trigger: PendingTrigger, cue: str, results: Sequence[CallResult] = ()) -> bool:
        if not isinstance(trigger.task, str) or not trigger.task.strip():
            return False
        if trigger.kind in ("time", "semantic"):  # the source decided: due, or near in meaning
            return True
        if trigger.kind == "event":
            return any(event_matches(trigger, result) for result in results)
        if trigger.kind != "text":
            return False
        try:
            result = self.evaluator(trigger.condition, cue)
        except Exception as exc:
            log.warning("evaluator raised on trigger %s (%s: %s); not selected",
                        trigger.trigger_id, type(exc).__name__, exc)
            return False
        if inspect.isawaitable(result):
            _close_awaitable(result)
            log.warning("evaluator returned an awaitable for trigger %s; it must be synchronous; not selected",
                        trigger.trigger_id)
            return False
        if result is True:
            return True
        if result is not False:
            log.warning("evaluator returned %s for trigger %s, not a bool; not selected",
                        type(result).__name__, trigger.trigger_id)
        return False

    async def _notify(self, selected: tuple[PendingTrigger, ...]) -> None:
        telemetry.note_trigger_selection(selected)
        if self.sink is None:
            return
        try:
            result = self.sink.selected(self.scope, selected)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            log.warning("trigger selection sink %s failed (%s: %s); the turn goes on",
                        type(self.sink).__name__, type(exc).__name__, exc)


def prospective_trigger_capabilities(
    source: PendingTriggerSource,
    evaluator: Evaluator,
    scope: MemoryScope,
    *,
    sink: TriggerSelectionSink | None = None,
) -> list[GrantEffects | ProspectiveTriggerCapability]:
    """The grant and the capability a runtime composes for prospective triggers.

    Example:
        >>> grant, capability = prospective_trigger_capabilities(source, evaluator, scope)
        >>> grant
        GrantEffects(effect='memory-read')
    """
    return [GrantEffects("memory-read"), ProspectiveTriggerCapability(source, evaluator, scope, sink=sink)]


class Neo4jSelectionAuditSink:
    """An opt-in sink that records each selection in Neo4j, as an audit trail.

    Each non-empty selection becomes one node
    ``(:SymfonicTriggerSelection {tenant_id, namespace, trigger_ids, kinds, selected_at})``
    (``namespace`` is the scope's, null for a tenant-wide scope; ``kinds`` the
    selected triggers' kinds, in the order of ``trigger_ids``). The label is
    library-owned, so it cannot collide with your domain data; nothing reads it
    on a turn. Query it with plain Cypher, filtering on ``tenant_id``.

    Example:
        >>> capability = ProspectiveTriggerCapability(
        ...     GraphPendingTriggers(store), evaluator, scope, sink=Neo4jSelectionAuditSink(store))
    """

    def __init__(self, store: GraphMemoryStore) -> None:
        if store is None:
            raise ValueError("the selection audit sink needs a graph backend")
        self.store = store

    async def selected(self, scope: MemoryScope, triggers: Sequence[PendingTrigger]) -> None:
        """Write one audit node for this selection (nothing when empty)."""
        ids = [t.trigger_id for t in triggers]
        if not ids:
            return
        kinds = [t.kind for t in triggers]
        await self.store.write([("trigger_selection_record", {**scope.params(), "trigger_ids": ids, "kinds": kinds})])
