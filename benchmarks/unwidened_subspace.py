"""The widened TMA sweep's unwidened configs alone, as a dataset of their own: the space before WIDEN (5,440 configs),
timed in the same sittings as the widened space (7,880), so that replays on the two differ by the space alone.

Run: `.venv/bin/python benchmarks/unwidened_subspace.py --out build/unwidened_subspace/matmul_tma_bfloat16_h200.parquet`
(seconds), then replay it as the widened sweep was: `.venv/bin/python benchmarks/tma_kernel.py --dataset <that file>
--out results/matmul_tma/default_unwidened_subspace`. Then `.venv/bin/python benchmarks/unwidened_subspace.py --compare
results/matmul_tma/widened_space_cost.md` tabulates the two replays side by side.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.measure.dataset import Dataset, load_dataset, save_dataset
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results/datasets/matmul_tma_bfloat16_h200_default_widened.parquet"
REPLAYS = {"with WIDEN (7,880)": REPO / "results/matmul_tma/default_widened/replay_by_seed.csv",
           "without (5,440)": REPO / "results/matmul_tma/default_unwidened_subspace/replay_by_seed.csv"}
TARGET = "s to 0.99 of best"


def side_by_side(replays: dict[str, Path]) -> pd.DataFrame:
    """Per shape and strategy, each space's median seconds and evaluations to 0.99 of the space's best over the
    replayed seeds (a seed that never got there counts as inf) and the share of seeds that got there."""
    columns = {}
    never = {TARGET: float("inf"), "evals to 0.99 of best": float("inf")}
    for space, path in replays.items():
        runs = pd.read_csv(path)
        grouped = runs.fillna(never).groupby(["shape", "strategy"], sort=False)
        columns[f"{space}: median {TARGET}"] = grouped[TARGET].median().round(1)
        columns[f"{space}: median evals"] = grouped["evals to 0.99 of best"].median()
        reached = grouped[TARGET].apply(lambda seconds: (seconds < never[TARGET]).mean())
        columns[f"{space}: seeds there"] = reached.map("{:.0%}".format)
    return pd.DataFrame(columns).reset_index()


def best_config(dataset: Dataset, shape: tuple[int, ...]) -> pd.Series:
    """The row of the fastest ok config recorded for `shape`."""
    task = dataset.task(shape)
    ok = task[task.status == "ok"]
    return ok.loc[ok.latency_ms.idxmin()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DATASET, help="a sweep of the TMA GEMM's space with WIDEN")
    parser.add_argument("--out", type=Path, help="where to write the unwidened configs' dataset")
    parser.add_argument("--compare", type=Path, help="write the two replays side by side here (markdown) instead")
    args = parser.parse_args()
    dataset = load_dataset(args.dataset, kernel="matmul_tma")
    if "WIDEN" not in dataset.parameter_names:
        parser.error(f"{args.dataset} has no WIDEN parameter: it is a sweep of the space before WIDEN already")
    if args.compare:
        table = side_by_side(REPLAYS)
        budgets = {line.removeprefix("## Replayed searches (").removesuffix(")")
                   for path in REPLAYS.values() for line in path.with_name("summary.md").read_text().splitlines()
                   if line.startswith("## Replayed searches (")}
        widened_best = [shape for shape in dataset.shapes() if bool(best_config(dataset, shape)["WIDEN"])]
        shared = ("At every one of these shapes the best config is unwidened, so both spaces share their best."
                  if not widened_best else f"At {widened_best} the best config is widened: there the subspace's "
                  "best is another, slower one.")
        write_text_atomically(args.compare, "\n\n".join([
            "# The widened TMA space against its unwidened subspace, replayed", f"Command: `.venv/bin/python "
            f"{' '.join(sys.argv)}`", "Both replays are of the same sweep, timed in the same sittings "
            f"(`{os.path.relpath(args.dataset.resolve(), REPO)}`): `tma_kernel.py` on it, and on its configs with "
            f"WIDEN off (this script's dataset), {' and '.join(sorted(budgets))} (the replays' summary.md). {shared} "
            "Per run: "
            + ", ".join(f"`{path.relative_to(REPO)}`" for path in REPLAYS.values()) + ".",
            markdown_table(table)]) + "\n")
        print(markdown_table(table))
        return 0
    if args.out is None:
        parser.error("--out is required to write the dataset (or --compare to compare the replays)")
    kept = dataset.measurements[~dataset.measurements["WIDEN"].astype(bool)].reset_index(drop=True)
    provenance = {**dataset.provenance, "derived": f"the configs with WIDEN off of {args.dataset.name} and its "
                  f"extensions, written by benchmarks/unwidened_subspace.py"}
    save_dataset(dataclasses.replace(dataset, measurements=kept, provenance=provenance), args.out)
    configs = kept.groupby(list(dataset.shape_names)).size()
    print(f"wrote {args.out}: {len(kept)} of {len(dataset.measurements)} measurements, "
          f"{configs.min()} to {configs.max()} configs per shape over {len(configs)} shapes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
