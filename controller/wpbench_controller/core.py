"""The reconciler's decisions: pure functions from what a pass observed (`observed.py`) to what it does.

Nothing here reads the cluster, the clock or a file: every input is an argument (the time as `now`), every
output a frozen value the shell (`reconciler.py`) carries out in its safe order. A pass decides in the
steps the shell takes, because what it stores in one step is what the next one sees:

1. `to_decide`, then `collect`: each unit's newest attempt (a unit is the items one grader Job grades: one
   item, or in fast mode several in a sequence); a finished one is decided item by item
   (`outcome.decide_outcome`): an Infra decision with retries left, or an item the attempt never reached,
   goes into the unit's next attempt (`Retry`), any other decision is an `Ending` (the shell scores and stores
   its record). Items whose every Job goes are named by item label (one `deletecollection`), attempts a newer
   one replaced by name.
2. `schedule`: which items get a grader Job now, within the in-flight bound, `creates_per_pass` and
   `max_starting`; model items take a slot while their call runs; items scored without a pod do not.
3. `conclude`: the run finished (Succeeded, or Failed at the first error), or its Running message.
4. `status_write`: the status patch (only what changed; counters at most every `status_interval`
   seconds), its conditions, and the lifecycle Events the change calls for.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from wpbench_controller.conditions import lifecycle_events, run_conditions, summarise
from wpbench_controller.observed import Observation, ObservedJob, ObservedRun
from wpbench_k8s.kube.facts import never_started
from wpbench_k8s.manifest import ManifestItem
from wpbench_k8s.outcome import Decision, Infra, decide_outcome
from wpbench_k8s.records import Record

# Seconds before the next look, by cause.
LOG_RETRY_SECONDS = 2.0  # a finished pod's log did not answer
CREATE_RETRY_SECONDS = 10.0  # the API server refused a Job (quota, admission)
STARTING_SECONDS = 1.0  # this pass filled `max_starting`: pods start, look again soon
WAITING_FOR_PAYLOAD_SECONDS = 5.0
PROBE_SECONDS = 1.0  # the image-probe pod runs


def earliest(a: float | None, b: float | None) -> float | None:
    """The sooner of two requeue delays (None: no delay asked)."""
    return b if a is None else a if b is None else min(a, b)


# ---- step 1: collect -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ending:
    """An item's last attempt decided: the shell scores it (`steps.score_item`), stores the record, and only
    then deletes the item's Jobs."""

    item_id: str
    decision: Decision
    attempt: int  # the attempt that decided (attempt - 1 retries were used)
    job: ObservedJob

    @property
    def graded(self) -> bool:
        """A verdict a grader decided (never an infrastructure fallback): the verdict cache may index it."""
        return not isinstance(self.decision, Infra)


@dataclass(frozen=True)
class Retry:
    """The next attempt of a unit: its items an infrastructure failure with retries left, or the end of the pod
    before their turn, left without a record, in the order they are to be graded.

    An item's own attempt number counts only the attempts that reached it: an item a sequence never got to keeps
    its number, so a candidate that brings its pod down spends its own retries, never its neighbours'.
    """

    unit: str  # the item whose label the unit's attempts carry
    items: tuple[str, ...]
    item_attempts: tuple[int, ...]  # each item's attempt number in the new attempt
    attempt: int  # the new attempt's number (the unit's)
    reason: str  # why the previous attempt is retried (the new Job's annotation)
    replaced: tuple[str, ...]  # the unit's Jobs, deleted once the new attempt exists


@dataclass(frozen=True)
class Collection:
    """What step 1 decided."""

    endings: tuple[Ending, ...] = ()
    retries: tuple[Retry, ...] = ()
    delete_items: tuple[str, ...] = ()  # item labels whose every Job goes (their items are stored, or now)
    delete_jobs: tuple[str, ...] = ()  # single Jobs: attempts a newer one replaced
    active: frozenset[str] = frozenset()  # items with a Job in flight (retries included)
    starting: int = 0  # active Jobs whose pod is not there yet or Pending
    queued: int = 0  # active Jobs suspended: waiting for Kueue to admit them (in no platform queue yet)
    waiting: tuple[str, ...] = ()  # "pod: why it does not run", for the status message
    requeue: float | None = None


