"""The measurement ceiling under each L2 flush: the same shapes' candidates recorded in alternating sittings on one
GPU, zeroing and reading; each flush's two sittings judge each other's best (a perfect pick's credit).

GPU, per sitting (alternating zero, read, zero, read; `--resume-from` a journal to go on after `--stop-after-s`):
  python -m tunebench.collect --kernel matmul --dtype bfloat16 --shapes S --configs
      results/datasets/matmul_prediction_configs.json --out D.parquet --flush zero|read
CPU:
  .venv/bin/python benchmarks/flush_ceiling.py --zero Z1 Z2 --read R1 R2 [--recorded P.parquet] [--predictor F]
      --out F.md
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.measure.dataset import Dataset, load_dataset
from tunebench.measure.result import Status
from tunebench.measure.timing import recorded_flush
from tunebench.predict.evaluation import percent_summary, retest_efficiency
from tunebench.tables import markdown_table

from config_prediction_retime import paired_difference

REPO = Path(__file__).resolve().parents[1]
SHAPE = ["M", "N", "K"]


def keys_of(dataset: Dataset) -> list[str]:
    """The columns that name one measurement: the shape's, then the config's parameters."""
    return [*dataset.shape_names, *(parameter.name for parameter in dataset.parameters)]


def two_sittings(first: pd.DataFrame, second: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per shape both sittings timed: each sitting's best judged by the other (`retest_efficiency`), their mean
    (`ceiling`), and the median and 90th percentile over configs of |one sitting's latency / the other's - 1|."""
    table = retest_efficiency(first, second, keys).set_index(SHAPE)
    table["ceiling"] = (table["first_best_judged_by_second"] + table["second_best_judged_by_first"]) / 2
    joined = first.merge(second, on=keys, suffixes=("_first", "_second"))
    joined = joined[(joined["status_first"] == Status.OK.value) & (joined["status_second"] == Status.OK.value)]
    change = (joined["latency_ms_first"] / joined["latency_ms_second"] - 1).abs().groupby(
        [joined[name] for name in SHAPE])
    table["change_median"] = change.median()
    table["change_p90"] = change.quantile(0.9)
    return table


def summary_row(label: str, table: pd.DataFrame) -> dict[str, object]:
    """Mean / P10 / min of both directions pooled, and the configs' median change, over a `two_sittings` table."""
    both = np.concatenate([table["first_best_judged_by_second"], table["second_best_judged_by_first"]])
    return {"sittings": label, "shapes": len(table), "configs a shape": int(table["configs"].median()),
            "ceiling mean / P10 / min (both directions)": percent_summary(both),
            "config's |change|, median of shapes' median / P90": (f"{table['change_median'].median():.2%} / "
                                                                  f"{table['change_p90'].median():.2%}")}


def split_ratios(recorded: pd.DataFrame, later: pd.DataFrame, keys: list[str]) -> dict[str, str]:
    """The median over configs of recorded latency / later latency, for the unsplit configs (SPLIT_K 1) and the
    split ones apart: the kernel's split-K changed between recordings (three launches, then one)."""
    joined = recorded.merge(later, on=keys, suffixes=("_recorded", "_later"))
    joined = joined[(joined["status_recorded"] == Status.OK.value) & (joined["status_later"] == Status.OK.value)]
    ratio = joined["latency_ms_recorded"] / joined["latency_ms_later"]
    split = joined["SPLIT_K"] > 1
    return {"recorded / sitting, median config: unsplit": f"{ratio[~split].median():.3f}",
            "recorded / sitting, median config: split": f"{ratio[split].median():.3f}"}


def per_run_ms(dataset: Dataset) -> float:
    """Median over configs of the seconds spent timing one (`bench_s`) per timed run (the repeats, the warm-up run and
    the estimating run), in ms: what a sitting's flush and hold cost beside the kernel."""
    rows = dataset.measurements[dataset.measurements["status"] == Status.OK.value]
    return float((1e3 * rows["bench_s"] / (rows["repeats_ms"].map(len) + 2)).median())


