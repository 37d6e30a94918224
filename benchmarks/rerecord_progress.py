"""Issue 5's re-recording so far: the prediction shapes timed again with today's kernel and the read flush (batch
journals of benchmarks/rerecord_batches.py), against the recorded prediction dataset and the deployed predictor.

CPU: .venv/bin/python benchmarks/rerecord_progress.py --journals J.jsonl.gz [...] --out F.md [--datasets-out DIR]
  --datasets-out writes the finished shapes as a dataset and the recording's rows at them as another, for
  benchmarks/config_prediction_cv.py --dataset on each.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from tunebench.collect import build_dataset, read_records, whole_shapes
from tunebench.files import write_text_atomically
from tunebench.kernels import get_kernel
from tunebench.measure.dataset import Dataset, load_dataset, save_dataset
from tunebench.measure.result import Status
from tunebench.measure.timing import recorded_flush
from tunebench.predict.evaluation import FAMILIES, family, percent_summary
from tunebench.tables import markdown_table

from flush_ceiling import best_of_judged, keys_of, picks_judged, split_ratios, two_sittings

REPO = Path(__file__).resolve().parents[1]
SHAPE = ["M", "N", "K"]
CONFIGS = REPO / "results/datasets/matmul_prediction_configs.json"
RECORDED = REPO / "results/datasets/matmul_bfloat16_h100_prediction.parquet"
PREDICTOR = REPO / "results/config_prediction/matmul_bfloat16_h100.predictor"
TIMED_K = (1, 10, 40)  # the predictor's top k timed; 10 is `timed_best_config`'s default


def sittings_of(records: list[dict]) -> list[dict]:
    """The journals' sittings (provenance records), each once: a resumed journal repeats the sittings before it."""
    seen: dict[str, dict] = {}
    for record in records:
        if record["kind"] == "provenance":
            seen.setdefault(record["provenance"]["date"], record["provenance"])
    return list(seen.values())


def journal_dataset(records: list[dict], configs: list[dict]) -> Dataset:
    """The shapes the journals' records finished (each config, the vendor row, the screen's full pass), as one dataset;
    refused unless every sitting read the flush buffer on one GPU model."""
    sittings = sittings_of(records)
    flushes = {recorded_flush(provenance.get("timing")) for provenance in sittings}
    gpus = {provenance.get("gpu_name") for provenance in sittings}
    if flushes != {"read"} or len(gpus) != 1:
        raise SystemExit(f"the journals' sittings used flushes {sorted(flushes)} on GPUs {sorted(map(str, gpus))}: "
                         "a re-recording is one GPU model, read flush")
    space = get_kernel("matmul").config_space()
    return build_dataset("matmul", "bfloat16", whole_shapes(records, configs, space.key))


def sitting_timing(records: list[dict]) -> pd.DataFrame:
    """Per sitting (by its provenance date): the timing worker's median seconds a screened config and a config timed
    in full (`bench_s`), and how often a run lay over 1.2x its config's median, in the screens and in the full
    timings' runs: the timer's cost and steadiness, sitting by sitting."""
    rows: dict[str, dict] = {}
    sitting = None
    for record in records:
        if record["kind"] == "provenance":
            sitting = record["provenance"]["date"]
        if record["kind"] != "config" or record["status"] != Status.OK.value:
            continue
        row = rows.setdefault(sitting, {"screen_s": [], "screen_slow": 0, "full_s": [], "runs": 0, "slow_runs": 0})
        repeats = np.asarray(record["repeats_ms"])
        slow = repeats > 1.2 * np.median(repeats)
        if record.get("screened"):
            row["screen_s"].append(record["bench_s"])
            row["screen_slow"] += bool(slow.any())
        else:
            row["full_s"].append(record["bench_s"])
            row["runs"] += len(repeats)
            row["slow_runs"] += int(slow.sum())
    return pd.DataFrame([{
        "sitting began": date, "screens": len(row["screen_s"]),
        "ms a screen (median)": f"{1e3 * np.median(row['screen_s']):.2f}" if row["screen_s"] else "-",
        "screens with a run > 1.2x their median": f"{row['screen_slow'] / max(1, len(row['screen_s'])):.3%}",
        "full timings": len(row["full_s"]),
        "ms a full timing (median)": f"{1e3 * np.median(row['full_s']):.2f}" if row["full_s"] else "-",
        "full runs > 1.2x their median": f"{row['slow_runs'] / max(1, row['runs']):.3%}"} for date, row in rows.items()])