def _units(jobs: Iterable[ObservedJob]) -> list[list[ObservedJob]]:
    """Jobs grouped by unit (the item label their attempts share), each group oldest attempt first."""
    by_unit: dict[str, list[ObservedJob]] = {}
    for job in jobs:
        by_unit.setdefault(job.unit, []).append(job)
    return [sorted(group, key=lambda j: j.attempt) for group in by_unit.values()]


def _settled(items: tuple[str, ...], observation: Observation) -> bool:
    """Every item has a record already (or is no item of this run): the Jobs grading them only go."""
    return all(i in observation.stored or i not in observation.known for i in items)


def to_decide(observation: Observation) -> tuple[ObservedJob, ...]:
    """The finished newest attempts whose facts `collect` needs (the shell reads them: status, log, events)."""
    out = []
    for group in _units(observation.jobs):
        latest = group[-1]
        if latest.finished and not _settled(latest.items, observation):
            out.append(latest)
    return tuple(out)


def collect(observation: Observation, infra_retries: int) -> Collection:
    """Step 1: every unit's newest attempt, decided; older attempts are garbage.

    Args:
        observation: the Jobs, with `facts` for the attempts `to_decide` named.
        infra_retries: attempts after the first an infrastructure failure may take.
    """
    endings: list[Ending] = []
    retries: list[Retry] = []
    delete_items: list[str] = []
    delete_jobs: list[str] = []
    active: set[str] = set()
    starting = queued = 0
    waiting: list[str] = []
    requeue: float | None = None
    finished: list[tuple[ObservedJob, list[ObservedJob]]] = []
    for group in _units(observation.jobs):
        latest = group[-1]
        if _settled(latest.items, observation):
            delete_items.append(latest.item_label)  # stored already (a pass died before deleting)
            continue
        if not latest.finished:
            delete_jobs.extend(j.name for j in group[:-1])
            active.update(latest.items)
            pod = latest.pod
            if latest.suspended:  # in Kueue's queue (or preempted back into it)
                queued += 1
            elif pod is None or pod.starting:
                starting += 1
            if pod is not None and pod.waiting:
                waiting.append(f"{pod.name}: {pod.waiting}")
            continue
        finished.append((latest, group))
    for latest, group in finished:
        said = observation.facts.get(latest.name)
        if said is None:  # the log did not answer this time; a bounded number of passes try again
            active.update(latest.items)
            requeue = earliest(requeue, LOG_RETRY_SECONDS)
            continue
        if never_started(list(said)):  # no task ran: the attempt was every item's
            said = [said[0]] * len(latest.items)
        again: list[tuple[str, int]] = []
        reasons: list[str] = []
        for n, (item, attempts) in enumerate(zip(latest.items, latest.attempts(), strict=True)):
            if item not in observation.known or item in observation.stored:
                continue
            if n >= len(said):  # the pod ended before this item's turn: it did not run, its attempt is not spent
                again.append((item, attempts))
                continue
            decision = decide_outcome(said[n])
            if isinstance(decision, Infra) and attempts <= infra_retries:
                again.append((item, attempts + 1))
                reasons.append(decision.reason)
                continue
            endings.append(Ending(item, decision, attempts, latest))
        if not again:
            delete_items.append(latest.item_label)
            continue
        reason = reasons[0] if reasons else "the previous pod ended before these items' turn"
        retries.append(Retry(latest.unit_id or again[0][0], tuple(i for i, _ in again), tuple(a for _, a in again),
                             latest.attempt + 1, reason, tuple(j.name for j in group)))  # fmt: skip
        active.update(i for i, _ in again)
    return Collection(
        endings=tuple(endings),
        retries=tuple(retries),
        delete_items=tuple(delete_items),
        delete_jobs=tuple(delete_jobs),
        active=frozenset(active),
        starting=starting,
        queued=queued,
        waiting=tuple(waiting),
        requeue=requeue,
    )


