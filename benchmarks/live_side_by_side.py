"""Live searches of two code versions run seed by seed in one sitting, side by side: medians over each one's seeds.

Run: `.venv/bin/python benchmarks/live_side_by_side.py --folder F`, e.g. F =
`results/live_search/matmul_tma_widened/side_by_side_8192`. The folder holds a subfolder per version (e.g.
`widened/`, `unwidened_6990140/`), each with `<strategy>_seed<N>/` folders of `benchmarks/live_search.py` traces of
one shape; the table goes to `side_by_side.md` in the folder.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.live_traces import summary_rows
from tunebench.tables import markdown_table

RUN_FOLDER = re.compile(r"(?P<strategy>.+)_seed(?P<seed>\d+)")
FRACTIONS = (0.95, 0.99)  # of cuBLAS's speed


def runs(folder: Path) -> pd.DataFrame:
    """One `summary_rows` row per trace under `folder`'s versions, with its version, strategy, seed and shape."""
    rows = []
    for trace_path in sorted(folder.glob("*/*_seed*/*.parquet")):
        match = RUN_FOLDER.fullmatch(trace_path.parent.name)
        if match is None:
            continue
        trace = pd.read_parquet(trace_path)
        row = summary_rows(trace).iloc[0].to_dict()
        rows.append({"version": trace_path.parent.parent.name, "seed": int(match["seed"]),
                     "shape": trace_path.stem.rsplit("_", 1)[-1], **row})  # <gpu>_<kernel>_<dtype>_<MxNxK>
    if not rows:
        raise SystemExit(f"no traces in {folder}/<version>/<strategy>_seed<N>/*.parquet")
    return pd.DataFrame(rows)


def side_by_side(frame: pd.DataFrame) -> pd.DataFrame:
    """Per strategy and version, over seeds: the median seconds from the first ask to each fraction of cuBLAS (a seed
    that never got there counts as the slowest), how many seeds reached 0.99x, and the range of where and when the
    runs ended, of the set-up before the first ask, and the median evaluations."""
    table = []
    for (strategy, version), part in frame.groupby(["strategy", "version"], sort=False):
        row = {"strategy": strategy, "version": version, "seeds": ", ".join(map(str, sorted(part.seed)))}
        for fraction in FRACTIONS:
            row[f"s to {fraction}x"] = part[f"s to {fraction}x"].fillna(np.inf).median()
        reached = int(part["s to 0.99x"].notna().sum())
        row["seeds to 0.99x"] = f"{reached} of {len(part)}"
        row["ended at (vs cuBLAS)"] = f"{part['best vs cuBLAS'].min():.3f} to {part['best vs cuBLAS'].max():.3f}x"
        row["ended after"] = f"{part.search_s.min():.1f} to {part.search_s.max():.1f} s"
        row["set-up before the first ask"] = f"{part.setup_s.min():.1f} to {part.setup_s.max():.1f} s"
        row["evaluations"] = part.evaluations.median()
        table.append(row)
    return pd.DataFrame(table)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, required=True, help="a folder of <version>/<strategy>_seed<N>/ traces")
    args = parser.parse_args()
    if not args.folder.is_dir():
        parser.error(f"no folder {args.folder}")
    frame = runs(args.folder)
    shapes = sorted(frame["shape"].unique())
    if len(shapes) != 1:
        parser.error(f"the traces under {args.folder} are of {len(shapes)} shapes, {shapes}: expected one")
    table = side_by_side(frame)
    text = "\n\n".join([
        f"# Live searches side by side at {shapes[0]}, seed by seed",
        f"Command: `.venv/bin/python {' '.join(sys.argv)}`",
        "Per strategy and version, medians over seeds of the seconds from the first ask (the workers' set-up before it "
        "in its own column) to each fraction of cuBLAS's speed, each run's cuBLAS timed after its search; a seed that "
        "never got there counts as the slowest. Each run's own table is in the `.md` beside its trace.",
        markdown_table(table)]) + "\n"
    write_text_atomically(args.folder / "side_by_side.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
