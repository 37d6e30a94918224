"""Does data measured on the H200 help the H100 predictor? GroupKFold(5) over the H100 prediction shapes, each held-out
shape judged on its H100 measurements, by the model alone trained on the fold's H100 shapes with or without H200 data.

The model is the one-off checks' (HISTORY.md): one `relative` model, 300 trees of 127 leaves, every candidate, no
neighbour correction or head, settings fixed, seeded. A held-out shape is unseen on both GPUs (`pooling.pooled_folds`).
Arms, each with several seeds (run-to-run noise of one fit is about a tenth of a point of mean):
- the H100 shapes only;
- + the H200's own training shapes (`h200_training_shapes.py`: new hinted and odd shapes, M >= 8);
- + those and the H200 transfer shapes (H100 prediction shapes measured again on the H200).

Run: `.venv/bin/python benchmarks/pooled_training.py` (about 2.5 minutes per arm and seed on a 2-core machine, 2
processes). Resumable: every finished arm and seed goes to the per-shape CSV beside the report with the number of extra
shapes it was trained with; a rerun skips those of the same size, and the report reads only the extra data's current
size, so rows of a dataset since grown stay as a record but never mix in. The report adds, per alignment class, how
close the H200's fastest candidate comes to the H100's fastest on the shapes both GPUs measured.
Writes results/config_prediction/pooled_training.md and pooled_training_per_shape.csv.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from config_prediction import COMPILED_RESOURCES, DATASET, TRANSFER_DATASET, mean_p10_min
from h200_training_shapes import DATASET as H200_TRAINING, MIN_M
from tunebench.files import write_text_atomically
from tunebench.measure.dataset import load_dataset
from tunebench.predict.compiled import load_table
from tunebench.predict.evaluation import alignment, shape_efficiency
from tunebench.predict.model import ConfigRanker, RankerSettings, TrainingData, training_data
from tunebench.predict.pooling import check_comparable, pool, pooled_folds
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "results" / "config_prediction" / "pooled_training.md"
N_SPLITS = 5
SEEDS = (0, 1, 2, 3)
SETTINGS = RankerSettings(max_iter=300, max_leaf_nodes=127)
ARMS = (("the H100 shapes only", ()), ("+ the H200's own training shapes", (H200_TRAINING,)),
        ("+ those and the H200 transfer shapes", (H200_TRAINING, TRANSFER_DATASET)))

COLUMNS = ["arm", "seed", "extra_shapes", "M", "N", "K", "efficiency"]  # the per-shape CSV's

_data: TrainingData | None = None  # the pooled data of the arm being run, which the forked fold processes read


def _fold(train: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
    """Efficiency of the model's pick on each test shape, trained on `train` (the pooled data's shape indices)."""
    data = _data
    count = len(data.candidates)
    with threadpool_limits(1):
        ranker = ConfigRanker(replace(SETTINGS, random_state=seed))
        ranker.fit(data, data.rows_of(train))
        rows = data.rows_of(test)
        scores = ranker.score(ranker.data_matrix(data, rows)).reshape(len(test), count)
    return shape_efficiency(scores, data.latency_ms[rows].reshape(len(test), count))


def run_arm(primary: TrainingData, extras: list[TrainingData], seed: int, workers: int) -> np.ndarray:
    """Out-of-fold efficiency of every primary shape, in the primary's shape order."""
    global _data
    _data, source = pool(primary, extras)
    folds = pooled_folds(_data, source, N_SPLITS)
    efficiency = np.zeros(len(primary.shapes))
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as executor:
        for (_, test), values in zip(folds, executor.map(_fold, *zip(*folds), [seed] * len(folds))):
            efficiency[test] = values
    return efficiency


def current_rows(table: pd.DataFrame, extra_shapes: Mapping[str, int]) -> pd.DataFrame:
    """The per-shape rows of arms trained with the extra data's current size (`extra_shapes`, per arm): rows of an
    extra dataset since grown, or of an arm no longer run, are left out."""
    return table[table["arm"].map(extra_shapes) == table["extra_shapes"]]


def best_config_agreement(primary: TrainingData, other: TrainingData) -> pd.DataFrame:
    """Per shape both datasets hold: the efficiency, judged by the primary GPU's measurements, of the other GPU's
    fastest candidate (1 when both GPUs find the same candidate fastest)."""
    check_comparable(primary, other)
    index = {tuple(shape): position for position, shape in enumerate(other.shapes.tolist())}
    rows = []
    for position, shape in enumerate(primary.shapes.tolist()):
        if tuple(shape) not in index:
            continue
        mine = primary.latency_ms[primary.rows_of([position])]
        theirs = other.latency_ms[other.rows_of([index[tuple(shape)]])]
        rows.append({"M": shape[0], "N": shape[1], "K": shape[2], "alignment": alignment(shape[1], shape[2]),
                     "efficiency": mine.min() / mine[np.argmin(theirs)]})
    return pd.DataFrame(rows)