def best_of_judged(measured: pd.DataFrame, picks: dict[tuple[int, int, int], list[dict[str, int]]]) -> pd.Series:
    """Per shape of `picks`, the sitting's fastest ok latency over the fastest of the picked configs there (what
    timing them all and keeping the fastest is worth; 0 where none ran), indexed by shape in the order of `picks`."""
    ok = measured[measured["status"] == Status.OK.value]
    efficiencies = []
    for shape, configs in picks.items():
        rows = ok[(ok[SHAPE] == list(shape)).all(axis=1)]
        chosen = pd.DataFrame(configs).merge(rows, on=list(configs[0]))
        efficiencies.append(rows["latency_ms"].min() / chosen["latency_ms"].min() if len(chosen) else 0.0)
    return pd.Series(efficiencies, index=pd.MultiIndex.from_tuples(list(picks), names=SHAPE))


def picks_judged(measured: pd.DataFrame, picks: dict[tuple[int, int, int], dict[str, int]]) -> pd.Series:
    """`best_of_judged` with one pick a shape: the sitting's fastest ok latency over the pick's (0 where the pick
    failed or is missing)."""
    return best_of_judged(measured, {shape: [pick] for shape, pick in picks.items()})


def sitting(path: Path, flush: str) -> Dataset:
    """A sitting's dataset, refused unless its provenance says it was timed under `flush`."""
    dataset = load_dataset(path, kernel="matmul")
    recorded = recorded_flush(dataset.provenance.get("timing"))
    if recorded != flush:
        raise SystemExit(f"{path} was timed with flush {recorded!r}, given as a {flush!r} sitting")
    return dataset


def recorded_section(path: Path, measured: dict[str, pd.DataFrame], best: dict[str, pd.Series], shapes: pd.Index,
                     keys: list[str]) -> str:
    """The markdown section judging a recorded dataset's rows at `shapes` by each sitting: the ceiling both ways, the
    ratio of the recorded best to the sitting's, and the split and unsplit configs' median ratios."""
    recorded = load_dataset(path, kernel="matmul")
    rows = recorded.measurements.merge(pd.DataFrame(list(shapes), columns=SHAPE), on=SHAPE)
    recorded_best = recorded.measurements[recorded.measurements["status"] == Status.OK.value].groupby(
        SHAPE)["latency_ms"].min().loc[shapes]
    table_rows = []
    for label, frame in measured.items():
        ratio = recorded_best / best[label].loc[shapes]
        table_rows.append({**summary_row(f"recorded - {label}", two_sittings(rows, frame, keys)),
                           "recorded best / sitting's best, median (min, max)": (
                               f"{ratio.median():.3f} ({ratio.min():.3f}, {ratio.max():.3f})"),
                           **split_ratios(rows, frame, keys)})
    return f"""
## The recorded dataset judged by today's sittings

`{os.path.relpath(path, REPO)}` ({recorded.provenance.get('gpu_name', recorded.gpu)}, flush
{recorded_flush(recorded.provenance.get('timing'))}), its rows at the same shapes, against each sitting:

{markdown_table(pd.DataFrame(table_rows))}
"""