def pass_events(retried: Sequence[tuple[str, str]], records: Sequence[Record]) -> list[tuple[str, str, str]]:
    """(type, reason, message) of a pass's Events: one for the attempts it retried, one for the items it
    ended as infra_error."""
    events = []
    if retried:
        text = summarise("grader attempt(s) failed on infrastructure and were retried", list(retried))
        events.append(("Normal", "Retried", text))
    infra = [(r.item_id, r.error or "") for r in records if r.error_type == "infra_error"]
    if infra:
        text = summarise("item(s) ended as infra_error (excluded from the score; `requeue` grades them)", infra)
        events.append(("Warning", "InfraError", text))
    return events


# ---- step 2: schedule ----------------------------------------------------------------------------------
def advance(order: Sequence[str], cursor: int, stored: Container[str]) -> int:
    """The run's cursor moved past the items (in payload order) that all have a record."""
    while cursor < len(order) and order[cursor] in stored:
        cursor += 1
    return cursor


def unstarted(order: Sequence[str], cursor: int, stored: Container[str], active: Container[str]) -> Iterator[str]:
    """Items from `cursor` on with neither a record nor a Job in flight, in payload order (lazily)."""
    return (order[n] for n in range(cursor, len(order)) if order[n] not in stored and order[n] not in active)


Need = Literal["grader", "model", "none"]


@dataclass(frozen=True)
class Pending:
    """An item with neither a record nor a Job, as the shell found it, in payload order.

    need: "grader" a grader Job grades it (`item`: what the Job is made of); "model" its model call runs
    (it takes an in-flight slot meanwhile); "none" it is scored without a pod (`record`, scored already).
    """

    item_id: str
    need: Need
    item: ManifestItem | None = None
    record: Record | None = None


@dataclass(frozen=True)
class Starts:
    """What step 2 decided: the Jobs to create (in order), the records of items scored without a pod."""

    jobs: tuple[Pending, ...] = ()
    records: tuple[Record, ...] = ()
    model_calls: int = 0  # in-flight slots model calls hold
    requeue: float | None = None  # once every create succeeded

    def requeue_after(self, failed: int) -> float | None:
        """The delay once the creates were sent, `failed` of them refused (quota, admission: try later)."""
        return CREATE_RETRY_SECONDS if failed else self.requeue


def schedule(
    pending: Iterable[Pending], *, active: int, starting: int, max_in_flight: int, creates_per_pass: int,
    max_starting: int,
) -> Starts:  # fmt: skip
    """Step 2: start Jobs up to the in-flight bound (`active` Jobs hold slots), at most `creates_per_pass`
    per pass, and while fewer than `max_starting` Jobs wait for a pod that runs (`starting`).

    `pending` is read lazily, and only while there is room: the shell finds each item's need as it is
    asked for, so it classifies (and starts model calls for) only the items this plan reaches.
    """
    slots = max_in_flight - active
    room = max_starting - starting  # more would wait in the platform's queues
    creates = min(creates_per_pass, room)
    jobs: list[Pending] = []
    records: list[Record] = []
    model_calls = 0
    found = iter(pending)
    while slots > 0 and creates > 0:  # past `creates`, this pass has written its share; the run comes round again
        item = next(found, None)
        if item is None:
            break
        if item.need == "model":
            slots -= 1
            model_calls += 1
        elif item.need == "none":
            if item.record is not None:
                records.append(item.record)
        else:
            jobs.append(item)
            slots -= 1
            creates -= 1
    requeue: float | None = None
    if creates <= 0 and room < creates_per_pass:  # pods start: look again soon
        requeue = STARTING_SECONDS
    elif creates <= 0 or records:  # this pass has written its share, or more may be schedulable now
        requeue = 0.0
    return Starts(tuple(jobs), tuple(records), model_calls, requeue)


# ---- step 3: conclude ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Finish:
    """The run ends: its last status (completionTime set), and its memory in the controller goes."""

    phase: str
    message: str
    reason: str  # the conditions' reason


@dataclass(frozen=True)
class Continue:
    """The run goes on: its Running status, and when to look again (None: when an event says so)."""

    message: str
    in_flight: int
    requeue: float | None


