"""Leader election on a coordination.k8s.io Lease, and the write fence that goes with it.

Only the replica that holds the Lease reconciles. The timing rule that keeps two replicas from ever writing
at once, measured on each replica's own monotonic clock (no clock sync needed):
- the leader leads until `renew_seconds` after it *sent* its last renewal the server accepted; from then on
  `fence()` refuses every write before it leaves the process (`Kube(fence=...)`), whatever the worker is doing;
- another replica takes the Lease over only once it has seen the same record unchanged for the record's
  `leaseDurationSeconds`, counted from when it *received* that record (after the renewal was applied).
So the leader's last write leaves at least `lease_seconds - renew_seconds` before anyone else may start: that
margin is for a write already on the wire.

Why not the official client's `kubernetes.leaderelection`: its requests go through the global default client
with no request timeout (a renewal that hangs keeps the replica leading past its lease, and it cannot use this
process's kubeconfig or user agent), its deadlines are wall-clock, the callback it runs cannot be stopped when
leadership is lost, its loop cannot be left on SIGTERM, and it never releases the Lease, so every rollout
waits a full lease duration.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from wpbench_k8s.kube.client import LEASES, Conflict, Fenced, Kube, KubeError, NotFound

log = logging.getLogger(__name__)

LEASE_SECONDS = 15  # client-go's defaults (15 / 10 / 2)
RENEW_SECONDS = 10
RETRY_SECONDS = 2


def micro_time(when: datetime | None = None) -> str:
    """A Lease MicroTime (RFC 3339 with microseconds, UTC)."""
    return (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Elector:
    """Campaigns for the Lease `namespace/name` as `identity` in `run()` (a thread) until `stop()`."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_seconds: float = LEASE_SECONDS,
        renew_seconds: float = RENEW_SECONDS,
        retry_seconds: float = RETRY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not lease_seconds > renew_seconds > retry_seconds > 0:
            raise ValueError("leader election: need lease seconds > renew seconds > retry seconds > 0")
        if kube.fence is not None:
            raise ValueError("leader election: the Lease client must not be fenced by itself")
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.lease_seconds, self.renew_seconds, self.retry_seconds = lease_seconds, renew_seconds, retry_seconds
        self.clock = clock
        self._until = 0.0  # leading while clock() < _until
        self._seen: tuple[Any, ...] | None = None  # another holder's record as last read
        self._seen_at = 0.0
        self._stop = threading.Event()
        self.beat = clock()  # the loop's last turn (liveness)
        self.terms = 0  # leaderships won so far
        self.since = 0.0  # when the current (or last) term began: the sending of the try that won it
        # The term the caller's writes belong to (None: any). A pass begun in one term must not write in a
        # later one: between the two, another replica may have led and written.
        self.serving: int | None = None
        self.holder = ""  # who held the Lease at the last read

    # ---- what the controller asks --------------------------------------------------------------
    def leading(self) -> bool:
        return self.clock() < self._until

    def fence(self) -> None:
        """Raise `Fenced` unless this replica leads now, in the term `serving` names (the Kube write hook)."""
        if not self.leading():
            raise Fenced(f"not the leader (Lease {self.namespace}/{self.name}): write not sent")
        if self.serving is not None and self.serving != self.terms:
            raise Fenced(f"leader again (term {self.terms}), but this work began in term {self.serving}: not sent")

    def alive(self, within: float) -> bool:
        return self.clock() - self.beat < within

    def stop(self) -> None:
        self._stop.set()

    # ---- the loop ------------------------------------------------------------------------------
    def run(self) -> None:
        """Acquire, renew every `retry_seconds`, take over an expired Lease; leave on `stop()` (not released:
        call `release()` once nothing writes any more)."""
        log.info("leader election: Lease %s/%s as %s", self.namespace, self.name, self.identity)
        while not self._stop.is_set():
            self.beat = self.clock()
            was = self.leading()
            sent = self.clock()
            try:
                won = self._try(sent)
            except Conflict:  # someone else wrote the Lease since we read it: we do not hold it
                won = False
                self._until = 0.0
            except KubeError as exc:  # not answered: keep what we have until it lapses on its own
                log.warning("leader election: Lease %s/%s: %s", self.namespace, self.name, exc)
                won = False
            if won:
                self._until = sent + self.renew_seconds
                if not was:
                    self.terms, self.since = self.terms + 1, sent
                    log.info("leader election: %s leads (term %d)", self.identity, self.terms)
            elif was and not self.leading():
                log.warning("leader election: %s lost the Lease (held by %r)", self.identity, self.holder)
            self._stop.wait(self.retry_seconds)

    def _try(self, sent: float) -> bool:
        """One read and at most one write of the Lease; True when this replica holds it afterwards."""
        try:
            lease = self.kube.get(LEASES, self.namespace, self.name)
        except NotFound:
            now = micro_time()
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, now, 0),
            }
            self.kube.create(LEASES, self.namespace, body)  # Conflict: another replica made it first
            self.holder = self.identity
            return True
        received = self.clock()
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        self.holder = holder
        if holder and holder != self.identity:
            record = (holder, spec.get("renewTime"), spec.get("acquireTime"), spec.get("leaseDurationSeconds"))
            if record != self._seen:
                self._seen, self._seen_at = record, received
                return False
            duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
            if received - self._seen_at < duration:
                return False
            log.info("leader election: Lease held by %s expired; taking it over", holder)
        now = micro_time()
        transitions = int(spec.get("leaseTransitions") or 0)
        ours = holder == self.identity and self.leading()
        acquired, transitions = (spec.get("acquireTime"), transitions) if ours else (now, transitions + 1)
        lease["spec"] = self._spec(acquired, now, transitions)
        # PUT with the resourceVersion just read: if anyone wrote the Lease since, 409 and we do not hold it.
        self.kube.replace(LEASES, self.namespace, self.name, lease)
        self.holder = self.identity
        return True

    def _spec(self, acquired: str | None, renewed: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_seconds),
            "acquireTime": acquired or renewed,
            "renewTime": renewed,
            "leaseTransitions": transitions,
        }

    def release(self) -> None:
        """Give the Lease up (a standby takes it at its next try, not a lease duration later). Call only once
        this process sends no more writes: the fence closes first either way."""
        was = self.leading()
        self._until = 0.0
        if not was:
            return
        try:
            lease = self.kube.get(LEASES, self.namespace, self.name)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            now = micro_time()
            lease["spec"] = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now}
            self.kube.replace(LEASES, self.namespace, self.name, lease)
            log.info("leader election: %s released the Lease", self.identity)
        except KubeError as exc:  # it lapses on its own
            log.warning("leader election: release of %s/%s failed: %s", self.namespace, self.name, exc)
