"""Two cross-validation runs of the same shapes side by side (config_prediction_cv.py's per-shape tables):
`best_config`'s paired difference per alignment class with its bootstrap interval, and each run's class-weighted mean.

CPU, seconds: .venv/bin/python benchmarks/cv_side_by_side.py --first A_per_shape.csv --second B_per_shape.csv
  [--weights-from results/config_prediction/cv_per_shape.csv] --out F.md
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

from config_prediction_retime import paired_difference
from tunebench.files import write_text_atomically
from tunebench.predict.evaluation import percent_summary
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
SHAPE = ["M", "N", "K"]
COLUMN = "dispatcher_efficiency"  # `best_config`, the deployed path
WHOLE_RECORDING = REPO / "results" / "config_prediction" / "cv_per_shape.csv"
CHANGED = 1e-4  # a shape counts as better or worse when its efficiency moved by more than 0.01 points


def read_per_shape(path: Path) -> pd.DataFrame:
    """A per-shape table indexed by shape; a clear error when it lacks the columns this compares."""
    table = pd.read_csv(path)
    missing = sorted({*SHAPE, "alignment", COLUMN} - set(table.columns))
    if missing:
        raise SystemExit(f"{path} lacks columns {missing}: pass a config_prediction_cv.py *_per_shape.csv")
    return table.set_index(SHAPE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--first", type=Path, required=True)
    parser.add_argument("--second", type=Path, required=True)
    parser.add_argument("--weights-from", type=Path, default=WHOLE_RECORDING,
                        help="a per-shape table whose alignment-class counts weight each run's class means")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    first, second = read_per_shape(args.first), read_per_shape(args.second)
    if set(first.index) != set(second.index):
        raise SystemExit(f"{args.first} and {args.second} hold different shapes "
                         f"({len(first)} and {len(second)}): a side-by-side needs the same ones")
    second = second.loc[first.index]
    difference = second[COLUMN] - first[COLUMN]
    rows = []
    classes = sorted(first["alignment"].unique())
    for name, mask in [("all", slice(None)), *[(c, first["alignment"] == c) for c in classes]]:
        part = difference[mask]
        rows.append({"shapes": f"{name} ({len(part)})", "first": percent_summary(first.loc[mask, COLUMN]),
                     "second": percent_summary(second.loc[mask, COLUMN]),
                     "second - first, points (mean, 95 % interval)": paired_difference(part),
                     "better / worse": f"{int((part > CHANGED).sum())} / {int((part < -CHANGED).sum())}"})
    counts = read_per_shape(args.weights_from)["alignment"].value_counts()
    if not set(counts.index) <= set(classes):
        raise SystemExit(f"{args.weights_from} weights classes {sorted(set(counts.index) - set(classes))} that "
                         f"{args.first} does not hold (it holds {classes})")
    weighted = {label: 100 * sum(table.groupby("alignment")[COLUMN].mean()[c] * n for c, n in counts.items())
                / counts.sum() for label, table in (("first", first), ("second", second))}
    class_counts = ", ".join(f"{c} {n}" for c, n in counts.items())
    text = f"""# Two cross-validations side by side

Command: `.venv/bin/python {' '.join(sys.argv)}`.

`best_config`'s efficiency ({COLUMN}) per shape, mean / P10 / min; first: `{args.first}`, second: `{args.second}`.
The interval is a percentile bootstrap over shapes (seeded); a shape is better or worse when it moved by more than
{100 * CHANGED:.2f} points.

{markdown_table(pd.DataFrame(rows))}

Each run's class means weighted by the class counts of `{os.path.relpath(args.weights_from, REPO)}` ({class_counts}):
first {weighted['first']:.2f} %, second {weighted['second']:.2f} %.
"""
    write_text_atomically(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
