"""The measurement floor one sitting sets, from schedule-identical twins (`predict.twins`): on every shape whose
measured best config has a twin, the twin's efficiency, beside the cross-validated predictor's on the same shapes.

Run: `.venv/bin/python benchmarks/twin_floor.py` (under a minute; CPU). Reads the prediction dataset (the base file
and its extensions), a cross-validation's per-shape table, the exhaustive and the H200 datasets and the compiled
table; writes results/config_prediction/twin_floor.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from config_prediction import COMPILED_RESOURCES, DATASET, TRANSFER_DATASET, mean_p10_min, percent
from tunebench.files import write_text_atomically
from tunebench.measure.dataset import load_dataset
from tunebench.predict.compiled import load_table
from tunebench.predict.model import common_candidates
from tunebench.predict.twins import compiled_agreement, pair_spread, twin_floor, twin_pairs
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "results" / "config_prediction" / "twin_floor.md"
PER_SHAPE = REPO / "results" / "config_prediction" / "cv_per_shape.csv"
EXHAUSTIVE = REPO / "results" / "datasets" / "matmul_bfloat16_h100.parquet"
# The per-shape table's columns compared with the twin: (column, label)
PREDICTORS = (("dispatcher_efficiency", "`best_config`"), ("top10_timed_efficiency", "top 10 timed"))
SPREAD_EDGES_MS = (0.0, 0.01, 0.02, 0.05, 0.1, 1.0, np.inf)


def candidate_rows(path: Path) -> tuple[pd.DataFrame, tuple[str, ...], str]:
    """A dataset's rows of the configs recorded for every shape (the candidates a predictor chooses among), its
    parameter names and GPU."""
    dataset = load_dataset(path, kernel="matmul")
    names = dataset.parameter_names
    candidates = pd.DataFrame(common_candidates(dataset), columns=list(names))
    return dataset.measurements.merge(candidates, on=list(names)), names, dataset.gpu


def comparison(floor: pd.DataFrame, per_shape: pd.DataFrame, by: str | None) -> pd.DataFrame:
    """The twin's and each predictor's mean / P10 / min on the shapes of `floor` that `per_shape` holds, overall or
    per value of its column `by` (family or alignment)."""
    joined = floor.merge(per_shape, on=["M", "N", "K"])
    groups = [("all", joined)] if by is None else list(joined.groupby(by, sort=False))
    return pd.DataFrame([{"shapes": name, "count": len(part), "the twin (the best's own kernel, timed again)":
                          mean_p10_min(part["twin_efficiency"]),
                          **{label: mean_p10_min(part[column]) for column, label in PREDICTORS}}
                         for name, part in groups])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--per-shape", type=Path, default=PER_SHAPE,
                        help="a cross-validation's per-shape table (`config_prediction_cv.py`)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    command = " ".join([".venv/bin/python", os.path.relpath(os.path.abspath(sys.argv[0]), REPO), *sys.argv[1:]])
    started = time.perf_counter()
    rows, names, gpu = candidate_rows(args.dataset)
    floor = twin_floor(rows, names)
    per_shape = pd.read_csv(args.per_shape)
    others = []
    for path in (EXHAUSTIVE, TRANSFER_DATASET):
        other_rows, other_names, other_gpu = candidate_rows(path)
        other_floor = twin_floor(other_rows, other_names)
        other_shapes = other_rows.groupby(["M", "N", "K"]).ngroups
        others.append({"dataset": path.name, "GPU": other_gpu, "configs per shape": len(other_rows) // other_shapes,
                       "shapes with a twin of the best": f"{len(other_floor)} of {other_shapes}",
                       "the twin, mean / P10 / min": mean_p10_min(other_floor["twin_efficiency"])})
    pairs = twin_pairs(rows, names)
    spread = pair_spread(pairs, SPREAD_EDGES_MS).assign(
        bin=lambda frame: frame["bin"].astype(str), median=lambda frame: frame["median"].map(percent),
        P90=lambda frame: frame["P90"].map(percent))
    compiled_pairs, compiled_same = compiled_agreement(load_table(COMPILED_RESOURCES, names).table, names)
    shapes = rows.groupby(["M", "N", "K"]).ngroups
    text = "\n\n".join([
        "# The measurement floor from schedule-identical twins",
        f"Command: `{command}` ({time.perf_counter() - started:.0f} s, CPU). {shapes} shapes x "
        f"{len(rows) // shapes} candidates ({gpu}); per-shape predictor efficiencies from "
        f"`{os.path.relpath(args.per_shape.resolve(), REPO)}`.",
        "Two candidates that differ only in GROUP_M launch the same tiles in the same order where the grid has one "
        "tile row or one tile column (`matmul.launch_group_m`): one kernel, timed twice in the same sitting. Of the "
        f"{compiled_pairs} (GROUP_M pair, alignment class) combinations in the compiled table, {compiled_same} "
        "compiled to the same shared memory, registers, local memory and instruction counts. On a shape whose measured "
        "best has such a twin, the twin's efficiency (best latency / twin latency) is what this sitting credits the "
        "best kernel itself with when it is timed again: a floor set by the measurement, not by any predictor.",
        f"Shapes whose measured best has a twin: {len(floor)} of {shapes}.",
        markdown_table(comparison(floor, per_shape, None)),
        "Per family and per alignment class (the same shapes):",
        markdown_table(pd.concat([comparison(floor, per_shape, by) for by in ("family", "alignment")])),
        "The same floor in the other recorded GEMM datasets:",
        markdown_table(pd.DataFrame(others)),
        "How far every twin pair's two timings lie apart (|log ratio|, as a fraction), by the faster one's latency "
        f"in ms ({len(pairs)} pairs):",
        markdown_table(spread),
    ]) + "\n"
    write_text_atomically(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
