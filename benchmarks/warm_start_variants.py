"""Warm-start variants replayed on preregistered shapes: each shape seeded by the top 10 that a predictor committed
before the shape was measured, on the shapes where those seeds fall short of the target.

Run: `.venv/bin/python benchmarks/warm_start_variants.py` (about 9 minutes on 2 cores; CPU; `--budget`, `--strategies`
and `--variants` narrow or widen it: `--budget 600` took 34 minutes). Reads the preregistered picks
(results/config_prediction/preregistered_picks*.csv) and the preregistered H100 datasets; writes
results/config_prediction/warm_start_variants.md and warm_start_variants.csv (one row per run; `--out` elsewhere).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import textwrap
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from config_prediction import SEARCH_BUDGET, SMALL_POPULATION, TARGET, TOP_K_SEEDS, search_run
from tunebench.files import write_text_atomically
from tunebench.kernels import matmul
from tunebench.measure.dataset import load_dataset
from tunebench.search.warm_start import RESTART_GAIN
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
PICKS = "results/config_prediction/preregistered_picks*.csv"
DATASETS = "results/datasets/matmul_bfloat16_h100_preregistered*.parquet"
OUT = REPO / "results" / "config_prediction" / "warm_start_variants.md"
# `config_prediction.search_run`'s variants: unseeded; seeded, then the inner strategy's default population (100);
# seeded, then a population of SMALL_POPULATION; seeded with WarmStartSettings.restart, and with a restart_patience of 1
VARIANTS = ("cold", "warm", "warm-30", "warm-restart", "warm-restart-1")
STRATEGIES = ("lfbo", "pattern")


def seeded_shapes(picks: pd.DataFrame, datasets: list[Path]) -> pd.DataFrame:
    """Per preregistered shape with a recorded dataset: its dataset, its committed top configs, and the best of them
    as a fraction of the shape's recorded optimum (a seed the dataset lacks counts as never running)."""
    names = matmul.config_space().names
    rows = {}
    for path in datasets:
        measured = load_dataset(path, kernel="matmul").measurements
        for shape, group in measured[measured.status == "ok"].groupby(["M", "N", "K"]):
            rows[tuple(map(int, shape))] = (path, group.set_index(list(names))["latency_ms"])
    table = []
    for pick in picks.drop_duplicates(["M", "N", "K"]).itertuples():
        shape = (int(pick.M), int(pick.N), int(pick.K))
        if shape not in rows:
            continue
        path, latency = rows[shape]
        seeds = [dict(zip(names, map(int, config.split(",")))) for config in pick.top10_configs.split(";")]
        best_seed = min(latency.get(tuple(seed.values()), math.inf) for seed in seeds)
        table.append({"M": shape[0], "N": shape[1], "K": shape[2], "dataset": str(path), "seeds": seeds,
                      "seeds_share": float(latency.min() / best_seed)})
    return pd.DataFrame(table)


def reach_summary(values: np.ndarray) -> dict[str, str]:
    """Of runs' evaluations to the target (NaN: never reached): how many reached it, the median and P75 (a run that
    never did counts as infinite), and the share within 20, 50 and 100 evaluations."""
    counted = np.where(np.isnan(values), np.inf, values)
    return {"reached": f"{int(np.sum(~np.isnan(values)))} ({np.mean(~np.isnan(values)):.0%})",
            "median evals": f"{np.median(counted):.0f}", "P75": f"{np.percentile(counted, 75, method='higher'):.0f}",
            **{f"within {n}": f"{np.mean(counted <= n):.0%}" for n in (20, 50, 100)}}


def variant_table(runs: pd.DataFrame) -> pd.DataFrame:
    """`reach_summary` per strategy and variant, and the median evaluations a run spent before it stopped by itself
    or at the budget."""
    return pd.DataFrame([{"strategy": strategy, "variant": variant, "runs": len(group),
                          **reach_summary(group["evals_to_target"].to_numpy(dtype=float)),
                          "median evals spent": f"{group['evaluations'].median():.0f}"}
                         for (strategy, variant), group in runs.groupby(["strategy", "variant"], sort=False)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="search seeds per shape, strategy and variant")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--budget", type=int, default=SEARCH_BUDGET, help="evaluations per run at most")
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.budget < 1:
        parser.error(f"--budget {args.budget}: give a positive number of evaluations")
    picks = pd.concat([pd.read_csv(path) for path in sorted(REPO.glob(PICKS))], ignore_index=True)
    shapes = seeded_shapes(picks, sorted(REPO.glob(DATASETS)))
    tail = shapes[shapes.seeds_share < TARGET]
    # Each run goes on past the target, to its own end or the budget, so that what it spends is counted too.
    jobs = [(row.dataset, (row.M, row.N, row.K), strategy, variant, row.seeds, seed, False, args.budget)
            for row in tail.itertuples() for strategy in args.strategies for variant in args.variants
            for seed in range(args.seeds)]
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        runs = pd.DataFrame(list(tqdm(pool.map(search_run, *zip(*jobs), chunksize=2), total=len(jobs),
                                      desc="warm-start variants", unit="run", mininterval=5.0)))
    elapsed = time.perf_counter() - started
    write_text_atomically(args.out.with_suffix(".csv"), runs.to_csv(index=False))
    command = "python " + " ".join([os.path.relpath(sys.argv[0], REPO), *(argv if argv is not None else sys.argv[1:])])
    paragraphs = [
        f"Command: `{command}` ({len(jobs)} replayed runs in {elapsed:.0f} s on {args.workers} processes).",
        f"Seeds: the top {TOP_K_SEEDS} configs that the predictor deployed at each preregistration committed "
        f"(`{PICKS}`) before the shape was measured, so every shape is held out. Of the {len(shapes)} preregistered "
        f"shapes with a recorded dataset (`{DATASETS}`), the best seed reaches {TARGET} of the recorded optimum on "
        f"{len(shapes) - len(tail)}: there every warm variant gets there within its seeds. The table is the other "
        f"{len(tail)} shapes, {args.seeds} search seeds each, replayed on the shape's recorded candidates, evaluations "
        f"counted to {TARGET} of the recorded optimum, at most {args.budget}; a run that never got there counts as "
        "infinite. Every run goes on past the target until it stops by itself or reaches the budget: `median evals "
        "spent` counts those evaluations.",
        "`warm`: the seeds, then the inner strategy's initial population of 100 (the seeds and 90 random configs) "
        f"before its search copies start; `warm-{SMALL_POPULATION}`: the seeds and {SMALL_POPULATION - TOP_K_SEEDS} "
        "random; `warm-restart` (`WarmStartSettings.restart`): the seeds alone are the population, and a fresh, "
        "unseeded run follows each time a run stops; `warm-restart-1`: the same, ending after the first fresh run "
        f"that lowers the best latency by less than {RESTART_GAIN:.0%} (`restart_patience=1`).",
    ]
    text = "\n\n".join(["# Warm-start variants where the seeds fall short",
                        *(textwrap.fill(paragraph, 120, break_on_hyphens=False) for paragraph in paragraphs),
                        markdown_table(variant_table(runs))]) + "\n"
    write_text_atomically(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
