"""What not knowing the faster GEMM family costs a search: on the shapes swept with both the pointer and the TMA GEMM
on one GPU model, each family's search alone, both in turn and a race that probes both and keeps the leader
(`tunebench.family_race`), replayed; seconds to 0.99 of the faster family's recorded best, and where each ends.

`.venv/bin/python benchmarks/family_race.py` (resumable: runs are cached under results/family_race/study.runs/) writes
results/family_race/summary.md.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Sequence

import pandas as pd

from tunebench.family_race import policy_trace
from tunebench.files import write_text_atomically
from tunebench.metrics import median_with_ci, seconds_to_reach
from tunebench.search import check_strategy_names
from tunebench.study import Budget, Task, open_dataset, run_study
from tunebench.tables import markdown_table

DATASETS = Path("results/datasets")
# (GPU, the pointer GEMM's dataset, the TMA GEMM's, the shapes both hold). The H200's pointer data, and the H100's at
# the pointer GEMM's widest gaps to cuBLAS (results/gemm_families/pointer_gaps_h100.md), is the prediction dataset's
# 600 candidates; the H200's TMA data the sweep with widened tiles (tall tiles lose at three of the four shapes and
# were swept at the fourth apart, docs/tma_gemm.md); the H100's at the gaps a two-pass sweep (`--screen-runs 3`).
PAIRS = (
    ("H100", DATASETS / "matmul_bfloat16_h100.parquet", DATASETS / "matmul_tma_bfloat16_h100_hinted.parquet",
     ((200, 3000, 5000), (1000, 5000, 3000))),
    # The gap shapes with M <= 72 from the sweeps of split-K in one launch (stop 91; both families' split configs
    # swept again there), the others from the gap sweep, which holds no split config of the TMA GEMM.
    ("H100", DATASETS / "matmul_bfloat16_h100_small_m_one_launch.parquet",
     DATASETS / "matmul_tma_bfloat16_h100_split_k_one_launch.parquet",
     ((2, 712, 4648), (6, 960, 5120), (36, 616, 13192), (72, 1280, 8192))),
    ("H100", DATASETS / "matmul_bfloat16_h100_prediction.parquet", DATASETS / "matmul_tma_bfloat16_h100_gaps.parquet",
     ((341, 1688, 8440), (404, 5120, 8192), (1161, 3456, 5120), (8192, 5000, 3000))),
    ("H200", DATASETS / "matmul_bfloat16_h200_prediction.parquet",
     DATASETS / "matmul_tma_bfloat16_h200_mid_widened.parquet",
     ((256, 11008, 4096), (512, 4096, 11008), (768, 4096, 14336), (1024, 6144, 4096))),
)
FAMILIES = ("pointer", "TMA")
# policy label -> (policy, the families it searches in order, probe batches, margin)
ARMS = {
    "pointer alone": ("alone", ("pointer",), 1, 0.0),
    "TMA alone": ("alone", ("TMA",), 1, 0.0),
    "both in turn, pointer first": ("in turn", ("pointer", "TMA"), 1, 0.0),
    "race, one batch each": ("race", ("pointer", "TMA"), 1, 0.0),
    "race, two batches each": ("race", ("pointer", "TMA"), 2, 0.0),
    "race, on while within 5 %": ("race", ("pointer", "TMA"), 1, 0.05),
    "race, on while within 10 %": ("race", ("pointer", "TMA"), 1, 0.10),
}
RACES = tuple(label for label, (policy, *_) in ARMS.items() if policy == "race")
CHOSEN = "race, setting chosen on the other shapes"
TARGET = 0.99
OUT = Path("results/family_race")


def tasks() -> list[tuple[str, tuple[int, int, int], dict[str, Task]]]:
    """(GPU, shape, {family: its task}) for every shape of PAIRS."""
    return [(gpu, shape, {"pointer": Task(str(pointer), shape), "TMA": Task(str(tma), shape)})
            for gpu, pointer, tma, shapes in PAIRS for shape in shapes]


def arm_rows(traces: dict[str, pd.DataFrame], optimum_ms: float) -> list[dict]:
    """Per arm: seconds to TARGET of `optimum_ms`, the seconds until it ends, its final fraction and the family whose
    config it ends with."""
    rows = []
    for label, (policy, families, probes, margin) in ARMS.items():
        combined = policy_trace(policy, {family: traces[family] for family in families}, probes, margin)
        final = combined.iloc[-1]
        found = combined[combined["latency_ms"] == final["best_ms"]]
        rows.append({"arm": label, "seconds to target": seconds_to_reach(combined["best_ms"], combined["time_s"],
                                                                         optimum_ms, TARGET),
                     "seconds": final["time_s"], "final fraction": optimum_ms / final["best_ms"],
                     "ends on": found["family"].iloc[0] if len(found) else "none"})
    return rows


def evaluate(trace: pd.DataFrame, seeds: Sequence[int]) -> pd.DataFrame:
    """Every arm on every shape and seed, from the families' replayed runs in `trace` (a `run_study` table); `extra s`
    is an arm's seconds to TARGET less those of the faster family's search alone in the same seed (NaN where either
    never gets there)."""
    rows = []
    for gpu, shape, family_tasks in tasks():
        optima = {family: open_dataset(task.dataset).optimum_ms(shape) for family, task in family_tasks.items()}
        faster = min(optima, key=optima.get)
        for seed in seeds:
            traces = {family: trace[(trace["task"] == task.name) & (trace["seed"] == seed)].sort_values("eval_index")
                      for family, task in family_tasks.items()}
            arms = arm_rows(traces, optima[faster])
            oracle = next(row["seconds to target"] for row in arms if row["arm"] == f"{faster} alone")
            rows += [{"gpu": gpu, "shape": "x".join(map(str, shape)), "seed": seed, "faster family": faster, **row,
                      "extra s": row["seconds to target"] - oracle} for row in arms]
    return pd.DataFrame(rows)


def choose_race(runs: pd.DataFrame) -> str:
    """Of the race settings (arms of RACES) that `runs` hold, the one with the largest share of runs reaching TARGET,
    then the smallest median paired extra seconds (ties: the earlier arm)."""
    def merit(label: str) -> tuple[float, float]:
        arm = runs[runs["arm"] == label]
        extra = arm["extra s"].median()
        return -arm["seconds to target"].notna().mean(), extra if pd.notna(extra) else math.inf
    held = [label for label in RACES if (runs["arm"] == label).any()]
    if not held:
        raise ValueError(f"no runs of a race setting to choose from; settings: {', '.join(RACES)}")
    return min(held, key=merit)


def with_held_out_choice(results: pd.DataFrame) -> pd.DataFrame:
    """`results` with the arm CHOSEN: at each shape, the race setting that `choose_race` picks on the other shapes'
    runs, so that the margin and probe are tuned on some shapes and reported on another (`chosen` names it)."""
    held_out = []
    for shape in results["shape"].unique():
        setting = choose_race(results[results["shape"] != shape])
        rows = results[(results["shape"] == shape) & (results["arm"] == setting)]
        held_out.append(rows.assign(arm=CHOSEN, chosen=setting))
    return pd.concat([results, *held_out], ignore_index=True)


def _median(values: pd.Series) -> str:
    median, low, high = median_with_ci(values.fillna(math.inf).to_numpy())
    text = [("∞" if math.isinf(v) else f"{v:.1f}") for v in (median, low, high)]
    return f"{text[0]} [{text[1]}, {text[2]}]"


def summary_tables(results: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per shape and arm, and over all shapes per arm: medians over seeds (and shapes) of the seconds to TARGET (with
    95 % intervals; never = ∞), runs that reach it, the median of the paired extra seconds over searching the faster
    family alone, seconds until the arm ends, the final fraction, and which family the runs end on."""
    def table(groups, names: Sequence[str]) -> pd.DataFrame:
        return pd.DataFrame([{**dict(zip(names, keys)),
                              f"s to {TARGET}": _median(group["seconds to target"]),
                              "runs reaching it": f"{group['seconds to target'].notna().mean():.0%}",
                              "extra s, paired": (round(float(group["extra s"].median()), 1)
                                                  if group["extra s"].notna().any() else "n/a"),
                              "s until it ends": round(float(group["seconds"].median()), 1),
                              "final fraction": round(float(group["final fraction"].median()), 3),
                              "ends on TMA": f"{(group['ends on'] == 'TMA').mean():.0%}"}
                             for keys, group in groups])
    per_shape = table(results.groupby(["shape", "arm"], sort=False), ["shape", "arm"])
    overall = table((((arm,), group) for arm, group in results.groupby("arm", sort=False)), ["arm"])
    return per_shape, overall


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategy", default="lfbo")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=300.0, help="each family's search's simulated budget")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.seeds < 1 or not args.seconds > 0 or args.workers < 1:
        parser.error(f"--seeds and --workers must be >= 1 and --seconds > 0, got {args.seeds}, {args.workers} and "
                     f"{args.seconds}")
    try:
        check_strategy_names([args.strategy])
    except ValueError as error:
        parser.error(str(error))
    seeds = list(range(args.seeds))
    all_tasks = [task for _, _, family_tasks in tasks() for task in family_tasks.values()]
    trace = run_study([args.strategy], all_tasks, seeds, Budget(seconds=args.seconds),
                      args.out / f"study_{args.strategy}.parquet", workers=args.workers)
    results = with_held_out_choice(evaluate(trace, seeds))
    per_shape, overall = summary_tables(results)
    command = " ".join([".venv/bin/python benchmarks/family_race.py", *(sys.argv[1:] if argv is None else argv)])
    text = "\n".join([
        f"# Searching both GEMM families, replayed: {args.strategy}, {args.seeds} seeds", "",
        f"Command: `{command}`. Each family's search is {args.strategy} on the family's recorded sweep, replayed on the "
        f"sequential clock until it stops by itself or after {args.seconds:g} simulated seconds; the arms order whole "
        "batches of those runs on one clock (`tunebench.family_race`). The target is "
        f"{TARGET} of the faster family's recorded best at the shape. Medians over seeds with 95 % intervals; a run "
        "that never reaches the target counts as ∞. `extra s, paired`: the median over runs that both reach the target "
        "of the arm's seconds less those of the faster family's search alone with the same seed.", "",
        f"`{CHOSEN}`: at each shape, the race setting with the most runs reaching the target on the other shapes, "
        "then the smallest paired extra seconds there (leave one shape out), scored on the shape it was not chosen "
        "on. Chosen: " + ", ".join(f"{shape}: {setting}" for shape, setting in results.dropna(subset=["chosen"])
                                   .groupby("shape", sort=False)["chosen"].first().items()) + ".", "",
        "## Over the shapes (every shape and seed pooled)", "", markdown_table(overall), "",
        "## Per shape", "", markdown_table(per_shape), ""])
    write_text_atomically(args.out / f"summary_{args.strategy}.md", text)
    results.to_csv(args.out / f"per_run_{args.strategy}.csv", index=False, float_format="%.6g")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
