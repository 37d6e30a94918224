"""The TMA GEMM's fastest recorded configs against cuBLAS, timed again in shuffled rounds with cuBLAS in each round,
so that "how close does the space come to cuBLAS" rests on medians over rounds rather than on one sitting.

First, anywhere: `.venv/bin/python benchmarks/tma_rounds.py --write-plan results/matmul_tma/rounds_plan.csv` (each
shape's TOP fastest configs of the H200 sweep). Then on an H200: `PYTHONPATH=lib python3 benchmarks/tma_rounds.py
--plan results/matmul_tma/rounds_plan.csv --out results/matmul_tma/rounds_h200.csv` (a killed run resumes by round).
Then anywhere: `.venv/bin/python benchmarks/tma_rounds.py --summarize --out results/matmul_tma/rounds_h200.csv`,
which writes the tables beside it (`.md`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tunebench.gemm_kernels import DATASET, ROUND_SHAPE, rounds_tables
from tunebench.measure.rounds import rounds_command, time_in_rounds
from tunebench.measure.timing import TimingPolicy
from tunebench.study import open_dataset
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
TOP = 8  # each shape's recorded fastest configs
ROUNDS = 8
SHAPE = ROUND_SHAPE  # the plan's shape columns


def plan(dataset_path: Path) -> pd.DataFrame:
    """Per shape, the TOP configs that ran fastest in the sweep, with their rank and latency there and the sweep's
    cuBLAS latency."""
    dataset = open_dataset(dataset_path)
    names = list(dataset.parameter_names)
    rows = []
    for shape in dataset.shapes():
        task = dataset.task(shape)
        top = task[task.status == "ok"].sort_values("latency_ms", kind="stable").head(TOP)
        rows.append(top[names].assign(**dict(zip(SHAPE, shape)), recorded_rank=range(len(top)),
                                      recorded_ms=top.latency_ms.to_numpy(),
                                      recorded_vendor_ms=dataset.vendor_ms(shape)))
    return pd.concat(rows, ignore_index=True)[[*SHAPE, "recorded_rank", "recorded_ms", "recorded_vendor_ms", *names]]


def time_plan(out: Path, configs: pd.DataFrame, seed: int) -> None:
    """Time the plan's configs and cuBLAS in ROUNDS rounds on this machine's GPU, appending each round to `out`."""
    names = [name for name in configs.columns if name not in (*SHAPE, "recorded_rank", "recorded_ms",
                                                                  "recorded_vendor_ms")]
    time_in_rounds(out, configs, SHAPE, names, {"default": TimingPolicy()}, ROUNDS, seed, kernel="matmul_tma",
                   vendor=True)


def summarize(out: Path, command: str) -> str:
    timings = pd.read_csv(out)
    shapes, configs = rounds_tables(timings)
    return "\n\n".join([
        "# The TMA GEMM's fastest configs against cuBLAS, in rounds", f"Command: `{command}`",
        f"The timings: `{out.relative_to(REPO) if out.is_relative_to(REPO) else out}` on "
        f"{timings.gpu.iloc[0]}: each shape's {TOP} fastest configs of the sweep and cuBLAS, {ROUNDS} rounds, each "
        "round every config once in a seeded shuffled order (the default timing policy) and cuBLAS once, before the "
        "configs in even rounds and after them in odd ones.",
        markdown_table(shapes), "Per config: its median over rounds, and cuBLAS's median over rounds / it.",
        markdown_table(configs),
    ]) + "\n"


def main() -> int:
    return rounds_command(__doc__.split("\n\n")[0], REPO, DATASET, plan, time_plan, summarize)


if __name__ == "__main__":
    raise SystemExit(main())
