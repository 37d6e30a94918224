"""Whether the gap between schedule-identical twins (`predict.twins`) is noise that more repeats or more rounds remove:
twin pairs of short GEMMs timed in shuffled rounds, under the default timing policy and one with more repeats.

First, anywhere, the pairs from the recorded dataset: `.venv/bin/python benchmarks/twin_noise.py --write-plan
results/config_prediction/twin_noise_plan.csv`. Then on a GPU machine (a few minutes; a killed run resumes by round):
`PYTHONPATH=lib python3 benchmarks/twin_noise.py --plan results/config_prediction/twin_noise_plan.csv --out
results/config_prediction/twin_noise.csv`. Then anywhere: `.venv/bin/python benchmarks/twin_noise.py --summarize
--out results/config_prediction/twin_noise.csv`, which writes the table beside it (`.md`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from config_prediction import DATASET
from tunebench.measure.dataset import load_dataset
from tunebench.measure.rounds import rounds_command, time_in_rounds
from tunebench.measure.timing import TimingPolicy
from tunebench.predict.model import common_candidates
from tunebench.predict.twins import apart, twin_pairs
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
SHAPES_TIMED = 10  # short shapes, spread over the recorded best latencies of those whose best has a twin
PAIRS_PER_SHAPE = 12  # the pairs whose faster twin was recorded fastest
ROUNDS = 6
LONG_POLICY = {"target_ms": 40.0, "max_repeats": 200}  # against the default 10 ms and 30 repeats
SHAPE = ["M", "N", "K"]


def plan(dataset_path: Path) -> pd.DataFrame:
    """The twin pairs to time: per chosen shape, the recorded dataset's fastest PAIRS_PER_SHAPE pairs (both configs,
    one row each, `pair` numbering the pair within the shape)."""
    dataset = load_dataset(dataset_path, kernel="matmul")
    names = list(dataset.parameter_names)
    rows = dataset.measurements.merge(pd.DataFrame(common_candidates(dataset), columns=names), on=names)
    pairs = twin_pairs(rows, names)
    pairs = pairs.assign(faster_ms=np.minimum(pairs["latency_ms_a"], pairs["latency_ms_b"]))
    best = rows[rows["status"] == "ok"].groupby(SHAPE)["latency_ms"].min().rename("best_ms").reset_index()
    with_twin = best.merge(pairs[[*SHAPE, "faster_ms"]], on=SHAPE)
    with_twin = with_twin[with_twin["faster_ms"] == with_twin["best_ms"]].drop_duplicates(SHAPE)
    ordered = with_twin.sort_values("best_ms", kind="stable").reset_index(drop=True)
    chosen = ordered.iloc[np.linspace(0, len(ordered) - 1, SHAPES_TIMED).round().astype(int)][SHAPE]
    picked = pairs.merge(chosen, on=SHAPE).sort_values([*SHAPE, "faster_ms"], kind="stable")
    picked = picked.groupby(SHAPE, sort=False).head(PAIRS_PER_SHAPE)
    picked = picked.assign(pair=picked.groupby(SHAPE, sort=False).cumcount())
    other = [name for name in names if name != "GROUP_M"]
    sides = [picked[[*SHAPE, "pair", *other, f"GROUP_M_{side}"]].rename(columns={f"GROUP_M_{side}": "GROUP_M"})
             for side in ("a", "b")]
    return pd.concat(sides).sort_values([*SHAPE, "pair", "GROUP_M"]).reset_index(drop=True)[[*SHAPE, "pair", *names]]


def summarize(out: Path, command: str) -> str:
    """Per policy: how far twins lie apart in one round and after taking each config's median over rounds, how far
    one config's timings move between rounds, and how many pairs differ beyond their rounds' scatter."""
    frame = pd.read_csv(out)
    frame = frame[frame["status"] == "ok"]
    names = [column for column in frame.columns if column not in (*SHAPE, "pair", "policy", "round", "status",
                                                                 "latency_ms", "repeats", "gpu", "GROUP_M")]
    lines = []
    for policy, part in frame.groupby("policy", sort=False):
        key = [*SHAPE, "pair"]
        per_round = part.pivot_table(index=[*key, "round"], columns="GROUP_M", values="latency_ms").dropna()
        medians = part.groupby([*key, "GROUP_M"])["latency_ms"].median().unstack("GROUP_M").dropna()
        across = part.groupby([*key, "GROUP_M"])["latency_ms"].agg(lambda v: (v.max() - v.min()) / v.median())
        one, pooled = apart(per_round.iloc[:, 0], per_round.iloc[:, 1]), apart(medians.iloc[:, 0], medians.iloc[:, 1])
        log_ratio = np.log(per_round.iloc[:, 0] / per_round.iloc[:, 1]).groupby(key)
        t_statistic = log_ratio.mean() / (log_ratio.std() / np.sqrt(log_ratio.count()))
        lines.append({"policy": policy, "repeats per timing (median)": int(part["repeats"].median()),
                      "twin pairs": len(medians), "rounds": part["round"].nunique(),
                      "twins apart, one round: median / P90": f"{100 * np.median(one):.2f} / "
                                                              f"{100 * np.percentile(one, 90):.2f} %",
                      "twins apart, medians over rounds: median / P90": f"{100 * np.median(pooled):.2f} / "
                                                                        f"{100 * np.percentile(pooled, 90):.2f} %",
                      "one config across rounds, (max - min) / median: median / P90":
                          f"{100 * across.median():.2f} / {100 * across.quantile(0.9):.2f} %",
                      "pairs whose mean log ratio is over 4 standard errors from 0":
                          f"{int((t_statistic.abs() > 4).sum())} of {len(t_statistic)}"})
    shapes = frame.groupby(SHAPE)["latency_ms"].min()
    return "\n\n".join([
        "# Twins timed in rounds",
        f"Command: `{command}`. The timings: `PYTHONPATH=lib python3 benchmarks/twin_noise.py --plan "
        f"results/config_prediction/twin_noise_plan.csv --out {os.path.relpath(out, REPO)}` on {frame['gpu'].iloc[0]}, "
        f"{ROUNDS} rounds per policy, each round every config once in a seeded shuffled order. {len(shapes)} shapes "
        f"(fastest timing {1000 * shapes.min():.1f} to {1000 * shapes.max():.1f} us), {PAIRS_PER_SHAPE} twin pairs "
        f"each (configs {', '.join(names)} equal, GROUP_M 1 and 8, one tile row).",
        markdown_table(pd.DataFrame(lines)),
    ]) + "\n"


def time_plan(out: Path, configs: pd.DataFrame, seed: int) -> None:
    """Time the plan's pairs in ROUNDS rounds under the default policy, then under LONG_POLICY."""
    names = [column for column in configs.columns if column not in (*SHAPE, "pair")]
    policies = {"default": TimingPolicy(), "long": TimingPolicy(**LONG_POLICY)}
    time_in_rounds(out, configs, SHAPE, names, policies, ROUNDS, seed)


def main() -> int:
    return rounds_command(__doc__.split("\n\n")[0], REPO, DATASET, plan, time_plan, summarize)


if __name__ == "__main__":
    raise SystemExit(main())
