"""What one recorded sitting credits: each shape's recorded top configs timed again in shuffled rounds, so that the
fastest by their medians over rounds can be judged by the recorded sitting, and the recorded best by the rounds.

First, anywhere: `.venv/bin/python benchmarks/sitting_ceiling.py --write-plan
results/config_prediction/sitting_ceiling_plan.csv` (from the H200 prediction dataset by default). Then on a GPU of
the dataset's model: `PYTHONPATH=lib python3 benchmarks/sitting_ceiling.py --plan
results/config_prediction/sitting_ceiling_plan.csv --out results/config_prediction/sitting_ceiling_h200.csv` (a
killed run resumes by round). Then anywhere: `.venv/bin/python benchmarks/sitting_ceiling.py --summarize --out
results/config_prediction/sitting_ceiling_h200.csv`, which writes the tables beside it (`.md`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from config_prediction import TRANSFER_DATASET, mean_p10_min
from tunebench.measure.dataset import load_dataset
from tunebench.measure.rounds import rounds_command, time_in_rounds
from tunebench.measure.timing import TimingPolicy
from tunebench.predict.evaluation import alignment, family
from tunebench.predict.model import common_candidates
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
TOP = 12  # each shape's recorded fastest candidates
ROUNDS = 4
SHAPE = ["M", "N", "K"]
PLAN_EXTRA = ("recorded_rank", "recorded_ms")


def plan(dataset_path: Path) -> pd.DataFrame:
    """Per shape, the TOP candidates that ran fastest in the recorded dataset, with their rank and latency there."""
    dataset = load_dataset(dataset_path, kernel="matmul")
    names = list(dataset.parameter_names)
    rows = dataset.measurements.merge(pd.DataFrame(common_candidates(dataset), columns=names), on=names)
    rows = rows[rows["status"] == "ok"].sort_values([*SHAPE, "latency_ms"], kind="stable")
    top = rows.groupby(SHAPE, sort=True).head(TOP)
    top = top.assign(recorded_rank=top.groupby(SHAPE, sort=False).cumcount(), recorded_ms=top["latency_ms"])
    return top[[*SHAPE, *PLAN_EXTRA, *names]].reset_index(drop=True)


def per_shape(timings: pd.DataFrame) -> pd.DataFrame:
    """Per shape: the recorded best judged by the rounds (fastest median over rounds / the recorded best's median)
    and the rounds' fastest judged by the recorded sitting (recorded best / that config's recorded latency)."""
    ok = timings[timings["status"] == "ok"]
    medians = ok.groupby([*SHAPE, "recorded_rank", "recorded_ms"])["latency_ms"].median().reset_index()
    rows = []
    for shape, group in medians.groupby(SHAPE):
        recorded_best = group.loc[group["recorded_rank"].idxmin()]
        rounds_best = group.loc[group["latency_ms"].idxmin()]
        rows.append({**dict(zip(SHAPE, shape)), "recorded_best_by_rounds": rounds_best["latency_ms"]
                     / recorded_best["latency_ms"], "rounds_best_by_recording": recorded_best["recorded_ms"]
                     / rounds_best["recorded_ms"], "recorded_best_stays_best": recorded_best["recorded_rank"]
                     == rounds_best["recorded_rank"], "rounds_best_recorded_rank": int(rounds_best["recorded_rank"]),
                     "recorded_over_rounds": recorded_best["recorded_ms"] / recorded_best["latency_ms"]})
    table = pd.DataFrame(rows)
    return table.assign(family=[family(m) for m in table["M"]],
                        alignment=[alignment(n, k) for n, k in zip(table["N"], table["K"])])


def summarize(out: Path, command: str) -> str:
    timings = pd.read_csv(out)
    table = per_shape(timings)
    groups = [("all", table), *table.groupby("alignment", sort=False), *table.groupby("family", sort=True)]
    lines = [{"shapes": name, "count": len(part),
              "the rounds' fastest, judged by the recorded sitting (a right pick's credit)":
                  mean_p10_min(part["rounds_best_by_recording"]),
              "the recorded best, judged by the rounds": mean_p10_min(part["recorded_best_by_rounds"]),
              "recorded best still fastest": f"{100 * part['recorded_best_stays_best'].mean():.0f} %",
              "recorded best's latency / its median over rounds (median)":
                  f"{part['recorded_over_rounds'].median():.4f}"}
             for name, part in groups]
    return "\n\n".join([
        "# What one sitting credits",
        f"Command: `{command}`. The timings: `PYTHONPATH=lib python3 benchmarks/sitting_ceiling.py --plan "
        f"results/config_prediction/sitting_ceiling_plan.csv --out {os.path.relpath(out, REPO)}` on "
        f"{timings['gpu'].iloc[0]}: each shape's recorded {TOP} fastest candidates, {timings['round'].nunique()} "
        "rounds, each round every config once in a seeded shuffled order (the default timing policy). Mean / P10 / "
        "min over shapes. A config's latency in the rounds is its median over them.",
        markdown_table(pd.DataFrame(lines)),
    ]) + "\n"


def time_plan(out: Path, configs: pd.DataFrame, seed: int) -> None:
    """Time the plan's configs in ROUNDS rounds under the default policy."""
    names = [column for column in configs.columns if column not in (*SHAPE, *PLAN_EXTRA)]
    time_in_rounds(out, configs, SHAPE, names, {"default": TimingPolicy()}, ROUNDS, seed)


def main() -> int:
    return rounds_command(__doc__.split("\n\n")[0], REPO, TRANSFER_DATASET, plan, time_plan, summarize)


if __name__ == "__main__":
    raise SystemExit(main())
