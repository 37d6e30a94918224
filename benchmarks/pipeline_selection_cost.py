"""What the pipeline selection costs: the autotuner replayed on a recorded compressed_matmul dataset under several
strategies, budgets per pipeline and seeds, against the recording's exhaustive best.

    PYTHONPATH=lib python3 benchmarks/pipeline_selection_cost.py --out results/pipeline_selection/cost_h100.md

Per run: the unique evaluations and simulated seconds the autotuner spent over all its rounds and batch sizes
(`MlpTuning.evaluations`, `search_s`: compile makespan + timing + the strategies' own CPU time on this machine), how
many of its (batch, projection) picks have the recording's fastest latency at that shape, and its MLP step per batch
against the step of those fastest configs. Each finished run is kept in `<out>.runs/` (a killed run resumes there).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Sequence

import pandas as pd
from tqdm import tqdm

from compressed_mlp_chain import command_line
from tunebench.files import write_text_atomically
from tunebench.kernels.compressed_matmul.autotune import AutotuneSettings, ReplayStepEvaluators, autotune
from tunebench.kernels.compressed_matmul.family import NAME
from tunebench.kernels.compressed_matmul.mlp import LLAMA_3_1_8B
from tunebench.kernels.compressed_matmul.selection_study import tuned_batches
from tunebench.measure.dataset import Dataset, load_dataset
from tunebench.search import NAMES
from tunebench.tables import markdown_table

REPOSITORY = Path(__file__).resolve().parents[1]
DATASET = REPOSITORY / "results/datasets/compressed_matmul_bfloat16_h100.parquet"
# (strategy, unique evaluations per pipeline run, probe, leaders: a race when leaders > 0, transfer, neighbours); the
# first is the autotuner's default (AutotuneSettings), the second its default before stop 100, the third before stop
# 98, the fourth before stop 97
SETTINGS = (("lfbo_quick", 128, 30, 1, True, True), ("lfbo_quick", 128, 30, 2, True, True),
            ("lfbo_quick", 128, 30, 2, True, False),
            ("pattern", 128, 0, 0, False, False), ("pattern", 64, 0, 0, False, False),
            ("lfbo_quick", 128, 0, 0, False, False), ("lfbo_quick", 64, 0, 0, False, False),
            ("lfbo_quick", 32, 0, 0, False, False), ("lfbo_quick", 128, 30, 2, False, False),
            ("lfbo_quick", 128, 30, 1, False, False), ("pattern", 128, 30, 1, False, False),
            ("lfbo_quick_restarts", 128, 30, 1, False, False), ("lfbo", 128, 30, 1, False, False),
            ("lfbo_restarts", 128, 30, 1, False, False), ("pattern", 128, 0, 0, True, False),
            ("pattern", 64, 0, 0, True, False), ("lfbo_quick", 128, 30, 1, True, False),
            ("lfbo_quick", 64, 30, 1, True, False))
FORMAT = "STRATEGY:EVALUATIONS[:PROBE:LEADERS][:transfer|:neighbours]"


def parse_setting(text: str) -> tuple[str, int, int, int, bool, bool]:
    """'STRATEGY:EVALUATIONS' or 'STRATEGY:EVALUATIONS:PROBE:LEADERS' (a race among the pipelines), either ending
    in ':transfer' (`AutotuneSettings.transfer` without its `neighbours`) or ':neighbours' (transfer with them), as a
    tuple (probe and leaders 0 without a race); a clear error names the text and what is allowed."""
    strategy, *numbers = text.split(":")
    suffix = numbers[-1] if numbers and numbers[-1] in ("transfer", "neighbours") else None
    transfer, neighbours = suffix is not None, suffix == "neighbours"
    numbers = numbers[:-1] if transfer else numbers
    if strategy not in NAMES or len(numbers) not in (1, 3) or not all(number.isdigit() for number in numbers) \
            or int(numbers[0]) < 1 or (len(numbers) == 3 and min(int(numbers[1]), int(numbers[2])) < 1):
        raise argparse.ArgumentTypeError(f"{text!r} is not {FORMAT} with a strategy of {', '.join(NAMES)} and "
                                         "positive numbers")
    evaluations, probe, leaders = (int(number) for number in (*numbers, 0, 0)[:3])
    return strategy, evaluations, probe, leaders, transfer, neighbours


@functools.cache
def _recording(dataset_path: str) -> tuple[Dataset, list[int], pd.Series]:
    """The dataset, its batch sizes for every projection and each shape's fastest ok latency: read once a process."""
    dataset = load_dataset(dataset_path, kernel=NAME)
    ok = dataset.measurements[dataset.measurements.status == "ok"]
    return dataset, tuned_batches(dataset, LLAMA_3_1_8B), ok.groupby(list(dataset.shape_names)).latency_ms.min()


