"""Picks for the H200 shapes by a predictor that saw none of them: fitted on the H100 prediction dataset without the
shapes of the H200 one, as the deployed predictor is fitted, its picks frozen for re-timing on the H200.

Fit and freeze (CPU, 809 s of fitting on this 2-core machine): `.venv/bin/python benchmarks/h200_held_out.py
--predictor P --picks results/config_prediction/h200_held_out_picks.csv` (P is written unless it exists; the picks
never over an existing file). The picks' CSV is in the columns `config_prediction_retime.py measure --per-shape`
reads, with each pick's replay on both GPUs' recorded sittings; its .provenance.json holds the predictor's sha256 and
settings and the replays' mean / P10 / min.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from config_prediction import COMPILED_RESOURCES, DATASET, TRANSFER_DATASET, fit_deployed, mean_p10_min
from preregistered_picks import TOP_K, config_text
from tunebench.files import write_text_atomically
from tunebench.measure.dataset import Dataset, load_dataset
from tunebench.predict import Predictor, load_predictor, save_predictor, training_data
from tunebench.predict.compiled import load_table


def without_shapes(dataset: Dataset, shapes: set[tuple[int, int, int]]) -> Dataset:
    """The dataset less every row (measured or vendor) of the given shapes."""
    def kept(frame: pd.DataFrame) -> pd.DataFrame:
        keys = list(zip(frame["M"], frame["N"], frame["K"]))
        return frame[[key not in shapes for key in keys]].reset_index(drop=True)
    return replace(dataset, measurements=kept(dataset.measurements), vendor=kept(dataset.vendor))


def fit(out: Path, h100: Dataset, held_out: set[tuple[int, int, int]], workers: int) -> None:
    """Fit the deployed pipeline on the H100 shapes outside `held_out` and save it to `out` (its shortlist grid only
    around the held-out shapes, as cross-validation builds it for a fold's test shapes)."""
    dataset = without_shapes(h100, held_out)
    data = training_data(dataset, load_table(COMPILED_RESOURCES, dataset.parameter_names))
    started = time.perf_counter()
    print(f"fitting on {len(data.shapes)} H100 shapes, {len(held_out)} held out", flush=True)
    predictor = fit_deployed(data, ("relative",), {"held_out": f"the {len(held_out)} shapes of "
                                                               f"{TRANSFER_DATASET.name}"}, workers,
                             shortlist_shapes=sorted(held_out))
    save_predictor(predictor, out)
    print(f"fitted in {time.perf_counter() - started:.0f} s: {out}", flush=True)


def recorded_speed(dataset: Dataset, shape: tuple[int, int, int]) -> pd.Series:
    """Each config's efficiency in the dataset's recorded sitting (the shape's measured best / its latency; 0 for a
    failure), indexed by its 'a,b,...' text."""
    task = dataset.task(shape)
    names = list(dataset.parameter_names)
    keys = [config_text(dict(zip(names, key))) for key in task[names].itertuples(index=False, name=None)]
    latency = pd.Series(task["latency_ms"].to_numpy(), index=keys)
    return (latency.min() / latency).fillna(0.0)


def held_out_picks(predictor: Predictor, h200: Dataset, name: str) -> pd.DataFrame:
    """Per shape of `h200`, the predictor's `best_config` and full-ranking top TOP_K in the columns the re-timing reads
    (`predicted_config` is the full ranking's first; `best_config`, `selected_efficiency`,
    `selected_top10_timed_efficiency` and `dispatcher_replay` are the recorded sitting's). Refused, naming the
    predictor (`name`), if it was trained on any of those shapes."""
    trained_on = {tuple(shape) for shape in predictor.header["training"]["shapes"]}
    seen = sorted(trained_on & set(h200.shapes()))
    if seen:
        raise SystemExit(f"{name} was trained on H200 shapes {seen[:3]}: they are not held out")
    rows = []
    for shape in h200.shapes():
        pick = config_text(predictor.best_config(shape))
        top = [config_text(config) for config in predictor.top_configs(shape, TOP_K)]
        speed = recorded_speed(h200, shape)
        rows.append({"M": shape[0], "N": shape[1], "K": shape[2], "predicted_config": top[0],
                     "dispatcher_config": pick, "best_config": speed.idxmax(), "top10_configs": ";".join(top),
                     "selected_efficiency": speed[top[0]], "selected_top10_timed_efficiency": speed[top].max(),
                     "dispatcher_replay": speed[pick]})
    return pd.DataFrame(rows)


def freeze(predictor_path: Path, out: Path, h100: Dataset, h200: Dataset) -> None:
    """Write `held_out_picks` for the H200 shapes, the pick's replay on the H200 sitting as `dispatcher_h200_replay`
    and on the H100 sittings beside it as `dispatcher_h100_replay`."""
    if out.exists():
        raise SystemExit(f"{out} exists: frozen picks are never overwritten; name another --picks file")
    predictor: Predictor = load_predictor(predictor_path)
    frame = held_out_picks(predictor, h200, "the predictor").rename(
        columns={"dispatcher_replay": "dispatcher_h200_replay"})
    frame["dispatcher_h100_replay"] = [recorded_speed(h100, (int(m), int(n), int(k)))[pick] for m, n, k, pick in
                                       zip(frame["M"], frame["N"], frame["K"], frame["dispatcher_config"])]
    write_text_atomically(out, frame.to_csv(index=False))
    replays = ("dispatcher_h100_replay", "dispatcher_h200_replay", "selected_efficiency",
               "selected_top10_timed_efficiency")
    provenance = {"command": " ".join([".venv/bin/python", *sys.argv]), "date": datetime.now(timezone.utc).isoformat(),
                  "predictor": str(predictor_path), "predictor_sha256": hashlib.sha256(
                      predictor_path.read_bytes()).hexdigest(),
                  "predictor_training_shapes": len(predictor.header["training"]["shapes"]),
                  "predictor_settings": str(predictor.ranker.settings),
                  "held_out": f"every shape of {TRANSFER_DATASET.name}",
                  "replay": {column: mean_p10_min(frame[column]) for column in replays},
                  "config_order": list(predictor.space.names)}
    write_text_atomically(out.with_suffix(".provenance.json"), json.dumps(provenance, indent=1) + "\n")
    print(json.dumps(provenance["replay"], indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--predictor", type=Path, required=True, help="fitted here unless it exists")
    parser.add_argument("--picks", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    h100, h200 = load_dataset(DATASET, kernel="matmul"), load_dataset(TRANSFER_DATASET, kernel="matmul")
    held_out = set(h200.shapes())
    missing = sorted(held_out - set(h100.shapes()))
    if missing:
        raise SystemExit(f"H200 shapes {missing[:3]} are not in the H100 dataset, so they cannot be held out of its "
                         "training")
    if not args.predictor.exists():
        fit(args.predictor, h100, held_out, args.workers)
    freeze(args.predictor, args.picks, h100, h200)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
