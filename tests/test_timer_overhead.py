"""benchmarks/timer_overhead.py's arithmetic on a CPU: the summary's medians, sums' ratio, latency ratios and the
rounds each timer timed again, per mode."""

import pandas as pd

from timer_overhead import summary


def test_the_summary_compares_the_timers_per_mode():
    rows = []
    for config in range(4):
        rows.append({"config": config, "mode": "screen", "timer": "baseline", "wall_ms": 4.0, "latency_ms": 0.10,
                     "retries": 1})
        rows.append({"config": config, "mode": "screen", "timer": "new", "wall_ms": 1.0, "latency_ms": 0.11,
                     "retries": 0})
    rows.append({"config": 0, "mode": "full", "timer": "baseline", "wall_ms": 20.0, "latency_ms": 0.2, "retries": 1})
    rows.append({"config": 0, "mode": "full", "timer": "new", "wall_ms": 5.0, "latency_ms": 0.2, "retries": 0})
    screen, full = summary(pd.DataFrame(rows), (8, 64, 64))
    assert screen["mode"] == "screen" and screen["configs"] == 4 and screen["shape"] == "8x64x64"
    assert screen["baseline wall ms a call (median)"] == "4.00" and screen["new wall ms a call (median)"] == "1.00"
    assert screen["wall, new / baseline (sums)"] == "0.250"
    assert screen["latency new / baseline: median (P10, P90)"] == "1.100 (1.100, 1.100)"
    assert screen["rounds timed again (baseline, new)"] == "4, 0"
    assert full["configs"] == 1 and full["rounds timed again (baseline, new)"] == "1, 0"