def save_side_by_side(new: Dataset, recorded: Dataset, folder: Path) -> list[Path]:
    """The re-recorded shapes as rerecorded_<gpu>.parquet and the recording's rows at them as
    recorded_same_shapes_<gpu>.parquet in `folder` (<gpu>: "h100" of "NVIDIA H100 80GB HBM3"): the pair that
    config_prediction_cv.py cross-validates side by side."""
    tag = new.gpu.split()[1].lower() if len(new.gpu.split()) > 1 else new.gpu.lower()
    paths = [folder / f"rerecorded_{tag}.parquet", folder / f"recorded_same_shapes_{tag}.parquet"]
    save_dataset(new, paths[0])
    save_dataset(recorded.with_shapes(new.shapes()), paths[1])
    return paths


def screen_headroom(records: list[dict], shapes: pd.MultiIndex) -> pd.Series:
    """Per finished shape, the screened latency of the config fastest in the full pass over the screen's fastest: how
    near the screen's margin the final best came (1: the screen ranked it first)."""
    key = get_kernel("matmul").config_space().key
    screened: dict[tuple, dict] = {}
    full: dict[tuple, dict] = {}
    for record in records:
        if record["kind"] == "config" and record["status"] == Status.OK.value:
            table = screened if record.get("screened") else full
            table.setdefault(tuple(record["shape"]), {})[key(record["config"])] = float(np.median(record["repeats_ms"]))
    ratios = []
    for shape in shapes:
        best = min(full[shape], key=full[shape].get)
        ratios.append(screened[shape][best] / min(screened[shape].values()))
    return pd.Series(ratios, index=shapes)


def share(values: pd.Series) -> str:
    """The share of true values, as a percentage."""
    return f"{values.mean():.0%}"


def per_family(columns: dict[str, pd.Series],
               describe: Callable[[pd.Series], str] = percent_summary) -> pd.DataFrame:
    """`describe` of each shape-indexed column over all shapes, then per family of M."""
    index = next(iter(columns.values())).index
    families = pd.Series([family(m) for m in index.get_level_values("M")], index=index)
    rows = [{"shapes": "all", "count": len(index), **{name: describe(values) for name, values in columns.items()}}]
    for name, _, _ in FAMILIES:
        members = families == name
        if members.any():
            rows.append({"shapes": name, "count": int(members.sum()),
                         **{label: describe(values[members]) for label, values in columns.items()}})
    return pd.DataFrame(rows)