def agreement_summary(table: pd.DataFrame) -> pd.DataFrame:
    """`best_config_agreement`'s mean / P10 / min per alignment class, with M < MIN_M and M >= MIN_M apart."""
    rows = []
    for kind in ("aligned", "hinted", "odd"):
        for label, small in ((f"M < {MIN_M}", True), (f"M >= {MIN_M}", False)):
            part = table[(table["alignment"] == kind) & ((table["M"] < MIN_M) == small)]
            if len(part):
                rows.append({"shapes": f"{kind}, {label}", "count": len(part),
                             "efficiency": _cell(part["efficiency"])})
    return pd.DataFrame(rows)


def _cell(values: pd.Series) -> str:
    return mean_p10_min(values) if len(values) else "n/a"


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per arm: mean / P10 / min over all shapes and per class, pooled over seeds' per-shape means; and the mean's
    paired change against the H100-only arm, per seed."""
    unaligned_big = (table["alignment"] != "aligned") & (table["M"] >= MIN_M)
    table = table.assign(unaligned_big=unaligned_big)
    base = table[table["arm"] == ARMS[0][0]].set_index(["seed", "M", "N", "K"])["efficiency"]
    rows = []
    for name, _ in ARMS:
        part = table[table["arm"] == name]
        if part.empty:
            continue
        per_shape = part.groupby(["M", "N", "K", "alignment", "unaligned_big"], as_index=False)["efficiency"].mean()
        change = (part.set_index(["seed", "M", "N", "K"])["efficiency"] - base).groupby("seed").mean().dropna()
        rows.append({"training data": name, "seeds": part["seed"].nunique(),
                     "all shapes": _cell(per_shape["efficiency"]),
                     **{kind: _cell(per_shape.loc[per_shape["alignment"] == kind, "efficiency"])
                        for kind in ("aligned", "hinted", "odd")},
                     f"hinted or odd, M >= {MIN_M}": _cell(
                         per_shape.loc[per_shape["unaligned_big"], "efficiency"]),
                     "mean's change per seed (points)": ", ".join(f"{100 * value:+.2f}" for value in change)})
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--workers", type=int, default=2, help="processes, one fold each (each single-threaded)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    command = " ".join([".venv/bin/python", os.path.relpath(os.path.abspath(sys.argv[0]), REPO), *sys.argv[1:]])
    started = time.perf_counter()
    primary_dataset = load_dataset(DATASET, kernel="matmul")
    resources = load_table(COMPILED_RESOURCES, primary_dataset.parameter_names)
    primary = training_data(primary_dataset, resources)
    extras = {path: training_data(load_dataset(path, kernel="matmul"), resources)
              for path in dict.fromkeys(path for _, paths in ARMS for path in paths)}  # in the arms' order
    csv = args.out.with_name(args.out.stem + "_per_shape.csv")
    table = pd.read_csv(csv) if csv.exists() else pd.DataFrame(columns=COLUMNS)
    extra_shapes = {name: sum(len(extras[path].shapes) for path in paths) for name, paths in ARMS}
    current = current_rows(table, extra_shapes)
    todo = [(name, paths, seed) for seed in args.seeds for name, paths in ARMS
            if not ((current["arm"] == name) & (current["seed"] == seed)).any()]
    shapes = pd.DataFrame(primary.shapes, columns=["M", "N", "K"])
    for name, paths, seed in tqdm(todo, desc="arms x seeds", unit="run"):
        efficiency = run_arm(primary, [extras[path] for path in paths], seed, args.workers)
        rows = shapes.assign(arm=name, seed=seed, extra_shapes=extra_shapes[name], efficiency=efficiency)
        table, current = (pd.concat([frame, rows], ignore_index=True) for frame in (table, current))
        write_text_atomically(csv, table[COLUMNS].to_csv(index=False))
    table = current.assign(alignment=[alignment(int(n), int(k)) for n, k in zip(current["N"], current["K"])])
    agreement = best_config_agreement(primary, extras[TRANSFER_DATASET])
    sizes = ", ".join(f"{path.name}: {len(extra.shapes)} shapes ({extra.gpu})" for path, extra in extras.items())
    text = "\n\n".join([
        "# Does H200 data help the H100 predictor?",
        f"Command: `{command}` ({time.perf_counter() - started:.0f} s for the {len(todo)} arm-seed runs not already in "
        f"`{csv.name}` for this extra data's size, {os.cpu_count()} cores). GroupKFold({N_SPLITS}) over the "
        f"{len(primary.shapes)} H100 prediction shapes, each judged on its H100 measurements; a held-out shape's H200 "
        f"rows are left out of its fold's training data. Extra data: {sizes}. The model alone: one `relative` model, "
        f"{SETTINGS.max_iter} trees of {SETTINGS.max_leaf_nodes} leaves, every candidate, no correction or head, seeded "
        "per run.",
        "Mean / P10 / min efficiency of the held-out H100 shapes, each shape's efficiency averaged over the seeds; "
        "the last column is the mean's change against the H100-only arm of the same seed:",
        markdown_table(summary(table)),
        f"Do the GPUs agree on what is fast? On the {len(agreement)} shapes both measured "
        f"(`{TRANSFER_DATASET.name}`), the H100 efficiency of the H200's fastest candidate:",
        markdown_table(agreement_summary(agreement)),
    ])
    write_text_atomically(args.out, text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