def run_one(dataset_path: str, strategy: str, per_pipeline: int, probe: int, leaders: int, transfer: bool,
            neighbours: bool, seed: int) -> dict:
    """One replay of the autotuner over every batch size the dataset records for all of Llama-3.1-8B's projections."""
    dataset, batches, fastest = _recording(dataset_path)
    started = time.perf_counter()
    tuning = autotune(LLAMA_3_1_8B, batches, ReplayStepEvaluators(dataset),
                      AutotuneSettings(strategy=strategy, evaluations_per_pipeline=per_pipeline, seed=seed,
                                       probe=probe, leaders=leaders, transfer=transfer, neighbours=neighbours))
    picks = at_best = 0
    step_ratios = {}
    for bucket in tuning.buckets:
        best_step = 0.0
        for projection in LLAMA_3_1_8B.projections:
            best = float(fastest.loc[projection.shape(bucket.batch)])
            best_step += best
            picks += 1
            at_best += bucket.projections[projection.name].choice.latency_ms <= best
        step_ratios[bucket.batch] = bucket.step_ms / best_step
    return {"strategy": strategy, "per_pipeline": per_pipeline, "probe": probe, "leaders": leaders,
            "transfer": transfer, "neighbours": neighbours, "seed": seed,
            "evaluations": tuning.evaluations, "search_s": tuning.search_s, "picks": picks, "picks_at_best": at_best,
            "worst_step_ratio": max(step_ratios.values()), "step_ratios": json.dumps(step_ratios),
            "rounds": max(len(bucket.round_totals_ms) for bucket in tuning.buckets),
            "wall_s": time.perf_counter() - started}


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per setting, in the order given: medians over seeds, and the worst seed."""
    rows = []
    for (strategy, per_pipeline, probe, leaders, transfer, neighbours), group in runs.groupby(
            ["strategy", "per_pipeline", "probe", "leaders", "transfer", "neighbours"], sort=False):
        rows.append({
            "strategy": strategy, "evaluations per pipeline": per_pipeline,
            "race": f"probe {probe}, {leaders} go on" if leaders else "none",
            "transfer": ("yes, + neighbours" if neighbours else "yes") if transfer else "no", "seeds": len(group),
            "evaluations (median)": f"{group.evaluations.median():,.0f}",
            "simulated s (median)": f"{group.search_s.median():.0f}",
            "picks at the recorded best (median, worst seed)":
                f"{group.picks_at_best.median():.0f}, {group.picks_at_best.min()} of {group.picks.iloc[0]}",
            "seeds with every pick at the best": f"{(group.picks_at_best == group.picks).sum()} of {len(group)}",
            "worst MLP step / best (worst seed)": f"{group.worst_step_ratio.max():.4f}",
        })
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--settings", type=parse_setting, nargs="+", default=list(SETTINGS),
                        metavar=FORMAT)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--out", type=Path, required=True, help="the markdown summary (its CSV of runs beside it)")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.workers < 1:
        raise SystemExit(f"error: --seeds {args.seeds}, --workers {args.workers}: each must be at least 1")
    if not args.dataset.is_file():
        raise SystemExit(f"error: no dataset at {args.dataset}")
    cache = args.out.with_suffix(".runs")
    cache.mkdir(parents=True, exist_ok=True)
    wanted = [(*setting, seed) for setting in args.settings for seed in range(args.seeds)]
    path = {run: cache / ("__".join(map(str, run[:2] if not run[3] else run[:4])) + "__transfer" * run[4]
                          + "__neighbours" * run[5] + f"__seed{run[6]}.json") for run in wanted}
    todo = [run for run in wanted if not path[run].is_file()]
    with ProcessPoolExecutor(args.workers) as pool:
        futures = {pool.submit(run_one, str(args.dataset), *run): run for run in todo}
        for future in tqdm(futures, desc="autotuner replays", unit="run", initial=len(wanted) - len(todo),
                           total=len(wanted)):
            write_text_atomically(path[futures[future]], json.dumps(future.result()))
    runs = pd.DataFrame([{"probe": 0, "leaders": 0, "transfer": False, "neighbours": False,
                          **json.loads(path[run].read_text())}
                         for run in wanted])
    dataset = _recording(str(args.dataset))[0]
    header = (f"Command: `{command_line('pipeline_selection_cost.py', argv)}` ({len(wanted)} runs, "
              f"{runs.wall_s.sum():.0f} s of replay in {args.workers} processes on this machine). Dataset: "
              f"`{args.dataset.relative_to(REPOSITORY) if args.dataset.is_relative_to(REPOSITORY) else args.dataset}`"
              f" ({dataset.gpu}, recorded {dataset.provenance.get('date', 'at an unrecorded date')}). The autotuner's "
              "rounds (until one gains at most 0.1 %, at most 4), each a search per pipeline of each projection at "
              "each batch size, seeded seed + round; simulated seconds include the strategies' own CPU time here.")
    write_text_atomically(args.out.with_suffix(".csv"), runs.to_csv(index=False))
    write_text_atomically(args.out, f"# What the pipeline selection costs ({dataset.gpu})\n\n{header}\n\n"
                          f"{markdown_table(summary(runs))}\n")
    print(markdown_table(summary(runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
