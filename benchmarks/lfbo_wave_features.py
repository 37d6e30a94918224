"""LFBO's classifier given the shape's wave features beside each config's own encoding, replayed against plain LFBO on
the recorded TMA sweeps of the 10,300-config space: does knowing how a tile count fills the SMs steer the search?

An experiment: no strategy changes. Run: `.venv/bin/python benchmarks/lfbo_wave_features.py --out
results/lfbo_wave_features` (20 seeds of 120 simulated seconds, LFBO and quick LFBO, each run with and without the
features; about 13 minutes on a 2-core machine). The six shapes are the sweeps with TALL (stops 63 and 64), the tall
configs added to the widened sweeps as `add_configs.py` does. Per run in `by_seed.csv`; `summary.md` has the medians
and the paired counts (a seed's two runs share their first population, so they differ by the features alone).
"""

from __future__ import annotations

import argparse
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from tqdm import tqdm

from tunebench.collect import dataset_records, with_added_configs
from tunebench.files import write_text_atomically
from tunebench.kernels.matmul_tma import output_tiles
from tunebench.measure.dataset import Dataset
from tunebench.measure.replay import ReplayEvaluator
from tunebench.metrics import evaluations_to_reach, seconds_to_reach
from tunebench.search import make_strategy
from tunebench.space import Space
from tunebench.study import Budget, cached_dataset, run_search
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "results/datasets"
TALL_SWEEPS = {(768, 4096, 14336): "matmul_tma_bfloat16_h200_tall.parquet",
               (192, 16384, 4096): "matmul_tma_bfloat16_h200_tall_192.parquet"}
WIDENED_SWEEPS = {(256, 11008, 4096): "matmul_tma_bfloat16_h200_mid_widened.parquet",
                  (512, 4096, 11008): "matmul_tma_bfloat16_h200_mid_widened.parquet",
                  (1024, 6144, 4096): "matmul_tma_bfloat16_h200_mid_widened.parquet",
                  (4096, 4096, 4096): "matmul_tma_bfloat16_h200_default_widened.parquet"}
TALL_ADDED = "matmul_tma_bfloat16_h200_tall_other.parquet"  # the tall configs timed later at the widened sweeps' shapes
STRATEGIES = ("lfbo", "lfbo_quick")
TARGET = 0.99  # of the sweep's best


