"""The control-plane benchmark at a small scale (make bench-k8s runs it at 1,000 tests)."""

from __future__ import annotations

from wpbench_controller.bench import RSS_TARGET_MIB, WRITE_TARGET, run_bench


def test_benchmark_meets_its_targets_at_100_tests():
    result = run_bench(100, max_in_flight=20, timeout=300)
    assert result["phase"] == "Succeeded" and result["done"] == 100
    assert result["writes_per_test"] <= WRITE_TARGET, result
    assert result["controller_peak_rss_mib"] <= RSS_TARGET_MIB, result
