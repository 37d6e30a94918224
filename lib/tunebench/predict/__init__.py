"""Config prediction for unseen shapes: features, rankers, grouped cross-validation and a dispatcher.

Train on a recorded dataset whose shapes share one candidate set of configs, score by shape-grouped CV, and save a
`Predictor` whose `best_config(shape)` picks among the candidates for a shape it never saw, or whose
`timed_best_config(shape, evaluator)` times its top k and keeps the fastest.
"""

from tunebench.predict.dispatch import (Predictor, PredictorError, StaleTrainingWarning, TimedPick, fit_predictor,
                                        load_predictor, read_header, save_predictor)
from tunebench.predict.evaluation import (ALIGNMENTS, FAMILIES, alignment, by_alignment, by_family, family, grouped_folds,
                                          per_shape_table, summarize_efficiency)
from tunebench.predict.features import Hardware, feature_names, feature_row, features
from tunebench.predict.forest import CompiledForest
from tunebench.predict.model import ConfigRanker, RankerSettings, TrainingData, select_ranker, training_data
from tunebench.predict.protocol import SELECTED, CrossValidation, cross_validate

__all__ = [
    "ALIGNMENTS", "FAMILIES", "SELECTED", "CompiledForest", "ConfigRanker", "CrossValidation", "Hardware", "Predictor",
    "PredictorError", "RankerSettings", "StaleTrainingWarning", "TimedPick", "TrainingData", "alignment",
    "by_alignment", "by_family", "cross_validate", "family", "feature_names", "feature_row", "features",
    "fit_predictor", "grouped_folds", "load_predictor", "per_shape_table", "read_header", "save_predictor",
    "select_ranker", "summarize_efficiency", "training_data",
]
