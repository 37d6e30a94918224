"""The warm start's tail: the replayed runs whose seeds (the model's top k) fall short of the target, and what each
variant of the search then needs, from `benchmarks/config_prediction.py`'s recorded runs (warm_start.csv).

Run: `.venv/bin/python benchmarks/warm_start_tail.py` (seconds; CPU). Reads results/config_prediction/warm_start.csv;
writes results/config_prediction/warm_start_tail.md.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import pandas as pd

from config_prediction import SEARCH_BUDGET, TARGET, TOP_K_SEEDS
from warm_start_variants import reach_summary
from tunebench.files import write_text_atomically
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "results" / "config_prediction" / "warm_start.csv"
OUT = REPO / "results" / "config_prediction" / "warm_start_tail.md"
RUN = ["M", "N", "K", "strategy", "seed"]


def tail_runs(runs: pd.DataFrame, seeds: int = TOP_K_SEEDS) -> pd.DataFrame:
    """One row per (shape, strategy, seed) whose `warm` run needed more than its `seeds` evaluations (or never got
    there); a column per variant with its evaluations to the target (NaN: not reached)."""
    table = runs.set_index([*RUN, "variant"])["evals_to_target"].unstack("variant")
    if "warm" not in table:
        raise ValueError(f"no 'warm' runs among the variants {sorted(runs['variant'].unique())}")
    missed = table["warm"].isna() | (table["warm"] > seeds)
    return table[missed].reset_index()


def tail_table(tail: pd.DataFrame, variants: list[str]) -> pd.DataFrame:
    """`warm_start_variants.reach_summary` per strategy and variant, over the tail's runs."""
    return pd.DataFrame([{"strategy": strategy, "variant": variant, "tail runs": len(group),
                          **reach_summary(group[variant].to_numpy(dtype=float))}
                         for strategy, group in tail.groupby("strategy", sort=False) for variant in variants])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=RUNS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    runs = pd.read_csv(args.runs)
    tail = tail_runs(runs)
    variants = [variant for variant in ("warm", "warm-30", "cold", "cold-30") if variant in tail]
    all_runs = runs[RUN].drop_duplicates()["strategy"].value_counts()
    counts = ", ".join(f"{strategy} {int((tail.strategy == strategy).sum())} of {all_runs[strategy]}"
                       for strategy in tail.strategy.unique())
    source = args.runs.relative_to(REPO) if args.runs.is_relative_to(REPO) else args.runs
    paragraphs = [
        f"Command: `.venv/bin/python benchmarks/warm_start_tail.py --runs {source}` (from "
        "`benchmarks/config_prediction.py`'s replayed runs: each held-out shape seeded by its own fold's model, "
        f"replayed on the shape's recorded candidates, evaluations counted to {TARGET} of the recorded optimum, "
        f"at most {SEARCH_BUDGET}).",
        f"The tail: the runs whose warm start needed more than its {TOP_K_SEEDS} seeds, or never got there ({counts} "
        "runs). On every other run each warm variant measures the seeds first and gets there within them. `warm`: the "
        "seeds, then the inner strategy's default initial population of 100 (the seeds and 90 random configs) before "
        "its search copies start; `warm-30`: the seeds and 20 random; `cold` and `cold-30`: the same searches "
        "unseeded, on the same runs. A run that never got there counts as infinite.",
    ]
    text = "\n\n".join(["# The warm start's tail", *map(textwrap.fill, paragraphs, [120] * len(paragraphs)),
                         markdown_table(tail_table(tail, variants))]) + "\n"
    write_text_atomically(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
