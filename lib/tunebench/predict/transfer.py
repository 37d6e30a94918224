"""Transfer of config prediction across GPUs: a model trained on one GPU's recorded shapes, scored on another GPU's
held-out shapes, alone and with a few of the second GPU's shapes added to its training data.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import pandas as pd
from tqdm import tqdm

from tunebench.predict.dispatch import fit_predictor
from tunebench.predict.evaluation import grouped_folds, shape_efficiency
from tunebench.predict.model import RankerSettings, TrainingData

SOURCE_ONLY = "source only"
TARGET_ONLY = "target only"


def combine(source: TrainingData, target: TrainingData) -> TrainingData:
    """Both datasets' rows as one TrainingData, source shapes first; it predicts for the target's GPU. Each row keeps
    the features of the GPU it was measured on. The two must share kernel, dtype, space and candidates."""
    for name in ("kernel", "dtype"):
        if getattr(source, name) != getattr(target, name):
            raise ValueError(f"cannot combine datasets of {name} {getattr(source, name)!r} and "
                             f"{getattr(target, name)!r}")
    if source.space.names != target.space.names or not np.array_equal(source.candidates, target.candidates):
        raise ValueError("cannot combine datasets with different candidate configs: transfer needs the same "
                         "candidate set measured on both GPUs")
    return replace(
        target, shapes=np.concatenate([source.shapes, target.shapes]),
        features=np.concatenate([source.features, target.features]),
        latency_ms=np.concatenate([source.latency_ms, target.latency_ms]),
        spread=np.concatenate([source.spread, target.spread]),
        group=np.concatenate([source.group, target.group + len(source.shapes)]),
        provenance={"source": source.provenance, "target": target.provenance})


def transfer_efficiency(source: TrainingData, target: TrainingData, settings: RankerSettings,
                        added_shapes: Sequence[int] = (0, 3, 10), n_splits: int = 5, seed: int = 0,
                        progress: bool = True) -> pd.DataFrame:
    """Per held-out target shape (GroupKFold over the target's shapes): the efficiency, on the target's measurements,
    of the config picked by a model trained on the source shapes plus `k` of the fold's target training shapes
    (drawn with a seeded generator) for each k in `added_shapes`, and by a model trained on the fold's target
    training shapes alone. A held-out shape is unseen on both GPUs: the source's measurements of the fold's test
    shapes are left out too. `settings` come from elsewhere (tuned on the source): no target shape tunes anything.
    A progress bar counts the fits unless `progress` is False."""
    combined = combine(source, target)
    offset = len(source.shapes)
    latency = target.latency_ms.reshape(len(target.shapes), -1)
    rng = np.random.default_rng(seed)
    rows = []
    bar = tqdm(total=n_splits * (len(added_shapes) + 1), desc="transfer fits", unit="fit", disable=not progress)
    for fold, (train, test) in enumerate(grouped_folds(target.group, n_splits)):
        held_out = {tuple(shape) for shape in target.shapes[test].tolist()}
        source_shapes = np.array([index for index, shape in enumerate(source.shapes.tolist())
                                  if tuple(shape) not in held_out], dtype=np.int64)
        variants = {f"source + {k} target shapes" if k else SOURCE_ONLY:
                    np.concatenate([source_shapes, offset + rng.choice(train, size=min(k, len(train)),
                                                                       replace=False)])
                    for k in added_shapes}
        variants[TARGET_ONLY] = offset + train
        for variant, shapes in variants.items():
            predictor = fit_predictor(combined, settings, shapes, shortlist_shapes=())
            scores = np.array([predictor.scores(tuple(int(v) for v in target.shapes[index])) for index in test])
            for index, efficiency in zip(test, shape_efficiency(scores, latency[test])):
                rows.append({"variant": variant, "fold": fold, "M": int(target.shapes[index, 0]),
                             "N": int(target.shapes[index, 1]), "K": int(target.shapes[index, 2]),
                             "source shapes in training": int((shapes < offset).sum()),
                             "target shapes in training": int((shapes >= offset).sum()), "efficiency": efficiency})
            bar.update()
    bar.close()
    return pd.DataFrame(rows)
