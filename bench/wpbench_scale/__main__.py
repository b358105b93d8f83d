"""`python -m wpbench_scale`: the scale scenario against kube-apiserver + etcd + kwok nodes.

    make bench-k8s          1,000 candidates (50 tests x 20 variants) on 10 kwok nodes
    make bench-k8s-scale    50,050 candidates (350 tests x 143 variants) on 100 kwok nodes

Exit status 0 when every goal is met, 1 when one is missed (the output names it), 2 when the
scenario itself failed (lost or duplicated verdicts, leftover Jobs, an audit log that misses records).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from wpbench_scale.scenario import Scenario, run_scenario


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m wpbench_scale", description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=50)
    parser.add_argument("--variants", type=int, default=20, help="model/skill variants per test")
    parser.add_argument("--nodes", type=int, default=10, help="kwok nodes")
    parser.add_argument("--cpus-per-node", type=int, default=8)
    parser.add_argument("--max-in-flight", type=int, default=0, help="big run's Jobs at once (0: nodes x CPUs)")
    parser.add_argument("--no-restart", action="store_true", help="do not restart the controller mid-run")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--candidates-per-pod", type=int, default=1, help="> 1: fast mode, N candidates a grader pod")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's files (audit log, logs)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    scenario = Scenario(
        tests=args.tests,
        variants=args.variants,
        nodes=args.nodes,
        cpus_per_node=args.cpus_per_node,
        max_in_flight=args.max_in_flight,
        restart=not args.no_restart,
        timeout=args.timeout,
        keep=args.keep,
        candidates_per_pod=args.candidates_per_pod,
    )
    r = run_scenario(scenario, say=lambda msg: print(f"# {msg}", flush=True))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as out:
            json.dump(r, out, indent=2)
    print(
        f"big run: {r['candidates']} candidates on {r['nodes']} kwok nodes x {r['cpus_per_node']} CPUs, "
        f"max in flight {r['max_in_flight']}, {r['candidates_per_pod']} a pod: {r['phase']} in {r['big_run_seconds']} s"
    )
    print(
        f"records stored: {r['records']} (unique {r['unique_records']}); result keys {r['stored_result_keys']}; "
        f"leftover Jobs {r['leftover_jobs']}; controller lives {r['controller_lives']} "
        f"(restarted at {r['controller_restarted_at']})"
    )
    print(
        f"API writes: controller {r['controller_writes']}, submit {r['submit_writes']} -> "
        f"{r['writes_per_candidate']} per candidate; every client during the big run: "
        f"{r['all_clients_writes_big_run']} ({r['all_clients_writes_per_candidate']} per candidate)"
    )
    for kind, n in r["writes_by_kind"].items():
        print(f"  {kind}: {n}")
    print(
        f"controller write rate: {r['controller_write_rate']} req/s sustained, "
        f"{r['controller_peak_10s_write_rate']} req/s peak 10 s"
    )
    print(f"controller peak RSS: {r['controller_peak_rss_mib']} MiB")
    print(
        f"etcd keys: {r['etcd_objects_before']} before the big run, {r['etcd_objects_peak']} peak, "
        f"{r['etcd_objects_end']} at its end; peak by kind {r['peak_by_kind']}"
    )
    print(
        f"time to first pod: {r['time_to_first_pod_seconds']} s; pods created {r['pods_created']}, "
        f"{r['pods_per_second']} per second; pod log reads {r['pod_log_reads']} "
        f"({r['pods_with_log_read_twice']} pods read more than once)"
    )
    print(
        f"result storage: {r['results_bytes']} bytes in {r['results_configmaps']} ConfigMaps "
        f"({r['results_bytes'] // max(1, r['records']['big'] + r['records']['small'] + r['records']['small-alone'])} "
        f"bytes per record); payload {r['payload_bytes']} bytes in {r['payload_configmaps']} ConfigMaps"
    )
    print(f"small run: {r['small_alone_seconds']} s alone, {r['small_run_seconds']} s beside the big run")
    print(
        f"total wall time {r['scenario_seconds']} s (cluster start to figures); machine load average "
        f"{r['load_average_mean']} mean, {r['load_average_max']} max during the big run ({os.cpu_count()} CPUs)"
    )
    missed = [name for name, g in r["goals"].items() if not g["met"]]
    for name, g in r["goals"].items():
        print(f"goal {name}: {'met' if g['met'] else 'MISSED'} ({g['value']}; goal {g['goal']})")
    lost = any(r["records"][k] != r["unique_records"][k] for k in r["records"])
    complete = r["records"]["big"] == r["candidates"] and r["phase"] == "Succeeded"
    # Every pod of records took at least one audited Job creation and one pod-log read: fewer means audit
    # events were not read (a rotated file, say), and every audited figure above would undercount.
    graded, job_creates = r["fewest_jobs"], r["writes_by_kind"].get("create jobs", 0)
    audited = job_creates >= graded and r["pod_log_reads"] >= graded
    if lost or not complete or r["leftover_jobs"] or not audited:
        print(
            "scenario FAILED: verdicts lost or duplicated, Jobs left behind, or the audit log incomplete "
            f"(audited Job creations {job_creates} and pod-log reads "
            f"{r['pod_log_reads']} for {graded} pods of records)",
            file=sys.stderr,
        )
        sys.exit(2)
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
