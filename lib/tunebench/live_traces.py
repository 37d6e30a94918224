"""Summaries of live searches' traces (`benchmarks/live_search.py`): per strategy of one shape, the evaluations and
wall seconds to fractions of cuBLAS's speed, of the run's best config and of the strategy's own best; their medians
over shapes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

FRACTIONS_OF_VENDOR = (0.5, 0.71, 0.8, 0.9, 0.95, 0.99, 1.0)
FRACTION_OF_BEST = 0.99  # of the best config any strategy found for the shape in this run


def first_time_reaching(trace: pd.DataFrame, reference_ms: float, fraction: float) -> float:
    """Wall seconds at which best-so-far first reached `fraction` of the reference's speed (NaN if never)."""
    reached = trace[reference_ms / trace.best_ms >= fraction]
    return float(reached.time_s.iloc[0]) if len(reached) else float("nan")


def evaluations_reaching(trace: pd.DataFrame, reference_ms: float, fraction: float) -> float:
    """Unique evaluations until best-so-far first reached `fraction` of the reference's speed (NaN if never)."""
    reached = (reference_ms / trace.best_ms >= fraction).to_numpy().nonzero()[0]
    return float(reached[0] + 1) if len(reached) else float("nan")


def summary_rows(traces: pd.DataFrame) -> pd.DataFrame:
    """Per strategy of one shape's traces: evaluations, seconds, the best against cuBLAS; the first evaluation and the
    first batch against the best any strategy found (for a warm start: the prediction's pick and its top k), and the
    first batch's seconds; and when each fraction of cuBLAS and FRACTION_OF_BEST of that best, and of the strategy's
    own best (after which it found nothing better by more than 1 %), were first reached (setup_s: NaN in traces
    recorded before it was kept)."""
    best_of_run = traces.best_ms.min()
    rows = []
    for name, trace in traces.groupby("strategy", sort=False):
        vendor_ms, best = float(trace.vendor_ms.iloc[0]), float(trace.best_ms.min())
        setup_s = float(trace.setup_s.iloc[0]) if "setup_s" in trace else float("nan")
        first_batch = trace[trace.batch == trace.batch.iloc[0]]
        row = {"strategy": name, "evaluations": len(trace), "search_s": round(float(trace.time_s.max()), 1),
               "setup_s": round(setup_s, 1), "best_ms": round(best, 4), "cuBLAS_ms": round(vendor_ms, 4),
               "best vs cuBLAS": round(vendor_ms / best, 3), "best vs run's best": round(best_of_run / best, 3),
               "first evaluation vs run's best": round(best_of_run / float(trace.best_ms.iloc[0]), 3),
               "first batch vs run's best": round(best_of_run / float(first_batch.best_ms.min()), 3),
               "first batch s": round(float(first_batch.time_s.max()), 1),
               f"evals to {FRACTION_OF_BEST} of run's best": evaluations_reaching(trace, best_of_run,
                                                                                  FRACTION_OF_BEST),
               f"s to {FRACTION_OF_BEST} of run's best": round(first_time_reaching(trace, best_of_run,
                                                                                   FRACTION_OF_BEST), 1),
               f"s to {FRACTION_OF_BEST} of its own best": round(first_time_reaching(trace, best, FRACTION_OF_BEST),
                                                                 1)}
        for fraction in FRACTIONS_OF_VENDOR:
            row[f"s to {fraction}x"] = round(first_time_reaching(trace, vendor_ms, fraction), 1)
        rows.append(row)
    return pd.DataFrame(rows)


def across_shapes(summaries: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Per strategy, over shapes' `summary_rows`: the median evaluations and seconds to FRACTION_OF_BEST of each run's
    best (a shape never reached counts as the slowest), on how many shapes it took at most 20 evaluations, the mean
    and min of its first evaluation against the run's best (for a warm start, the prediction's pick judged live), and
    the median seconds to FRACTION_OF_BEST of its own best and to its end."""
    frame = pd.concat(summaries, ignore_index=True)
    evaluations, seconds = (f"evals to {FRACTION_OF_BEST} of run's best", f"s to {FRACTION_OF_BEST} of run's best")
    first = "first evaluation vs run's best"
    rows = []
    for name, part in frame.groupby("strategy", sort=False):
        rows.append({"strategy": name, "shapes": len(part),
                     f"median evals to {FRACTION_OF_BEST} of run's best": part[evaluations].fillna(np.inf).median(),
                     f"median s to {FRACTION_OF_BEST} of run's best": part[seconds].fillna(np.inf).median(),
                     "shapes within 20 evals": int((part[evaluations] <= 20).sum()),
                     "shapes never": int(part[evaluations].isna().sum()),
                     "mean first evaluation vs run's best": round(part[first].mean(), 3),
                     "min first evaluation vs run's best": part[first].min(),
                     f"median s to {FRACTION_OF_BEST} of its own best":
                         part[f"s to {FRACTION_OF_BEST} of its own best"].median(),
                     "median search_s": part["search_s"].median()})
    return pd.DataFrame(rows)