class WaveFeatures:
    """`space`, its `encode` extended by two columns of `shape` on `sm_count` SMs: the fill of the last wave of tiles
    (tiles over whole waves' worth of SMs) and log2 of the tile count. Everything else is the space's."""

    def __init__(self, space: Space, shape: Sequence[int], sm_count: int) -> None:
        self._space, self._shape, self._sm_count = space, tuple(shape), sm_count

    def __getattr__(self, name: str) -> Any:
        return getattr(self._space, name)

    def waves(self, config: Mapping[str, Any]) -> list[float]:
        tiles = output_tiles(config, self._shape)
        return [tiles / (math.ceil(tiles / self._sm_count) * self._sm_count), math.log2(tiles)]

    def encode(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        return np.hstack([self._space.encode(configs), np.array([self.waves(config) for config in configs])])


@lru_cache(maxsize=None)
def tall_added_records() -> list[dict[str, Any]]:
    """The later sitting's tall configs as records, read once per process."""
    return dataset_records(cached_dataset(str(DATASETS / TALL_ADDED)))


@lru_cache(maxsize=None)
def sweep(shape: tuple[int, ...]) -> Dataset:
    """The 10,300-config sweep of `shape`: swept whole, or the widened sweep with the tall configs added."""
    if shape in TALL_SWEEPS:
        return cached_dataset(str(DATASETS / TALL_SWEEPS[shape]))
    return with_added_configs(cached_dataset(str(DATASETS / WIDENED_SWEEPS[shape])), tall_added_records(), [shape])


def replay(shape: tuple[int, ...], strategy: str, seed: int, waves: bool, seconds: float) -> dict[str, Any]:
    """One replayed run, and when it reached TARGET of the sweep's best and 0.99x cuBLAS."""
    dataset = sweep(shape)
    evaluator = ReplayEvaluator(dataset, shape, mode="deterministic", seed=seed)
    space = WaveFeatures(evaluator.space, shape, int(dataset.provenance["sm_count"])) if waves else evaluator.space
    trace = run_search(make_strategy(strategy, space, seed=seed), evaluator, Budget(seconds=seconds))
    best, time_s = trace.best_ms.to_numpy(), trace.time_s.to_numpy()
    vendor_ms, optimum_ms = dataset.vendor_ms(shape), dataset.task(shape).latency_ms.min()
    return {"shape": "x".join(map(str, shape)), "strategy": strategy, "waves": waves, "seed": seed,
            "evaluations": len(trace), "best vs cuBLAS": vendor_ms / best.min(),
            f"s to {TARGET} of best": seconds_to_reach(best, time_s, optimum_ms, TARGET),
            f"evals to {TARGET} of best": evaluations_to_reach(best, optimum_ms, TARGET),
            "s to 0.99x cuBLAS": seconds_to_reach(best, time_s, vendor_ms, 0.99)}


def summary(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per shape and strategy, each arm's medians (never = inf) and share of seeds at TARGET; and per strategy, the
    paired counts by evaluations, which replay exactly (seconds include the strategy's own CPU time on the machine
    replaying): seeds that got there with the features only, without them only, and of those with both, which got
    there in fewer evaluations."""
    seconds, evaluations = f"s to {TARGET} of best", f"evals to {TARGET} of best"
    never = runs.fillna({seconds: np.inf, evaluations: np.inf})
    rows = []
    for (shape, strategy), part in never.groupby(["shape", "strategy"], sort=False):
        row = {"shape": shape, "strategy": strategy}
        for waves, arm in part.groupby("waves"):
            label = "with" if waves else "without"
            row[f"{label}: median {seconds}"] = round(float(arm[seconds].median()), 1)
            row[f"{label}: median evals"] = float(arm[evaluations].median())
            row[f"{label}: seeds there"] = f"{(arm[seconds] < np.inf).mean():.0%}"
        rows.append(row)
    paired = []
    for strategy, part in runs.pivot_table(index=["strategy", "shape", "seed"], columns="waves", values=evaluations,
                                           aggfunc="first", dropna=False).groupby(level="strategy", sort=False):
        with_, without = part[True], part[False]
        both = with_.notna() & without.notna()
        paired.append({"strategy": strategy, "runs": len(part),
                       "there with the features only": int((with_.notna() & without.isna()).sum()),
                       "there without them only": int((with_.isna() & without.notna()).sum()),
                       "both: fewer evals with": int((with_[both] < without[both]).sum()),
                       "both: fewer evals without": int((with_[both] > without[both]).sum()),
                       "both: median evals ratio with / without": round(float((with_[both] / without[both]).median()),
                                                                         3)})
    return pd.DataFrame(rows), pd.DataFrame(paired)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--shapes", nargs="*", default=None, help="MxNxK of the six (default: all)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    known = [*TALL_SWEEPS, *WIDENED_SWEEPS]
    shapes = known if args.shapes is None else [tuple(int(size) for size in text.split("x")) for text in args.shapes]
    unknown = [shape for shape in shapes if shape not in known]
    if unknown:
        parser.error(f"no sweep with TALL of {unknown}; known: {', '.join('x'.join(map(str, s)) for s in known)}")
    jobs = [(shape, strategy, seed, waves, args.seconds) for shape in shapes for strategy in STRATEGIES
            for seed in range(args.seeds) for waves in (False, True)]
    with ProcessPoolExecutor(args.workers) as pool:
        runs = pd.DataFrame(list(tqdm(pool.map(replay, *zip(*jobs), chunksize=4), total=len(jobs), unit="run")))
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomically(args.out / "by_seed.csv", runs.to_csv(index=False, float_format="%.4g"))
    medians, paired = summary(runs)
    write_text_atomically(args.out / "summary.md", "\n\n".join([
        "# LFBO with the shape's wave features, replayed", f"Command: `.venv/bin/python {' '.join(sys.argv)}`",
        f"{args.seeds} seeds of {args.seconds:g} simulated seconds per strategy and shape, each seed run without and "
        "with two more columns for the classifier: the fill of the last wave of tiles on the GPU's SMs and log2 of "
        "the tile count (`WaveFeatures`). Medians over seeds (never: inf):", markdown_table(medians),
        "Paired by seed over the shapes:", markdown_table(paired), "Per run: `by_seed.csv`."]) + "\n")
    print(markdown_table(paired))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
