"""What a two-pass sweep would have recorded: every config screened with a few timed runs, and only those within a
margin of the shape's screened best timed in full. Replayed from the recorded datasets' own repeats; no GPU needed.

A recorded row's first `r` repeats are what a screen of `r` runs would have timed (the same warm-up, the same check),
so the screen's choice is replayed exactly; what it costs is counted in kernel runs (the check, the warm-up and the
estimate, then the timed repeats) and in bench seconds scaled by those runs.
`.venv/bin/python benchmarks/screening_sweep.py` writes results/screening/summary.md and per_shape.csv.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.measure.dataset import Dataset, load_dataset, save_dataset
from tunebench.measure.screen import Screen
from tunebench.tables import markdown_table

DATASETS = Path("results/datasets")
DEFAULT_DATASETS = (
    "matmul_bfloat16_h100.parquet",
    "matmul_bfloat16_h100_prediction.parquet",
    "matmul_bfloat16_h200_training.parquet",
    "matmul_tma_bfloat16_h200.parquet",
    "matmul_tma_bfloat16_h200_default_widened.parquet",
    "matmul_tma_bfloat16_h200_mid_widened.parquet",
    "matmul_tma_bfloat16_h100_hinted.parquet",
    "layernorm_bfloat16_h100.parquet",
    "softmax_bfloat16_h100.parquet",
)
UNTIMED_RUNS = 3  # before the timed repeats: the correctness check's run, one warm-up, the estimate that sizes them
REPEATS = (1, 3, 5)
MARGINS = (0.05, 0.10, 0.20)


def screen_latencies(repeats: Sequence[Sequence[float]], runs: int) -> np.ndarray:
    """Per row, the median of its first `runs` repeats (all of them where it has fewer)."""
    if runs < 1:
        raise ValueError(f"a screen times at least 1 run, got {runs}")
    first = np.full((len(repeats), runs), np.nan)
    for row, timings in enumerate(repeats):
        head = timings[:runs]
        first[row, :len(head)] = head
    return np.nanmedian(first, axis=1)


def screen_shape(rows: pd.DataFrame, runs: int, margin: float) -> dict[str, float]:
    """One shape's rows that ran (`latency_ms`, `repeats_ms`, `bench_s`, and `screened_ms`: their `screen_latencies`
    for `runs`); the configs within `margin` of the screened best timed again in full. Their best against the full
    sweep's, and what the two passes cost."""
    screened = rows["screened_ms"].to_numpy()
    kept = screened <= Screen(runs, margin).bound(screened.min())
    full_runs = UNTIMED_RUNS + rows["repeats_ms"].map(len).to_numpy()
    screen_runs = UNTIMED_RUNS + np.minimum(runs, full_runs - UNTIMED_RUNS)
    latency = rows["latency_ms"].to_numpy()
    bench_s = rows["bench_s"].to_numpy()
    return {"efficiency": latency.min() / latency[kept].min(), "kept": int(kept.sum()), "configs": len(rows),
            "runs": screen_runs.sum() + full_runs[kept].sum(), "full_runs": full_runs.sum(),
            "bench_s": (bench_s * screen_runs / full_runs).sum() + bench_s[kept].sum(), "full_bench_s": bench_s.sum()}


def study(dataset: Dataset, repeats: Sequence[int] = REPEATS, margins: Sequence[float] = MARGINS) -> pd.DataFrame:
    """`screen_shape` for every shape of `dataset` and every screen (runs, margin): one row each."""
    rows = dataset.measurements
    rows = rows[rows["status"] == "ok"]
    names = list(dataset.shape_names)
    found = []
    for runs in repeats:
        screened = rows.assign(screened_ms=screen_latencies(rows["repeats_ms"].tolist(), runs))
        for shape, task in screened.groupby(names, sort=True):
            for margin in margins:
                found.append({**dict(zip(names, shape)), "runs_per_config": runs, "margin": margin,
                              **screen_shape(task, runs, margin)})
    return pd.DataFrame(found)


