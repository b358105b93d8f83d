"""`wpbench-controller`: reconcile WPBenchRuns in the given namespaces until SIGTERM.

In a pod it uses the service account; elsewhere a kubeconfig (`--kubeconfig`, `KUBECONFIG`).
On `--health-port`: `/readyz` answers 200 once the watches run; `/healthz` (liveness) answers 200
while the reconcile loop keeps coming round (every API request has a timeout, so a hung connection
cannot stop it unseen), 503 once it has not for `--liveness-seconds`; `/metrics`: Prometheus metrics
(`wpbench_controller.metrics`).
A standby replica (leader election: `--leader-election-lease`) answers /healthz and /readyz like the
leader: it is alive and ready to lead.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType

from wpbench_controller.controller import Controller
from wpbench_controller.leader import LEASE_SECONDS, RENEW_SECONDS, RETRY_SECONDS, Elector
from wpbench_controller.logs import FORMATS, configure
from wpbench_controller.metrics import CONTENT_TYPE, Metrics
from wpbench_controller.reconciler import Options
from wpbench_k8s import __version__
from wpbench_k8s.errors import WPBenchError
from wpbench_k8s.kube.client import Kube, api_client
from wpbench_k8s.kube.objects import DEFAULT_INFRA_RETRIES, DEFAULT_START_SECONDS
from wpbench_k8s.kube.placement import parse_placement

USER_AGENT = f"wpbench-controller/{__version__}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="wpbench-controller", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default=env("KUBECONFIG"), help="kubeconfig (default: in-cluster)")
    parser.add_argument("--context", default=env("WPBENCH_K8S_CONTEXT"))
    parser.add_argument(
        "--namespace",
        action="append",
        default=None,
        help="namespace to watch; repeatable or comma-separated (env WPBENCH_NAMESPACES, default wpbench)",
    )
    parser.add_argument("--resync-seconds", type=float, default=float(env("WPBENCH_RESYNC_SECONDS", "30")))
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=int(env("WPBENCH_MAX_IN_FLIGHT", "2")),
        help="grader Jobs per run at once when the run does not say",
    )
    parser.add_argument(
        "--infra-retries", type=int, default=int(env("WPBENCH_INFRA_RETRIES", str(DEFAULT_INFRA_RETRIES)))
    )
    parser.add_argument(
        "--image-pull-policy",
        default=env("WPBENCH_IMAGE_PULL_POLICY", "IfNotPresent"),
        choices=["Always", "IfNotPresent", "Never"],
    )
    parser.add_argument(
        "--model-workers",
        type=int,
        default=int(env("WPBENCH_MODEL_WORKERS", "4")),
        help="model calls at once, beside the reconcile worker (model runs only)",
    )
    parser.add_argument(
        "--start-seconds",
        type=int,
        default=int(env("WPBENCH_START_SECONDS", str(DEFAULT_START_SECONDS))),
        help="how long a grader pod may wait to be scheduled and started before its attempt is infra",
    )
    parser.add_argument(
        "--liveness-seconds",
        type=float,
        default=float(env("WPBENCH_LIVENESS_SECONDS", "300")),
        help="/healthz fails once the reconcile loop has not come round for this long",
    )
    parser.add_argument(
        "--default-queue",
        default=env("WPBENCH_DEFAULT_QUEUE", ""),
        help="Kueue LocalQueue for runs that name none (chart grader.queue); empty: none",
    )
    parser.add_argument(
        "--grader-placement",
        default=env("WPBENCH_GRADER_PLACEMENT", "{}"),
        help="JSON: default pod-spec fields for grader pods (chart grader.placement); a run's spec.placement wins",
    )
    parser.add_argument(
        "--trusted-suites",
        default=env("WPBENCH_TRUSTED_SUITES", "{}"),
        help='suites a cluster admin pinned, as JSON {"name": "sha256:..."} (chart value trustedSuites)',
    )
    parser.add_argument(
        "--namespace-selector",
        default=env("WPBENCH_NAMESPACE_SELECTOR", ""),
        help="also serve every namespace with these labels (k=v,...), followed live (chart namespaces.selector)",
    )
    parser.add_argument(
        "--instance",
        default=env("WPBENCH_INSTANCE", ""),
        help="this release's id: a run is reconciled only by the instance that accepted it (status.controller)",
    )
    parser.add_argument(
        "--leader-election-lease",
        default=env("WPBENCH_LEADER_LEASE", ""),
        help="Lease name: only the replica holding it reconciles (empty: no election, this process always does)",
    )
    parser.add_argument(
        "--leader-election-namespace",
        default=env("POD_NAMESPACE", ""),
        help="namespace of the Lease (default: env POD_NAMESPACE)",
    )
    parser.add_argument("--lease-seconds", type=float, default=float(LEASE_SECONDS))
    parser.add_argument("--renew-seconds", type=float, default=float(RENEW_SECONDS))
    parser.add_argument("--retry-seconds", type=float, default=float(RETRY_SECONDS))
    parser.add_argument("--status-interval", type=float, default=2.0, help="seconds between counter-only status writes")
    parser.add_argument("--health-port", type=int, default=int(env("WPBENCH_HEALTH_PORT", "8080")), help="0 disables")
    parser.add_argument("--log-level", default=env("WPBENCH_LOG_LEVEL", "INFO"))
    parser.add_argument(
        "--log-format",
        default=env("WPBENCH_LOG_FORMAT", "text"),
        choices=FORMATS,
        help="json: one JSON object per line (time, level, logger, message, namespace and run when known)",
    )
    args = parser.parse_args(argv)
    try:
        args.placement = parse_placement(json.loads(args.grader_placement), "--grader-placement")
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        parser.error(str(exc))
    try:
        pins = json.loads(args.trusted_suites)
    except ValueError as exc:
        parser.error(f"--trusted-suites: not JSON: {exc}")
    if not isinstance(pins, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in pins.items()):
        parser.error('--trusted-suites: expected {"suite name": "sha256:..."}')
    args.pins = pins
    raw = args.namespace or [env("WPBENCH_NAMESPACES", "wpbench")]
    args.namespaces = [ns.strip() for value in raw for ns in value.split(",") if ns.strip()]
    if args.leader_election_lease:
        if not args.leader_election_namespace:
            parser.error("--leader-election-lease needs --leader-election-namespace (or env POD_NAMESPACE)")
        if not args.lease_seconds > args.renew_seconds > args.retry_seconds > 0:
            parser.error("leader election: need --lease-seconds > --renew-seconds > --retry-seconds > 0")
    return args


def _serve_health(port: int, controller: Controller) -> ThreadingHTTPServer:
    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/metrics":
                body = controller.metrics.render()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            if self.path == "/healthz":
                ok = controller.alive()
            elif self.path == "/readyz":
                ok = controller.healthy.is_set() and controller.alive()
            else:
                ok = False
            self.send_response(200 if ok else 503)
            self.end_headers()
            self.wfile.write(b"ok\n" if ok else b"not ready\n")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("0.0.0.0", port), Health)
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    configure(args.log_level, args.log_format)
    metrics = Metrics()
    try:
        api = api_client(args.kubeconfig, args.context, user_agent=USER_AGENT)
    except WPBenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    options = Options(
        default_max_in_flight=args.max_in_flight,
        default_infra_retries=args.infra_retries,
        image_pull_policy=args.image_pull_policy,
        status_interval=args.status_interval,
        start_seconds=args.start_seconds,
        default_queue=args.default_queue,
        placement=args.placement,
        trusted_suites=args.pins,
    )
    elector = None
    if args.leader_election_lease:
        # The Lease has a client of its own: never fenced, never queued behind the reconciler's writes, and
        # its requests time out well inside the renew deadline.
        identity = f"{os.environ.get('POD_NAME') or os.uname().nodename}_{uuid.uuid4().hex[:8]}"
        lease_kube = Kube(api, read_timeout=max(1.0, args.retry_seconds), connect_timeout=max(1.0, args.retry_seconds))
        elector = Elector(lease_kube, args.leader_election_namespace, args.leader_election_lease, identity,
                          lease_seconds=args.lease_seconds, renew_seconds=args.renew_seconds,
                          retry_seconds=args.retry_seconds)  # fmt: skip
    controller = Controller(
        Kube(api, observer=metrics, fence=elector.fence if elector else None),
        args.namespaces,
        options=options,
        resync_seconds=args.resync_seconds,
        model_workers=args.model_workers,
        liveness_seconds=args.liveness_seconds,
        metrics=metrics,
        elector=elector,
        instance=args.instance,
        namespace_selector=args.namespace_selector,
    )
    health = _serve_health(args.health_port, controller) if args.health_port else None

    def on_signal(signum: int, frame: FrameType | None) -> None:
        controller.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        controller.run()
    finally:
        if health is not None:
            health.shutdown()


if __name__ == "__main__":
    main()