def conclude(
    *, total: int, done: int, aborted: str | None, in_flight: int, waiting: Sequence[str], queued: int,
    queue: str, requeue: float | None,
) -> Finish | Continue:  # fmt: skip
    """Step 3, after the pass's records are stored and its Jobs sent.

    Args:
        aborted: the first item that failed, when the run stops at the first error (else None).
        in_flight: Jobs and model calls of the run still running.
    """
    if done >= total:
        return Finish("Succeeded", f"{done} items graded", "AllGraded")
    if aborted is not None and in_flight == 0:
        return Finish("Failed", f"stopped at the first error (continue_on_error off): {aborted}", "StoppedAtFirstError")
    message = ""
    if waiting:
        message = f"{len(waiting)} grader pod(s) not running yet: {waiting[0]}"
    elif queued:
        message = f"{queued} grader Job(s) queued in LocalQueue {queue} (Kueue admits them)"
    return Continue(message, in_flight, requeue)


# ---- the status ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StatusWrite:
    """A status patch to send (`patch` empty: nothing changed), or a deferral (`wait` seconds)."""

    patch: dict[str, Any]
    wait: float | None = None
    events: tuple[tuple[str, str], ...] = ()  # (type, reason) of the lifecycle Events the change calls for
    message: str = ""  # those Events' message


def status_write(
    old: Mapping[str, Any], new: dict[str, Any], *, reason: str, now: str, force: bool = False,
    since_write: float | None = None, interval: float = 0.0,
) -> StatusWrite:  # fmt: skip
    """The change from the stored status `old` to the fields `new` (observedGeneration, counters, phase, ...).

    The conditions follow the phase (`conditions.run_conditions`); startTime is set once and completionTime
    never moves. A change of counters alone waits until `interval` seconds passed since the last write
    (`since_write`; None: never deferred) unless `force`.
    """
    new = dict(new)
    new.setdefault("startTime", old.get("startTime") or now)
    if old.get("completionTime") and "completionTime" in new:
        new["completionTime"] = old["completionTime"]
    phase = str(new.get("phase") or old.get("phase") or "Pending")
    message = str(new.get("message", old.get("message", "")) or "")
    new["conditions"] = run_conditions(old.get("conditions"), phase, reason, message or phase,
                                       int(new.get("observedGeneration") or 1), now)  # fmt: skip
    changed = {k: v for k, v in new.items() if old.get(k) != v}
    if not changed:
        return StatusWrite({})
    counters_only = not ({"phase", "message", "total"} & set(changed))
    if counters_only and not force and since_write is not None:
        wait = interval - since_write
        if wait > 0:
            return StatusWrite({}, wait=wait)
    events: tuple[tuple[str, str], ...] = ()
    if "conditions" in changed:
        before = str(old.get("phase", ""))
        events = tuple(lifecycle_events(old.get("conditions"), new["conditions"], before, phase))
    return StatusWrite(changed, events=events, message=message or phase)


# ---- the run's own requests ----------------------------------------------------------------------------
def requeue_change(run: ObservedRun, dropped: int, now: str) -> dict[str, Any]:
    """`wpbench-k8s requeue`: the status that opens the run again (`dropped` infra_error records gone)."""
    message = f"requeued: {dropped} infra error(s) and any item never graded go to graders again"
    change: dict[str, Any] = {"phase": "Running", "message": message, "requeued": run.requeue, "completionTime": None}
    change["conditions"] = run_conditions(list(run.conditions), "Running", "Requeued", message, run.generation, now)
    return change


@dataclass(frozen=True)
class Refusal:
    """A run the controller cannot grade (yet): its status, and whether to look again."""

    phase: str
    reason: str
    message: str
    requeue: float | None
    warn: bool  # a Warning Event (once per controller life): the run is refused for good


def refusal(message: str) -> Refusal:
    """From the reason a run's payload cannot be indexed: "invalid ..." refuses it for good, anything else
    (a ConfigMap not there yet) waits for it."""
    if message.startswith("invalid"):
        return Refusal("Failed", "InvalidPayload", message, None, True)
    return Refusal("Pending", "WaitingForPayload", message, WAITING_FOR_PAYLOAD_SECONDS, False)
