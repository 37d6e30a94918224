"""How far the exhaustive H100 GEMM dataset's timing noise (recorded before the spin and the timing core) moves its
medians: checked against later, steady sittings of the same configs at the shapes they share. No GPU needed.

`.venv/bin/python benchmarks/exhaustive_noise_check.py` compares the exhaustive dataset with the H100 prediction dataset
(600 candidates per shape, timed behind the spin) at the shapes both hold, beside the same comparison between two steady
sittings (the prediction dataset and its retest), lists the noisy rows of every exhaustive shape, and compares its
noisiest shapes with their re-sweep. It writes results/datasets/exhaustive_noise_check.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from tunebench.files import write_text_atomically
from tunebench.measure.dataset import Dataset, load_dataset, repeat_spread
from tunebench.tables import markdown_table

DATASETS = Path("results/datasets")
EXHAUSTIVE = DATASETS / "matmul_bfloat16_h100.parquet"
STEADY = DATASETS / "matmul_bfloat16_h100_prediction.parquet"
RETEST = DATASETS / "matmul_bfloat16_h100_prediction_retest.parquet"
UNHINTED = DATASETS / "matmul_bfloat16_h100_prediction_unhinted.parquet"
RESWEEP = DATASETS / "matmul_bfloat16_h100_resweep.parquet"  # the noisiest 7 shapes swept again, every config (stop 89)
STUDY = Path("results/strategy_comparison/summary_by_task.csv")
OUT = DATASETS / "exhaustive_noise_check.md"
SHAPE = ["M", "N", "K"]
NOISY = 0.5  # a row is noisy when its repeats spread ((max - min) / median) over more than this
NOISY_SHAPE = 0.05  # a shape is noisy when more than this share of its rows is
MOVED = 0.05  # a median moved when two sittings' medians differ by more than this fraction
TOP = 10


def ok_rows(dataset: Dataset, shapes: pd.DataFrame | None = None) -> pd.DataFrame:
    """`dataset`'s rows that ran, at `shapes` (all where None), with each row's repeats' (max - min) / median."""
    rows = dataset.measurements
    rows = rows[rows["status"] == "ok"]
    if shapes is not None:
        rows = rows.merge(shapes, on=SHAPE)
    return rows.assign(spread=repeat_spread(rows["repeats_ms"].tolist()))


def shapes_of(dataset: Dataset) -> pd.DataFrame:
    """The shapes `dataset` holds, one row each."""
    return dataset.measurements[SHAPE].drop_duplicates()


def same_kernel(steady: Dataset, unhinted: Dataset, shapes: pd.DataFrame) -> pd.DataFrame:
    """The steady sitting's rows at `shapes`, but its first, unhinted timings at the shapes that took an alignment
    hint later (the retest timed the kernel before hints, so both sides then time one kernel)."""
    before = ok_rows(unhinted, shapes)
    later = ok_rows(steady, shapes).merge(before[SHAPE].drop_duplicates(), on=SHAPE, how="left", indicator=True)
    return pd.concat([later[later.pop("_merge") == "left_only"], before], ignore_index=True)


