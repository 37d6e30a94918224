"""Split-K in one launch against the three launches before it, from `benchmarks/split_k_epilogue.py`'s timings in
rounds: each split config both ways, and each family's fastest against cuBLAS (the gemm_kernels notebook shows it).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

ONE, THREE = "one launch", "three launches (stop 90)"  # how a contender's name ends, after ": "


def launches_table(timings: pd.DataFrame, three: str = THREE) -> pd.DataFrame:
    """Per shape and split config: its median ms over rounds in one launch and in three (contenders named ending in
    `three`), and three / one."""
    ok = timings[timings.status == "ok"]
    medians = ok.groupby(["shape", "name"], sort=False).latency_ms.median()
    rows = []
    for (shape, name), one_ms in medians.items():
        if not name.endswith(ONE):
            continue
        three_ms = medians.get((shape, name.replace(ONE, three)))
        if three_ms is not None:
            rows.append({"shape": shape, "config": name.removesuffix(": " + ONE), "one launch ms": round(one_ms, 4),
                         "three launches ms": round(three_ms, 4), "three / one": round(three_ms / one_ms, 3)})
    return pd.DataFrame(rows)


def family_table(timings: pd.DataFrame) -> pd.DataFrame:
    """Per shape and family, cuBLAS's median / the fastest median of its split configs in one launch, in three
    launches, and of its fastest recorded unsplit config."""
    ok = timings[timings.status == "ok"]
    medians = ok.groupby(["shape", "name"], sort=False).latency_ms.median().reset_index()
    rows = []
    for shape, group in medians.groupby("shape", sort=False):
        cublas = group.loc[group.name == "cuBLAS", "latency_ms"].iloc[0]
        for family in ("matmul", "matmul_tma"):
            mine = group[group.name.str.startswith(family + " #")]
            if mine.empty:
                continue
            row: dict[str, Any] = {"shape": shape, "family": family, "cuBLAS ms": round(cublas, 4)}
            for label, picked in (("split, one launch", mine.name.str.endswith(ONE)),
                                  ("split, three launches", mine.name.str.endswith(THREE)),
                                  ("unsplit", mine.name.str.endswith("unsplit"))):
                row[f"{label} vs cuBLAS"] = round(cublas / mine.loc[picked, "latency_ms"].min(), 3) if picked.any() \
                    else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)
