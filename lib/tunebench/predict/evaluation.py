"""How config prediction is scored: per held-out shape, the measured latency of the predicted config against the
measured best of the candidates; summaries over shapes and shape families.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from tunebench.measure.result import Status

# Shape families by M, the one definition used everywhere: (name, lowest M, highest M + 1).
FAMILIES = (("M < 8", 1, 8), ("8 <= M < 128", 8, 128), ("128 <= M < 1024", 128, 1024), ("M >= 1024", 1024, None))
TOP_K = (1, 5)
# Alignment classes of (N, K), the one definition used everywhere: how the kernel can load the operands.
ALIGNMENTS = ("aligned", "hinted", "odd")


def family(m: int) -> str:
    """The family name of a shape with this M."""
    for name, low, high in FAMILIES:
        if m >= low and (high is None or m < high):
            return name
    raise ValueError(f"M={m} is in no family; M must be >= 1")


def alignment(n: int, k: int) -> str:
    """'aligned' when N and K are multiples of 16, 'odd' when either is odd, else 'hinted' (both even, one off
    multiples of 16: the kernel's alignment hints of 8, 4 or 2 apply)."""
    if n % 2 or k % 2:
        return "odd"
    return "aligned" if n % 16 == 0 and k % 16 == 0 else "hinted"


def shape_efficiency(scores: np.ndarray, latency_ms: np.ndarray) -> np.ndarray:
    """Per shape (row of the (shapes, candidates) arrays): best measured latency / measured latency of the highest
    scored candidate (ties: the first). 1 means the prediction was the measured best."""
    picked = latency_ms[np.arange(len(scores)), np.argmax(scores, axis=1)]
    return latency_ms.min(axis=1) / picked


def top_k_hits(scores: np.ndarray, latency_ms: np.ndarray, k: int) -> np.ndarray:
    """Per shape, whether the measured best candidate is among the k highest scored (top-k hit rate, not NDCG)."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    best = np.argmin(latency_ms, axis=1)
    return (order == best[:, None]).any(axis=1)


def best_of_top_k(scores: np.ndarray, latency_ms: np.ndarray, k: int) -> np.ndarray:
    """Per shape: best measured latency / the best measured latency among the k highest scored candidates, the
    efficiency of timing the model's top k on the GPU and keeping the fastest (up to timing noise)."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return latency_ms.min(axis=1) / np.take_along_axis(latency_ms, order, axis=1).min(axis=1)


def retest_efficiency(first: pd.DataFrame, second: pd.DataFrame, keys: Sequence[str],
                      shape_names: Sequence[str] = ("M", "N", "K")) -> pd.DataFrame:
    """Per shape timed in two sittings (measurement tables with `keys` columns, `status` and `latency_ms`), the
    efficiency of each sitting's best config judged by the other sitting's timings: what a perfect predictor is
    credited with when the truth is one sitting. Configs that failed in either sitting are left out."""
    joined = first.merge(second, on=list(keys), suffixes=("_first", "_second"))
    joined = joined[(joined["status_first"] == Status.OK.value) & (joined["status_second"] == Status.OK.value)]
    rows = []
    for shape, group in joined.groupby(list(shape_names)):
        one, two = group["latency_ms_first"].to_numpy(), group["latency_ms_second"].to_numpy()
        rows.append({**dict(zip(shape_names, shape)), "configs": len(group), "best_ms_first": one.min(),
                     "first_best_judged_by_second": two.min() / two[np.argmin(one)],
                     "second_best_judged_by_first": one.min() / one[np.argmin(two)]})
    return pd.DataFrame(rows)


def grouped_folds(group: np.ndarray, n_splits: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """GroupKFold over shapes: (train shape indices, test shape indices) per fold; a shape is in one test fold only
    and never in the training shapes of its own fold."""
    shapes = np.unique(group)
    folds = []
    for train, test in GroupKFold(n_splits=n_splits).split(shapes, groups=shapes):
        folds.append((shapes[train], shapes[test]))
    return folds


def thin_shapes(shapes: np.ndarray, fraction: float, seed: int = 0) -> np.ndarray:
    """A seeded sample of `fraction` of these shape indices (at least one), in their order: a quicker fit or scoring
    of a fold; fraction 1 keeps them all."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction={fraction!r}: the share of shapes kept must be in (0, 1]")
    keep = max(1, round(fraction * len(shapes)))
    return np.sort(np.random.default_rng(seed).choice(shapes, keep, replace=False)) if keep < len(shapes) else shapes


def per_shape_table(shapes: np.ndarray, scores: np.ndarray, latency_ms: np.ndarray) -> pd.DataFrame:
    """One row per shape: M, N, K, family, alignment class, efficiency, top-1 and top-5 hits, the predicted and best
    candidate."""
    table = pd.DataFrame(shapes, columns=["M", "N", "K"])
    table["family"] = [family(int(m)) for m in shapes[:, 0]]
    table["alignment"] = [alignment(int(n), int(k)) for n, k in shapes[:, 1:]]
    table["efficiency"] = shape_efficiency(scores, latency_ms)
    for k in TOP_K:
        table[f"top{k}_hit"] = top_k_hits(scores, latency_ms, k)
    table["predicted"] = np.argmax(scores, axis=1)
    table["best"] = np.argmin(latency_ms, axis=1)
    table["predicted_ms"] = latency_ms[np.arange(len(scores)), table["predicted"]]
    table["best_ms"] = latency_ms.min(axis=1)
    return table


def summarize_efficiency(table: pd.DataFrame) -> dict[str, float]:
    """Mean, P10 (numpy's linear-interpolation 10th percentile over shapes), min and median efficiency of a per-shape
    table, and the top-1 / top-5 hit rates where it has their columns (`top1_hit`, `top5_hit`)."""
    efficiency = table["efficiency"].to_numpy()
    summary = {"shapes": int(len(table)), "mean": float(efficiency.mean()),
               "p10": float(np.percentile(efficiency, 10)), "min": float(efficiency.min()),
               "median": float(np.median(efficiency))}
    for k in TOP_K:
        if f"top{k}_hit" in table:
            summary[f"top{k}_hit_rate"] = float(table[f"top{k}_hit"].mean())
    return summary


def percent_summary(values: Sequence[float]) -> str:
    """Efficiencies' mean / P10 (numpy's linear-interpolation 10th percentile) / min, as percentages: "98.40% /
    95.13% / 70.38%"."""
    values = np.asarray(values, dtype=float)
    return f"{values.mean():.2%} / {np.percentile(values, 10):.2%} / {values.min():.2%}"


def by_family(table: pd.DataFrame) -> pd.DataFrame:
    """`summarize_efficiency` per family, in family order."""
    return _by(table, "family", [name for name, _, _ in FAMILIES])


def by_alignment(table: pd.DataFrame) -> pd.DataFrame:
    """`summarize_efficiency` per alignment class, in ALIGNMENTS order."""
    return _by(table, "alignment", ALIGNMENTS)


def _by(table: pd.DataFrame, column: str, names: Sequence[str]) -> pd.DataFrame:
    rows = []
    for name in names:
        members = table[table[column] == name]
        if len(members):
            rows.append({column: name, **summarize_efficiency(members)})
    return pd.DataFrame(rows)


def retimed_efficiency(journal: pd.DataFrame, per_shape: pd.DataFrame, k: int) -> pd.DataFrame:
    """Picks judged by a side-by-side re-timing. `journal`: rows (round, M, N, K, config, status, latency_ms) of a
    set of configs per shape timed in interleaved rounds; `per_shape`: the replay's table (`predicted_config`,
    `dispatcher_config`, `best_config`, `top{k}_configs` joined by ';', and the replay efficiencies). Per re-timed
    shape: each pick's efficiency on rounds 1.. (fastest median in the set / the pick's median), where "top k
    timed" keeps the fastest of the model's top k in round 0, so that its choice and its judgement use independent
    timings; beside the replay's efficiency of the same picks. A pick never timed scores 0."""
    ok = journal[journal["status"] == Status.OK.value]
    judge = ok[ok["round"] > 0].groupby(["M", "N", "K", "config"])["latency_ms"].median()
    first = ok[ok["round"] == 0].set_index(["M", "N", "K", "config"])["latency_ms"].sort_index()
    timed_shapes = set(judge.index.droplevel("config"))
    rows = []
    for row in per_shape.itertuples(index=False):
        shape = (int(row.M), int(row.N), int(row.K))
        if shape not in timed_shapes:
            continue
        medians = judge.loc[shape]
        best = medians.min()
        sitting = first.loc[shape].reindex(str(getattr(row, f"top{k}_configs")).split(";")).dropna()

        def judged(config: str | None) -> float:
            return float(best / medians[config]) if config in medians.index else 0.0

        rows.append({"M": shape[0], "N": shape[1], "K": shape[2], "configs timed": len(medians),
                     "prediction": judged(row.predicted_config), "dispatcher": judged(row.dispatcher_config),
                     f"top {k} timed": judged(sitting.idxmin() if len(sitting) else None),
                     "recorded best": judged(row.best_config),
                     "prediction (replay)": row.selected_efficiency,
                     f"top {k} timed (replay)": getattr(row, f"selected_top{k}_timed_efficiency")})
    return pd.DataFrame(rows)


def untimed_picks(journal: pd.DataFrame, per_shape: pd.DataFrame, k: int) -> list[tuple[tuple[int, int, int], str]]:
    """(shape, config) of every pick of a re-timed shape (`retimed_efficiency`'s prediction, dispatcher pick, recorded
    best and top k) that the journal never timed, which `retimed_efficiency` would score 0."""
    timed = set(zip(journal["M"], journal["N"], journal["K"], journal["config"]))
    shapes = {key[:3] for key in timed}
    missing = []
    for row in per_shape.itertuples(index=False):
        shape = (int(row.M), int(row.N), int(row.K))
        if shape in shapes:
            configs = [row.predicted_config, row.dispatcher_config, row.best_config,
                       *str(getattr(row, f"top{k}_configs")).split(";")]
            missing += [(shape, config) for config in dict.fromkeys(configs) if (*shape, config) not in timed]
    return missing
