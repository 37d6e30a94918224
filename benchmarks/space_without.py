"""A TMA sweep's configs with one option off (`--without WIDEN` or `TALL`), as a dataset of their own: the space
before that option joined it, timed in the same sittings as the space with it, so that replays on the two differ by the
space alone.

Stop 59's: `.venv/bin/python benchmarks/space_without.py --out
build/unwidened_subspace/matmul_tma_bfloat16_h200.parquet` (seconds; WIDEN by default, of the default shapes' widened
sweep: 5,440 of 7,880 configs), then replay it as the sweep was: `.venv/bin/python benchmarks/tma_kernel.py --dataset
<that file> --out results/matmul_tma/default_unwidened_subspace`. Then `.venv/bin/python benchmarks/space_without.py
--compare results/matmul_tma/widened_space_cost.md` tabulates the two replays side by side (`--replays LABEL=CSV ...`
names other replays' `replay_by_seed.csv`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.gemm_kernels import sitting_names
from tunebench.measure.dataset import SITTING, Dataset, load_dataset, save_dataset
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results/datasets/matmul_tma_bfloat16_h200_default_widened.parquet"
REPLAYS = {"with WIDEN (7,880)": REPO / "results/matmul_tma/default_widened/replay_by_seed.csv",
           "without (5,440)": REPO / "results/matmul_tma/default_unwidened_subspace/replay_by_seed.csv"}
OPTIONS = {"WIDEN": "widened", "TALL": "tall"}  # the options a subspace can leave out, and what a config with one is
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


def sittings_sentence(dataset: Dataset, option: str) -> str:
    """Which of the dataset's sittings (numbered from 1, '?' where its rows do not say) timed its configs with
    `option`, and which the others: they differ when the option's configs were added to an older sweep
    (`add_configs.py`)."""
    listed = dataset.provenance.get("sittings") or [dataset.provenance]
    if len(listed) == 1:
        return "It was timed in one sitting."
    rows = dataset.measurements
    sittings = rows[SITTING] if SITTING in rows else pd.Series(pd.NA, index=rows.index)
    having = rows[option].astype(bool)
    dates = ", ".join(f"{index} on {str(sitting.get('date', '?'))[:10]}" for index, sitting in enumerate(listed, 1))
    return (f"Its provenance lists {len(listed)} sittings ({dates}): the configs with {option} come from "
            f"{sitting_names(sittings[having])}, the others from {sitting_names(sittings[~having])}.")


def replay_argument(text: str) -> tuple[str, Path]:
    label, separator, path = text.partition("=")
    if not separator or not label or not path:
        raise argparse.ArgumentTypeError(f"bad replay {text!r}: expected LABEL=PATH of a replay_by_seed.csv")
    return label, Path(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET, help="a sweep of the TMA GEMM's space with --without")
    parser.add_argument("--without", choices=sorted(OPTIONS), default="WIDEN",
                        help="the option the subspace leaves out")
    parser.add_argument("--out", type=Path, help="where to write the subspace's dataset")
    parser.add_argument("--compare", type=Path, help="write the two replays side by side here (markdown) instead")
    parser.add_argument("--replays", type=replay_argument, nargs=2, default=None,
                        help="LABEL=CSV twice, the space with the option first (default: stop 59's WIDEN replays)")
    args = parser.parse_args()
    option, having = args.without, OPTIONS[args.without]
    dataset = load_dataset(args.dataset, kernel="matmul_tma")
    if option not in dataset.parameter_names:
        parser.error(f"{args.dataset} has no {option} parameter: it is a sweep of the space before {option} already")
    if args.compare:
        replays = dict(args.replays) if args.replays else REPLAYS
        table = side_by_side(replays)
        budgets = {line.removeprefix("## Replayed searches (").removesuffix(")")
                   for path in replays.values() for line in path.with_name("summary.md").read_text().splitlines()
                   if line.startswith("## Replayed searches (")}
        best_with = [shape for shape in dataset.shapes() if bool(dataset.best_config(shape)[option])]
        shared = (f"At every one of these shapes the best config has {option} off, so both spaces share their best."
                  if not best_with else f"At {best_with} the best config is {having}: there the subspace's best is "
                  "another, slower one.")
        write_text_atomically(args.compare, "\n\n".join([
            f"# The TMA space with {option} against its subspace without it, replayed", f"Command: `.venv/bin/python "
            f"{' '.join(sys.argv)}`", "Both replays are of one dataset's rows "
            f"(`{os.path.relpath(args.dataset.resolve(), REPO)}`): `tma_kernel.py` on it, and on its configs with "
            f"{option} off (this script's dataset), {' and '.join(sorted(budgets))} (the replays' summary.md). "
            f"{shared} {sittings_sentence(dataset, option)} Per run: "
            + ", ".join(f"`{os.path.relpath(path.resolve(), REPO)}`" for path in replays.values()) + ".",
            markdown_table(table)]) + "\n")
        print(markdown_table(table))
        return 0
    if args.out is None:
        parser.error("--out is required to write the dataset (or --compare to compare the replays)")
    kept = dataset.measurements[~dataset.measurements[option].astype(bool)].reset_index(drop=True)
    provenance = {**dataset.provenance, "derived": f"the configs with {option} off of {args.dataset.name} and its "
                  f"extensions, written by benchmarks/space_without.py --without {option}"}
    save_dataset(dataclasses.replace(dataset, measurements=kept, provenance=provenance), args.out)
    configs = kept.groupby(list(dataset.shape_names)).size()
    print(f"wrote {args.out}: {len(kept)} of {len(dataset.measurements)} measurements, "
          f"{configs.min()} to {configs.max()} configs per shape over {len(configs)} shapes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
