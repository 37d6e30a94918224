"""A two-pass sweep against a full sweep of the same shapes in one GPU sitting: did the screened sweep find the full
sweep's best, and what did its timing cost? No GPU needed to read them back.

`.venv/bin/python benchmarks/screening_check.py --full F.parquet --screened S.jsonl.gz --out results/screening/X.md`:
F is the full sweep's dataset, S the screened sweep's journal (its records say which configs were screened and which
timed in full, and hold both passes' bench seconds).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tunebench.collect import read_records
from tunebench.files import write_text_atomically
from tunebench.measure.dataset import Dataset, load_dataset
from tunebench.tables import markdown_table


def screened_rows(records: Sequence[Mapping[str, Any]], shape_names: Sequence[str],
                  parameter_names: Sequence[str]) -> pd.DataFrame:
    """The screened sweep's config records as rows: shape, config, median (NaN unless it ran), whether screened, bench
    seconds."""
    rows = [{**dict(zip(shape_names, record["shape"])), **{name: record["config"][name] for name in parameter_names},
             "latency_ms": float(np.median(record["repeats_ms"]))
             if record["status"] == "ok" else np.nan, "screened": bool(record.get("screened")),
             "bench_s": float(record["bench_s"] or 0.0)} for record in records if record["kind"] == "config"]
    if not rows:
        raise ValueError("the screened sweep's journal holds no config records")
    return pd.DataFrame(rows)


def compare(full: Dataset, screened: pd.DataFrame) -> pd.DataFrame:
    """Per shape both sweeps hold: the full sweep's best, the screened sweep's pick (its fastest row, a full timing
    where it has one) judged by the full sweep, and both sweeps' bench seconds."""
    shape, config = list(full.shape_names), list(full.parameter_names)
    full_rows = full.measurements
    found = []
    for key, task in screened.groupby(shape, sort=True):
        mine = full_rows.merge(pd.DataFrame([dict(zip(shape, np.atleast_1d(key)))]), on=shape)
        if mine.empty:
            continue
        final = task.sort_values("screened").drop_duplicates(config)  # a full timing wins over the screen
        pick = final.loc[final["latency_ms"].idxmin(), config].to_dict()
        best = mine.loc[mine["latency_ms"].idxmin()]
        pick_in_full = mine.merge(pd.DataFrame([pick]), on=config)["latency_ms"].iloc[0]
        kept = task[~task["screened"]]
        best_again = kept.merge(pd.DataFrame([best[config].to_dict()]), on=config)["latency_ms"]
        found.append({"shape": "x".join(map(str, np.atleast_1d(key))), "configs": int(task["screened"].sum()),
                      "timed in full": len(kept), "full sweep's best kept": not best_again.empty,
                      "pick / full best": best["latency_ms"] / pick_in_full,
                      "full best / pick, two-pass sitting": final["latency_ms"].min() / best_again.iloc[0]
                      if not best_again.empty else np.nan,
                      "bench s, full sweep": mine["bench_s"].sum(), "bench s, two passes": task["bench_s"].sum()})
    if not found:
        raise ValueError("the two sweeps share no shape")
    return pd.DataFrame(found)


def report(table: pd.DataFrame, full: Dataset, command: str) -> str:
    ratio = table["bench s, two passes"].sum() / table["bench s, full sweep"].sum()
    return "\n".join([
        f"# A two-pass sweep beside a full sweep ({full.gpu})",
        "",
        f"Command: `{command}`. {table['timed in full'].sum()} of {table['configs'].sum()} screened configs were timed "
        "again in full.",
        "",
        markdown_table(table.round(4)),
        "",
        f"Bench seconds of the two passes, all shapes: {ratio:.1%} of the full sweep's. **pick / full best**: the full",
        "sweep's best latency over its latency of the config the screened sweep found fastest (1.0: the same speed).",
        "**full best / pick, two-pass sitting**: the other way round, both timed by the two-pass sweep's full pass:",
        "how far two sittings disagree on the two picks whatever the screen did.",
        "",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", type=Path, required=True, help="the full sweep's dataset (.parquet)")
    parser.add_argument("--screened", type=Path, required=True, help="the screened sweep's journal (.jsonl[.gz])")
    parser.add_argument("--out", type=Path, required=True, help="the markdown report to write")
    args = parser.parse_args(argv)
    for path in (args.full, args.screened):
        if not path.is_file():
            parser.error(f"no file at {path}")
    full = load_dataset(args.full)
    try:
        table = compare(full, screened_rows(read_records(args.screened), full.shape_names, full.parameter_names))
    except ValueError as error:
        parser.error(str(error))
    given = argv if argv is not None else sys.argv[1:]
    command = " ".join([".venv/bin/python benchmarks/screening_check.py", *given])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(args.out, report(table, full, command))
    print(markdown_table(table.round(4)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
