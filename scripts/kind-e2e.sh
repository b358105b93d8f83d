#!/usr/bin/env bash
# End to end on kind: submit a 10-test reference run, wait for it, fetch results, assert all passed.
set -euo pipefail
CLUSTER=${KIND_CLUSTER:-wpbench}
RUN_NS=${RUN_NS:-wpbench}
GRADER_IMAGE=${GRADER_IMAGE:-wpbench-grader:dev}
WPBENCH=${WPBENCH:-wpbench-k8s}
OUT=${OUT:-output/kind-e2e}
ctx=(--context "kind-$CLUSTER" -n "$RUN_NS")

run=$("$WPBENCH" submit "${ctx[@]}" --check-reference-solution --limit 10 --image "$GRADER_IMAGE" --max-in-flight 4)
echo "e2e-kind: submitted $run"
"$WPBENCH" status "$run" "${ctx[@]}" --watch
mkdir -p "$OUT"
"$WPBENCH" results "$run" "${ctx[@]}" -o "$OUT/results.jsonl"
kubectl --context "kind-$CLUSTER" -n "$RUN_NS" get wpbenchruns
python3 - "$OUT/results.jsonl" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
bad = [(r["test_id"], r["grader"]["status"], r["grader"]["reason"]) for r in records if r["grader"]["status"] != "passed"]
assert len(records) == 10, f"expected 10 records, got {len(records)}"
assert not bad, f"not passed: {bad}"
print(f"e2e-kind: {len(records)} reference solutions passed")
PY