def best_rows(measurements: pd.DataFrame) -> pd.DataFrame:
    """Each shape's fastest ok row, indexed by shape."""
    ok = measurements[measurements["status"] == Status.OK.value]
    return ok.loc[ok.groupby(SHAPE)["latency_ms"].idxmin()].set_index(SHAPE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--journals", type=Path, nargs="+", required=True)
    parser.add_argument("--recorded", type=Path, default=RECORDED)
    parser.add_argument("--predictor", type=Path, default=PREDICTOR)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--datasets-out", type=Path, default=None,
                        help="a folder for rerecorded_<gpu>.parquet and recorded_same_shapes_<gpu>.parquet")
    args = parser.parse_args()
    configs = json.loads(CONFIGS.read_text())
    records = [record for path in args.journals for record in read_records(path)]
    new = journal_dataset(records, configs)
    if not new.shapes():
        raise SystemExit(f"no shape is finished in {[str(path) for path in args.journals]}")
    keys = keys_of(new)
    shapes = pd.MultiIndex.from_tuples(sorted(tuple(map(int, s)) for s in new.shapes()), names=SHAPE)
    recorded = load_dataset(args.recorded, kernel="matmul")
    if recorded.gpu != new.gpu:
        raise SystemExit(f"{args.recorded} was recorded on {recorded.gpu!r}, the journals on {new.gpu!r}")
    old = recorded.measurements.merge(shapes.to_frame(index=False), on=SHAPE)
    if args.datasets_out is not None:
        for path in save_side_by_side(new, recorded, args.datasets_out):
            print(f"wrote {path}", flush=True)
    both = two_sittings(old, new.measurements, keys).loc[shapes]
    from tunebench.predict import load_predictor

    with warnings.catch_warnings():  # its training is stale by design here: that is what this measures
        warnings.simplefilter("ignore")
        predictor = load_predictor(args.predictor)
    picks = {shape: predictor.best_config(shape) for shape in shapes}
    efficiency = per_family({
        "recorded best, judged today": both["first_best_judged_by_second"],
        "today's best, judged by the recording": both["second_best_judged_by_first"],
        "`best_config`, judged today": picks_judged(new.measurements, picks),
        "`best_config`, judged by the recording": picks_judged(old, picks)})
    timed = per_family({f"top {k} timed, fastest kept": best_of_judged(
        new.measurements, {shape: predictor.top_configs(shape, k) for shape in shapes}) for k in TIMED_K})
    today, then = best_rows(new.measurements).loc[shapes], best_rows(old).loc[shapes]
    splits = per_family({"today's best splits K": today["SPLIT_K"] > 1,
                         "the recording's best splits K": then["SPLIT_K"] > 1}, share)
    ratio = then["latency_ms"] / today["latency_ms"]
    sittings = pd.DataFrame([{"sitting began": provenance["date"], "GPU": provenance.get("gpu_uuid"),
                              "kernel source": provenance.get("kernel_source_sha256"), "flush": recorded_flush(
                                  provenance.get("timing"))} for provenance in sittings_of(records)])
    timed_in_full = new.measurements[new.measurements["repeats_ms"].map(len) > 3].groupby(SHAPE).size()
    headroom = screen_headroom(records, shapes)
    text = f"""# Issue 5's re-recording: progress

Command: `.venv/bin/python {' '.join(sys.argv)}`.

{len(shapes)} shapes finished ({new.gpu}, {len(configs)} candidates each, screened: 3 runs each, then in full those
within 20 % of the shape's screened best, a median {timed_in_full.median():.0f} a shape; the full pass's fastest had
screened at a median {headroom.median():.3f}x and at most {headroom.max():.3f}x the screen's fastest), from
{', '.join(f'`{os.path.relpath(path, REPO)}`' for path in args.journals)}, whose sittings were:

{markdown_table(sittings)}

The timing worker's seconds a config (`bench_s`: the check, the timed runs and their flushes) and the runs that lay
over 1.2x their config's median, per sitting (stop 101's timer from 2026-12-07T07:36, the one before it earlier):

{markdown_table(sitting_timing(records))}

The recording: `{os.path.relpath(args.recorded, REPO)}` (flush {recorded_flush(recorded.provenance.get('timing'))}),
its rows at the same shapes. The predictor: `{os.path.relpath(args.predictor, REPO)}`, trained on the recording
(these shapes included: for it, the recording's numbers are in-sample).

Efficiency (a sitting's best / the pick's latency in that sitting), mean / P10 / min:

{markdown_table(efficiency)}

The recording's best / today's best latency, median over shapes: {ratio.median():.3f} (min {ratio.min():.3f}, max
{ratio.max():.3f}). {'; '.join(f'{k}: {v}' for k, v in split_ratios(old, new.measurements, keys).items())}.

Prediction plus measurements (`timed_best_config`): the predictor's top k (`top_configs`), each timed, the fastest
kept, judged today:

{markdown_table(timed)}

Share of shapes whose best config splits K:

{markdown_table(splits)}
"""
    write_text_atomically(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