def compare(first: pd.DataFrame, second: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Per shape both sittings hold, the configs both timed (`ok_rows`): how many of the first's rows are noisy, how
    far its medians lie from the second's (for noisy and steady rows apart), their rank agreement, and how the first's
    fastest config and top TOP fare in the second."""
    joined = first.merge(second[[*SHAPE, *names, "latency_ms"]], on=[*SHAPE, *names], suffixes=("_first", "_second"))
    rows = []
    for shape, part in joined.groupby(SHAPE, sort=True):
        moved = np.abs(np.log(part["latency_ms_first"] / part["latency_ms_second"])) > np.log1p(MOVED)
        noisy = part["spread"] > NOISY
        first_best = part.loc[part["latency_ms_first"].idxmin(), "latency_ms_second"]
        top_first = set(part.nsmallest(TOP, "latency_ms_first").index)
        top_second = set(part.nsmallest(TOP, "latency_ms_second").index)
        rows.append({
            "shape": "x".join(map(str, shape)), "configs": len(part),
            "fastest ms (second)": part["latency_ms_second"].min(),
            "noisy rows": noisy.mean(),
            "median ratio first / second": float(np.median(part["latency_ms_first"] / part["latency_ms_second"])),
            f"moved > {MOVED:.0%}, noisy rows": moved[noisy].mean() if noisy.any() else np.nan,
            f"moved > {MOVED:.0%}, other rows": moved[~noisy].mean(),
            "Spearman": spearmanr(part["latency_ms_first"], part["latency_ms_second"]).statistic,
            "first's fastest, in the second": part["latency_ms_second"].min() / first_best,
            f"top {TOP} shared": len(top_first & top_second),
        })
    if not rows:
        raise ValueError("the two datasets share no shape with configs timed in both")
    return pd.DataFrame(rows)


def medians(table: pd.DataFrame, label: str) -> dict:
    """One row: the median over shapes of every column of a `compare` table, and the worst shape's credit for the
    first sitting's fastest config."""
    numeric = table.drop(columns=["shape"]).median(numeric_only=True)
    worst = table["first's fastest, in the second"].min()
    return {"sittings": label, "shapes": len(table), **numeric.to_dict(), "first's fastest, worst shape": worst}


def per_shape_noise(rows: pd.DataFrame) -> pd.DataFrame:
    """Per shape of a dataset's `ok_rows`: its fastest median, the share of noisy rows, and the repeats a row got
    (median)."""
    rows = rows.assign(repeats=rows["repeats_ms"].apply(len))
    table = rows.groupby(SHAPE).agg(fastest_ms=("latency_ms", "min"), rows=("spread", "size"),
                                    noisy=("spread", lambda spread: (spread > NOISY).mean()),
                                    repeats=("repeats", "median")).reset_index()
    table.insert(0, "shape", table[SHAPE].astype(str).agg("x".join, axis=1))
    return table.drop(columns=SHAPE).rename(columns={"fastest_ms": "fastest ms", "noisy": "noisy rows",
                                                     "repeats": "repeats per row (median)"})


def study_by_noise(study: pd.DataFrame, noise: pd.DataFrame, task_prefix: str) -> pd.DataFrame:
    """Per strategy of a strategy comparison's per-task table, medians over the exhaustive dataset's noisy shapes
    (more than NOISY_SHAPE of their rows noisy) and over its other shapes: evaluations to 0.99 of the optimum and the
    mean score (each task's own median and mean over seeds)."""
    noisy_shapes = set(noise.loc[noise["noisy rows"] > NOISY_SHAPE, "shape"])
    tasks = study[study["task"].str.startswith(task_prefix)]
    noisy = tasks["task"].str.removeprefix(task_prefix).isin(noisy_shapes)
    counts = {True: tasks.loc[noisy, "task"].nunique(), False: tasks.loc[~noisy, "task"].nunique()}
    group = noisy.map({True: f"noisy shapes ({counts[True]})", False: f"other shapes ({counts[False]})"})
    table = tasks.assign(group=group).groupby(["strategy", "group"]).agg(
        evals=("evals_to_0.99", "median"), score=("mean_score", "median")).unstack("group")
    table.columns = [f"{'evals to 0.99' if metric == 'evals' else 'mean score'}, {group}" for metric, group in
                     table.columns]
    return table.reset_index()


def report(command: str) -> str:
    exhaustive, steady, retest, unhinted, resweep = (load_dataset(path, kernel="matmul")
                                                     for path in (EXHAUSTIVE, STEADY, RETEST, UNHINTED, RESWEEP))
    names = list(exhaustive.parameter_names)
    exhaustive_rows = ok_rows(exhaustive)
    noise = per_shape_noise(exhaustive_rows)
    noisy_vs_steady = compare(exhaustive_rows, ok_rows(steady, shapes_of(exhaustive)), names)
    steady_vs_steady = compare(ok_rows(retest), same_kernel(steady, unhinted, shapes_of(retest)), names)
    resweep_rows = ok_rows(resweep)
    noisy_vs_resweep = compare(ok_rows(exhaustive, shapes_of(resweep)), resweep_rows, names)
    summary = pd.DataFrame([medians(noisy_vs_steady, "exhaustive (first) against prediction (second)"),
                            medians(steady_vs_steady, "retest (first) against prediction (second)"),
                            medians(noisy_vs_resweep, "exhaustive (first) against its re-sweep (second)")])
    return "\n\n".join([
        "# The exhaustive H100 GEMM dataset's timing noise, against steady sittings",
        f"Command: `{command}`",
        f"`{EXHAUSTIVE}` ({exhaustive.provenance['date'][:10]}) was timed before the spin and the timing core "
        "(docs/measuring.md): a row is noisy when its repeats spread over more than "
        f"{NOISY:.0%} of their median. `{STEADY}` and `{RETEST}` were timed behind the spin. Each table compares two "
        "sittings of one H100 kind at the shapes both hold, on the configs both timed (status ok in both); a median "
        f"moved when the two sittings' medians differ by more than {MOVED:.0%}; \"first's fastest, in the second\" is "
        "the second sitting's fastest / its time for the first sitting's fastest config. The baseline pair is two "
        "steady sittings of the 600 candidates (at shapes that took an alignment hint after the retest, the steady "
        f"side is their first timings, `{UNHINTED}`, so that both sides time one kernel), so its figures are the drift "
        "between sittings that no timing fix removes.",
        "Medians over shapes:", markdown_table(summary, "{:.3f}"),
        "Per shape, the exhaustive dataset against the prediction dataset:", markdown_table(noisy_vs_steady, "{:.4g}"),
        "The exhaustive dataset's noisy rows per shape (every config):", markdown_table(noise, "{:.4g}"),
        f"Its seven noisiest shapes swept again, every config, behind the spin (`{RESWEEP}`, "
        f"{resweep.provenance['date'][:10]}, one H100): the old rows against the new, and the new rows' noise.",
        markdown_table(noisy_vs_resweep, "{:.4g}"), markdown_table(per_shape_noise(resweep_rows), "{:.4g}"),
        f"The strategy comparison (`{STUDY}`) on the exhaustive dataset's GEMM tasks, split by the shapes with more "
        f"than {NOISY_SHAPE:.0%} noisy rows and the others: per strategy, the median over the group's tasks of "
        "evaluations to 0.99 of the optimum and of the mean score. The noisy shapes are also the short, small-M "
        "ones, so a difference between the groups does not separate the noise from the shapes.",
        markdown_table(study_by_noise(pd.read_csv(STUDY), noise, f"{EXHAUSTIVE.stem}:"), "{:.3g}"),
    ]) + "\n"


def main() -> int:
    text = report(" ".join([".venv/bin/python benchmarks/exhaustive_noise_check.py", *sys.argv[1:]]))
    write_text_atomically(OUT, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