def as_screened(dataset: Dataset, screen: Screen) -> Dataset:
    """`dataset` as a two-pass sweep with `screen` would have recorded it: each row that ran and that the screen does
    not keep holds only its first `screen.runs` repeats (and their median); the kept rows are unchanged."""
    rows = dataset.measurements.copy()
    ok = rows.index[rows["status"] == "ok"]
    screened = pd.Series(screen_latencies(rows.loc[ok, "repeats_ms"].tolist(), screen.runs), index=ok)
    best = screened.groupby([rows.loc[ok, name] for name in dataset.shape_names]).transform("min")
    dropped = ok[(screened > screen.bound(best)).to_numpy()]
    rows.loc[dropped, "repeats_ms"] = rows.loc[dropped, "repeats_ms"].map(lambda r: list(r[:screen.runs]))
    rows.loc[dropped, "latency_ms"] = screened[dropped]
    provenance = {**dataset.provenance, "screen": dataclasses.asdict(screen),
                  "screen_replayed": "rows not kept cut to their first repeats by benchmarks/screening_sweep.py"}
    return Dataset(dataset.kernel, dataset.dtype, dataset.gpu, dataset.shape_names, dataset.parameters, rows,
                   dataset.vendor, provenance)


def summarize(per_shape: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and screen: how often the full sweep's best survived, the worst shape's efficiency, the share of
    configs timed again, and the two-pass sweep's cost as a share of the full sweep's."""
    groups = per_shape.groupby(["dataset", "runs_per_config", "margin"], sort=False)
    return groups.apply(lambda g: pd.Series({
        "shapes": len(g),
        "best kept": f"{(g['efficiency'] == 1.0).sum()}/{len(g)}",
        "min efficiency": f"{g['efficiency'].min():.2%}",
        "P10 efficiency": f"{np.percentile(g['efficiency'], 10):.2%}",
        "timed in full": f"{g['kept'].sum() / g['configs'].sum():.1%}",
        "kernel runs": f"{g['runs'].sum() / g['full_runs'].sum():.1%}",
        "bench time (est.)": f"{g['bench_s'].sum() / g['full_bench_s'].sum():.1%}",
    }), include_groups=False).reset_index()


def report(per_shape: pd.DataFrame, command: str) -> str:
    table = summarize(per_shape).assign(margin=lambda t: t["margin"].map("{:.0%}".format))
    return "\n".join([
        "# Two-pass sweeps replayed: screen every config, time the near-best in full",
        "",
        f"Command: `{command}` (CPU only; replays the recorded repeats).",
        "",
        "Each shape's configs that ran are screened with the median of their first `runs per config` recorded repeats;",
        "those within `margin` of the screened best are timed in full (their recorded median). **best kept**: shapes",
        "whose full-sweep best was among them; **efficiency**: full-sweep best / best of those kept. **kernel runs**:",
        f"the two passes' runs (each config's {UNTIMED_RUNS} untimed runs, the check, warm-up and estimate, plus its",
        "timed repeats; kept configs pay the full timing again) as a share of the full sweep's; **bench time",
        "(est.)**: each row's recorded bench seconds scaled by those runs. Fixed costs per timing that do not scale",
        "with runs (the hold's 0.3 ms spin, the worker round trip) are not in the estimate, and the screen shares its",
        "round with the full median here: a GPU sitting of both passes is the check of both.",
        "",
        markdown_table(table),
        "",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", type=Path, default=[DATASETS / name for name in DEFAULT_DATASETS])
    parser.add_argument("--out", type=Path, default=Path("results/screening"))
    parser.add_argument("--write-screened", type=Path, default=None, metavar="DIR",
                        help="also write each dataset as a screen of 3 runs and a 20 %% margin would have recorded it, "
                             "to DIR/<name>_screened.parquet (for replaying strategies on it)")
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.datasets if not path.is_file()]
    if missing:
        parser.error(f"no dataset file at {', '.join(missing)}")
    frames = []
    for path in args.datasets:
        print(f"screening {path} ...", flush=True)
        dataset = load_dataset(path)
        frames.append(study(dataset).assign(dataset=path.stem))
        if args.write_screened is not None:
            save_dataset(as_screened(dataset, Screen()), args.write_screened / f"{path.stem}_screened.parquet")
    per_shape = pd.concat(frames, ignore_index=True)
    given = argv if argv is not None else sys.argv[1:]
    command = " ".join([".venv/bin/python benchmarks/screening_sweep.py", *given])
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomically(args.out / "per_shape.csv", per_shape.round(6).to_csv(index=False))
    write_text_atomically(args.out / "summary.md", report(per_shape, command))
    print(f"wrote {args.out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
