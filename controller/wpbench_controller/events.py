"""Events on a run (core/v1 Event, `kubectl describe wpbenchrun` shows them): said once per controller life."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

from wpbench_k8s.kube import crd
from wpbench_k8s.kube.client import EVENTS, Kube, KubeError

log = logging.getLogger(__name__)

COMPONENT = "wpbench-controller"
IGNORED = "IgnoredUntrustedObject"  # a ConfigMap claimed to be stored state the controller never listed
REFUSED = "RunRefused"  # the payload does not grade what the run declares


class Events:
    """Writes Events; the same (run uid, reason, message) at most once."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._said: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()

    def warn(self, namespace: str, name: str, uid: str, reason: str, message: str) -> None:
        """A Warning Event on the run (logged too); a failed write is logged, never raised."""
        with self._lock:
            if (uid, reason, message) in self._said:
                return
            self._said.add((uid, reason, message))
        log.warning("run %s/%s: %s: %s", namespace, name, reason, message)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": crd.API_VERSION,
                "kind": crd.KIND,
                "name": name,
                "namespace": namespace,
                "uid": uid,
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": COMPONENT},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.kube.create(EVENTS, namespace, body)
        except KubeError as exc:
            log.warning("run %s/%s: event %s not written: %s", namespace, name, reason, exc)