def predictor_section(path: Path, measured: dict[str, pd.DataFrame], shapes: pd.Index) -> str:
    """The markdown section judging a saved predictor's `best_config` at `shapes` by each sitting."""
    from tunebench.predict import load_predictor

    predictor = load_predictor(path)
    picks = {shape: predictor.best_config(shape) for shape in shapes}
    judged = {label: picks_judged(frame, picks) for label, frame in measured.items()}
    rows = [{"sitting": label, "mean / P10 / min": percent_summary(values)} for label, values in judged.items()]
    per_pick = pd.DataFrame({"pick": [",".join(str(v) for v in picks[s].values()) for s in shapes],
                             **{label: values.map("{:.2%}".format) for label, values in judged.items()}},
                            index=pd.MultiIndex.from_tuples(shapes, names=SHAPE)).reset_index()
    return f"""
## `{os.path.relpath(path, REPO)}`'s picks judged by each sitting

`best_config` at each shape (the predictor may have trained on them; picks in the order of its space's parameters),
its efficiency: the sitting's best / the pick's latency there.

{markdown_table(pd.DataFrame(rows))}

{markdown_table(per_pick)}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zero", type=Path, nargs=2, required=True, metavar="SITTING", help="two zeroing sittings")
    parser.add_argument("--read", type=Path, nargs=2, required=True, metavar="SITTING", help="two reading sittings")
    parser.add_argument("--recorded", type=Path, default=None,
                        help="a recorded dataset of the same kernel to judge by each sitting (its rows at the shapes)")
    parser.add_argument("--predictor", type=Path, default=None,
                        help="a saved predictor whose `best_config` each sitting judges at the shapes")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    sittings = {f"{flush} {index + 1}": sitting(path, flush)
                for flush in ("zero", "read") for index, path in enumerate(getattr(args, flush))}
    keys = keys_of(next(iter(sittings.values())))
    measured = {label: dataset.measurements for label, dataset in sittings.items()}
    pairs = {"zero 1 - zero 2": two_sittings(measured["zero 1"], measured["zero 2"], keys),
             "read 1 - read 2": two_sittings(measured["read 1"], measured["read 2"], keys),
             "zero 1 - read 1": two_sittings(measured["zero 1"], measured["read 1"], keys),
             "zero 2 - read 2": two_sittings(measured["zero 2"], measured["read 2"], keys)}
    zero, read = pairs["zero 1 - zero 2"], pairs["read 1 - read 2"]
    shapes = zero.index.intersection(read.index)
    if shapes.empty:
        raise SystemExit("the zeroing and the reading sittings share no shape")
    best = {label: frame[frame["status"] == Status.OK.value].groupby(SHAPE)["latency_ms"].min()
            for label, frame in measured.items()}
    per_shape = pd.DataFrame({
        "zero: ceiling": zero.loc[shapes, "ceiling"].map("{:.2%}".format),
        "read: ceiling": read.loc[shapes, "ceiling"].map("{:.2%}".format),
        "zero: config's median |change|": zero.loc[shapes, "change_median"].map("{:.2%}".format),
        "read: config's median |change|": read.loc[shapes, "change_median"].map("{:.2%}".format),
        "best us, zero 1 / read 1": [f"{1000 * best['zero 1'][s]:.1f} / {1000 * best['read 1'][s]:.1f}"
                                     for s in shapes]}).reset_index()
    difference = paired_difference(read.loc[shapes, "ceiling"] - zero.loc[shapes, "ceiling"])
    recorded_text = recorded_section(args.recorded, measured, best, shapes, keys) if args.recorded else ""
    predictor_text = predictor_section(args.predictor, measured, shapes) if args.predictor else ""
    provenance = pd.DataFrame([{"sitting": label, "file": os.path.relpath(path, REPO),
                                "first timed": dataset.provenance.get("date"),
                                "gpu": dataset.provenance.get("gpu_name"),
                                "kernel source": dataset.provenance.get("kernel_source_sha256", "?"),
                                "bench_s a config, median": f"{dataset.measurements['bench_s'].median():.4f}",
                                "ms a timed run, median": f"{per_run_ms(dataset):.2f}"}
                               for (label, dataset), path in zip(sittings.items(), [*args.zero, *args.read])])
    text = f"""# The measurement ceiling under each L2 flush

Command: `.venv/bin/python {' '.join(sys.argv)}`.

Each pair of sittings timed the same candidates at the same shapes; each sitting's best config is judged by the other
sitting's timings (`retest_efficiency`), both directions pooled: what a perfect predictor is credited with when the
truth is one sitting. "Config's |change|": per shape, the median (and 90th percentile) over its configs of |one
sitting's latency / the other's - 1|, then the median over shapes. "ms a timed run": per config, `bench_s` over its
repeats plus the warm-up and the estimating run, median over configs (the flush and the hold beside the kernel).

{markdown_table(provenance)}

{markdown_table(pd.DataFrame([summary_row(label, table) for label, table in pairs.items()]))}

Per shape, the ceiling of each flush's two sittings (the mean of both directions) and the configs' median change:

{markdown_table(per_shape)}

The reading sittings' ceiling minus the zeroing ones', shape by shape: {difference} points (mean, 95 % bootstrap
interval over the {len(shapes)} shapes).
{recorded_text}{predictor_text}"""
    write_text_atomically(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
