"""Models that rank a fixed set of candidate configs for a GEMM shape, trained on recorded datasets.

`training_data` turns a Dataset into features and targets; `ConfigRanker` is a gradient-boosted model with one of
two objectives (throughput regression, or per-shape relative speed), optionally one per group of alignment classes
(`predict.split`) and with its training shapes' config profile beside the features (`predict.profile`);
`select_ranker` tunes it on an inner grouped split of the training shapes only.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

from tunebench.measure.dataset import Dataset, repeat_spread
from tunebench.measure.result import Status
from tunebench.predict.compiled import CompiledResources
from tunebench.predict.evaluation import shape_efficiency
from tunebench.predict.features import Hardware, feature_names, features
from tunebench.predict.profile import ConfigProfile
from tunebench.predict.split import SplitModel, check_split, row_groups
from tunebench.space import Space

OBJECTIVES = ("throughput", "relative")
# A row whose repeats spread over more than this fraction of their median ((max - min) / median) was disturbed
# while it was timed (0.03 % of the prediction dataset's rows; some run 20x slower than the same config on a
# neighbouring shape). Such rows are left out of training; evaluation always uses every recorded row.
MAX_TRAINING_SPREAD = 0.5
# Training rows slower than this fraction of their shape's best (61 % of the prediction dataset's rows, 24 % of the
# `relative` objective's weight) are subsampled: each kept with probability SUBSAMPLE_KEEP (seeded) and its weight
# divided by it, so the expected loss is unchanged. Fits take half the time; out of fold the argmax scored as well or
# better (results/config_prediction/HISTORY.md, "Subsampled training rows").
SUBSAMPLE_BELOW = 0.5
SUBSAMPLE_KEEP = 0.2
# Models averaged in a tuned ranker's final fit (`select_ranker`'s choice; the inner tuning fits one). Averaging seeds'
# models cut the variance of the picks: on the 1,129 shapes' folds, the model alone scored 97.74 / 93.17 % (mean / P10)
# with one, 97.97 / 93.77 % with three (results/config_prediction/HISTORY.md, "Tried in stop 27"). Two, not three: the
# dispatcher walks every member's trees, and a third would take best_config past 1 ms.
FINAL_MODELS = 2


@dataclass
class TrainingData:
    """Every (shape, candidate config) row of a dataset, with its features and measured latency.

    Rows are grouped by shape (`group`, an index into `shapes`); every shape has the same candidates, in the same
    order, so a shape's rows are `group == g` and reshape to (shapes, candidates).
    """

    kernel: str
    dtype: str
    gpu: str
    space: Space
    hardware: Hardware
    resources: CompiledResources
    shapes: np.ndarray  # (shapes, 3)
    candidates: np.ndarray  # (candidates, parameters) config values in the space's parameter order
    features: np.ndarray  # (rows, features)
    latency_ms: np.ndarray  # (rows,), inf for failures
    spread: np.ndarray  # (rows,), (max - min) / median of the repeats; inf for failures
    group: np.ndarray  # (rows,) shape index
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def feature_names(self) -> list[str]:
        return feature_names(self.space)

    @property
    def flops(self) -> np.ndarray:
        shapes = self.shapes[self.group].astype(np.float64)
        return 2.0 * shapes[:, 0] * shapes[:, 1] * shapes[:, 2]

    def rows_of(self, shape_indices: Sequence[int]) -> np.ndarray:
        """Row indices of the given shapes, shape by shape."""
        count = len(self.candidates)
        return (np.asarray(shape_indices)[:, None] * count + np.arange(count)[None, :]).ravel()

    def candidate_of(self, rows: np.ndarray) -> np.ndarray:
        """The candidate index of each row."""
        return np.asarray(rows) % len(self.candidates)


def common_candidates(dataset: Dataset) -> np.ndarray:
    """The configs recorded for every shape of the dataset, sorted, as (candidates, parameters) int64 values in the
    space's parameter order."""
    names = list(dataset.parameter_names)
    counts = dataset.measurements.groupby(names).size()
    common = counts[counts == len(dataset.shapes())].index
    if len(common) == 0:
        raise ValueError("no config is recorded for every shape; config prediction needs a common candidate set")
    return np.array(sorted(common), dtype=np.int64).reshape(len(common), len(names))


def training_data(dataset: Dataset, resources: CompiledResources, hardware: Hardware | None = None) -> TrainingData:
    """Features and latencies of every recorded (shape, config); the candidates are the configs recorded for every
    shape (rows of other configs are dropped), each of which `resources` must hold. Failed rows stay, with infinite
    latency."""
    if tuple(dataset.shape_names) != ("M", "N", "K"):
        raise ValueError(f"config prediction supports GEMM datasets (M, N, K), not shapes {dataset.shape_names}")
    hardware = hardware or Hardware.from_provenance(dataset.provenance)
    compiled_for = resources.source.get("dtype")
    if compiled_for is not None and compiled_for != dataset.dtype:
        raise ValueError(f"the compiled-resource table was compiled for {compiled_for}, the dataset is {dataset.dtype}")
    space = Space(dataset.parameters, name=dataset.kernel)  # unconstrained: features need names and encodings
    names = list(space.names)
    frame = dataset.measurements
    shapes = dataset.shapes()
    candidates = common_candidates(dataset)
    frame = frame.set_index(names).loc[[tuple(row) for row in candidates.tolist()]].reset_index()
    frame = frame.sort_values(["M", "N", "K", *names], kind="stable").reset_index(drop=True)
    ok = frame["status"].to_numpy() == Status.OK.value
    latency = np.where(ok, frame["latency_ms"].to_numpy(dtype=float), np.inf)
    spread = repeat_spread(frame["repeats_ms"].tolist())
    spread = np.where(ok, spread, np.inf)
    shape_array = np.array(shapes, dtype=np.int64)
    group = np.repeat(np.arange(len(shapes)), len(candidates))
    values = frame[names].to_numpy(dtype=np.int64)
    if not (values.reshape(len(shapes), len(candidates), -1) == candidates[None]).all():
        raise AssertionError("rows are not in candidate order within each shape")
    matrix = features(frame[["M", "N", "K"]].to_numpy(dtype=np.int64), values, space, dataset.dtype, resources,
                      hardware)
    return TrainingData(dataset.kernel, dataset.dtype, dataset.gpu, space, hardware, resources, shape_array,
                        candidates, matrix, latency, spread, group, dict(dataset.provenance))


def relative_speed(latency_ms: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per row, the best latency of its shape over its own latency: 1 for the fastest config, 0 for a failure."""
    best = np.full(group.max() + 1, np.inf)
    np.minimum.at(best, group, latency_ms)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(latency_ms), best[group] / latency_ms, 0.0)


@dataclass(frozen=True)
class RankerSettings:
    """A ConfigRanker's hyperparameters.

    objective: "throughput" regresses log1p(TFLOPS) (CK Tile's dispatcher target); "relative" regresses each row's
        speed relative to its shape's best (latency_best / latency) with sample weight (relative speed)^2, a pointwise
        stand-in for a ranking loss that attends to the top of each shape's list.
    max_iter, learning_rate, max_leaf_nodes, min_samples_leaf, l2_regularization: HistGradientBoostingRegressor's.
    max_depth: bounded so that the compiled forest of the dispatcher walks few levels.
    subsample_below, subsample_keep: rows whose relative speed is below `subsample_below` are kept with probability
        `subsample_keep` (seeded by random_state) and weighted by its inverse; subsample_keep 1: every row.
    portfolio_size: the model picks only among this many candidates, chosen on the training shapes (`portfolio`);
        0: among every candidate.
    models: regressors fitted and averaged; member i is seeded with random_state + i (its own subsample of slow rows
        and its own binning).
    alignment_split: a name in `split.ALIGNMENT_SPLITS`: "none", one regressor per member over every row; "aligned"
        (aligned, unaligned) or "class" (aligned, hinted, odd), one regressor per group per member, each fitted on its
        group's rows with these settings.
    profile_factors: 0, the features alone; n, each row also carries its candidate's config profile over the training
        shapes (`predict.profile`: the mean log relative speed and n component loadings, n at most the number of
        training shapes and of candidates).
    """

    objective: str = "relative"
    max_iter: int = 200
    learning_rate: float = 0.1
    max_leaf_nodes: int = 31
    max_depth: int = 8
    min_samples_leaf: int = 20
    l2_regularization: float = 0.0
    max_training_spread: float = MAX_TRAINING_SPREAD
    random_state: int = 0
    portfolio_size: int = 0
    subsample_below: float = SUBSAMPLE_BELOW
    subsample_keep: float = SUBSAMPLE_KEEP
    models: int = 1
    alignment_split: str = "none"
    profile_factors: int = 0

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.objective!r}; allowed: {', '.join(OBJECTIVES)}")
        if not 0 < self.subsample_keep <= 1:
            raise ValueError(f"subsample_keep must lie in (0, 1], got {self.subsample_keep}")
        if self.portfolio_size < 0:
            raise ValueError(f"portfolio_size must be >= 0 (0: every candidate), got {self.portfolio_size}")
        if isinstance(self.models, bool) or not isinstance(self.models, int) or self.models < 1:
            raise ValueError(f"models must be an integer >= 1, got {self.models!r}")
        check_split(self.alignment_split)
        if isinstance(self.profile_factors, bool) or not isinstance(self.profile_factors, int) or \
                self.profile_factors < 0:
            raise ValueError(f"profile_factors must be an integer >= 0 (0: no profile), got {self.profile_factors!r}")


def portfolio(data: TrainingData, shape_indices: np.ndarray, size: int) -> np.ndarray:
    """Candidate indices, greedily: each next one raises the most the mean over the given shapes of the best
    relative speed within the portfolio (a set cover of near-best configs). size 0: every candidate, in order."""
    count = len(data.candidates)
    if size == 0 or size >= count:
        return np.arange(count)
    rows = data.rows_of(shape_indices)
    relative = relative_speed(data.latency_ms[rows], data.group[rows]).reshape(len(shape_indices), count)
    chosen: list[int] = []
    covered = np.zeros(len(shape_indices))
    for _ in range(size):
        gain = np.maximum(relative, covered[:, None]).mean(axis=0)
        gain[chosen] = -np.inf
        best = int(np.argmax(gain))
        chosen.append(best)
        covered = np.maximum(covered, relative[:, best])
    return np.sort(np.array(chosen))


def restrict(scores: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """(shapes, candidates) scores with -inf outside the allowed candidate indices."""
    restricted = np.full_like(scores, -np.inf)
    restricted[..., allowed] = scores[..., allowed]
    return restricted


class ConfigRanker:
    """Scores (shape, config) rows, higher meaning faster; within a shape, the argmax is the predicted best config.
    With a profile (`settings.profile_factors`), `score` takes `matrix(features, candidates)`: the rows' features
    with their candidates' profile columns after them."""

    profile_: ConfigProfile | None = None  # set by `fit`; None: the features alone

    def __init__(self, settings: RankerSettings = RankerSettings()) -> None:
        self.settings = settings

    def targets(self, data: TrainingData, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The regression target and sample weights of `rows` under the objective."""
        latency = data.latency_ms[rows]
        if self.settings.objective == "throughput":
            tflops = np.where(np.isfinite(latency), data.flops[rows] / (latency * 1e-3) / 1e12, 0.0)
            target, weight = np.log1p(tflops), np.ones(len(rows))
        else:
            target = relative_speed(latency, data.group[rows])
            weight = target ** 2
        weight = np.where(data.spread[rows] <= self.settings.max_training_spread, weight, 0.0)
        return target, weight

    def training_rows(self, data: TrainingData, rows: np.ndarray, member: int = 0) -> tuple[np.ndarray, np.ndarray,
                                                                                             np.ndarray]:
        """The rows member `member`'s fit uses after the seeded subsampling of slow rows (seed random_state + member),
        with their targets and weights (the kept slow rows' weights divided by the keeping probability)."""
        target, weight = self.targets(data, rows)
        settings = self.settings
        slow = relative_speed(data.latency_ms[rows], data.group[rows]) < settings.subsample_below
        draw = np.random.default_rng(settings.random_state + member).random(len(rows))
        kept = ~slow | (draw < settings.subsample_keep)
        weight = np.where(slow, weight / settings.subsample_keep, weight)
        return rows[kept], target[kept], weight[kept]

    def fit(self, data: TrainingData, rows: np.ndarray | None = None) -> ConfigRanker:
        """Fit `settings.models` members on `rows` (every row by default), each on its own seeded subsample; with an
        alignment split, a member is a `SplitModel` of one regressor per group, each fitted on its group's rows."""
        rows = np.arange(len(data.latency_ms)) if rows is None else rows
        split = self.settings.alignment_split
        every_group = None if split == "none" else row_groups(split, data.features)  # column views: no copy
        self.profile_ = self._profile(data, rows)
        self.models_ = []
        for member in range(self.settings.models):
            kept, target, weight = self.training_rows(data, rows, member)
            if split == "none":
                self.models_.append(self._regressor(member).fit(self.data_matrix(data, kept), target,
                                                                sample_weight=weight))
                continue
            groups = every_group[kept]
            regressors = []
            for index, names in enumerate(check_split(split)):
                chosen = groups == index
                if not chosen.any():
                    raise ValueError(f"alignment_split {split!r}: the training rows have no shape of the group "
                                     f"{'/'.join(names)}; fit with alignment_split='none' or add such shapes")
                regressors.append(self._regressor(member).fit(self.data_matrix(data, kept[chosen]), target[chosen],
                                                              sample_weight=weight[chosen]))
            self.models_.append(SplitModel(split, regressors))
        return self

    def _profile(self, data: TrainingData, rows: np.ndarray) -> ConfigProfile | None:
        """The config profile of the shapes `rows` cover (None without `profile_factors`); every candidate of a
        covered shape counts, so that the profile is a property of the training shapes, not of a row sample."""
        if self.settings.profile_factors == 0:
            return None
        shapes = np.unique(data.group[rows])
        every = data.rows_of(shapes)
        speed = relative_speed(data.latency_ms[every], data.group[every]).reshape(len(shapes), -1)
        return ConfigProfile.fit(speed, min(self.settings.profile_factors, *speed.shape))

    def matrix(self, features: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """What the models read of rows with these features and candidate indices: the features, then the profile's
        columns when the ranker has one."""
        return features if self.profile_ is None else self.profile_.append(features, candidates)

    def data_matrix(self, data: TrainingData, rows: np.ndarray) -> np.ndarray:
        """`matrix` of the given rows of a TrainingData."""
        return self.matrix(data.features[rows], data.candidate_of(rows))

    def _regressor(self, member: int) -> HistGradientBoostingRegressor:
        settings = self.settings
        return HistGradientBoostingRegressor(
            max_iter=settings.max_iter, learning_rate=settings.learning_rate, max_leaf_nodes=settings.max_leaf_nodes,
            max_depth=settings.max_depth, min_samples_leaf=settings.min_samples_leaf,
            l2_regularization=settings.l2_regularization, early_stopping=False,
            random_state=settings.random_state + member)

    def score(self, matrix: np.ndarray, members: int | None = None) -> np.ndarray:
        """The mean of the first `members` models' predictions (all by default) of `matrix(features, candidates)`."""
        self._check_width(matrix)
        models = self.models_[:members]
        return np.mean([model.predict(matrix) for model in models], axis=0)

    def _check_width(self, matrix: np.ndarray) -> None:
        width = int(self.models_[0].n_features_in_)
        if matrix.shape[-1] != width:
            raise ValueError(f"the ranker reads {width} columns per row, got {matrix.shape[-1]}; with a config "
                             "profile, pass `ranker.matrix(features, candidates)`")

    def staged_scores(self, matrix: np.ndarray) -> list[np.ndarray]:
        """Scores after each boosting iteration, averaged over the models (to choose the iteration count on
        validation shapes)."""
        self._check_width(matrix)
        return [np.mean(stage, axis=0) for stage in zip(*(model.staged_predict(matrix) for model in self.models_))]


# Hyperparameters tuned on the inner splits, per objective: tree size, then the iteration count by staged predictions,
# then the portfolio size (0: every candidate).
# One tree size: 63 leaves at 300 trees, the old grid's largest point, was chosen in every fold; 127 leaves scored
# higher at every count from 500 trees, and 255 no higher (HISTORY.md).
TUNING_GRID = {"max_leaf_nodes": (127,)}
ITERATION_CHOICES = (100, 200, 300, 500, 700, 1000)
PORTFOLIO_CHOICES = (10, 20, 40, 0)
INNER_SPLITS = 4  # a seeded partition of the training shapes into validation quarters: settings win on their mean


def inner_partition(train_shapes: np.ndarray, seed: int, splits: int = INNER_SPLITS) -> list[tuple[np.ndarray,
                                                                                                  np.ndarray]]:
    """(inner train, inner validation) position arrays into `train_shapes`: a seeded permutation cut into `splits`
    validation parts, so every training shape is validated exactly once (by a model that never saw it)."""
    order = np.random.default_rng(seed).permutation(len(train_shapes))
    parts = [np.sort(part) for part in np.array_split(order, splits)]
    return [(np.sort(np.concatenate(parts[:index] + parts[index + 1:])), part) for index, part in enumerate(parts)]


def select_ranker(data: TrainingData, train_shapes: np.ndarray, objective: str, seed: int = 0,
                  grid: dict[str, Sequence[Any]] = TUNING_GRID, iterations: Sequence[int] = ITERATION_CHOICES,
                  portfolio_sizes: Sequence[int] = PORTFOLIO_CHOICES) -> tuple[RankerSettings, dict[str, Any]]:
    """Settings chosen on the INNER_SPLITS parts of `inner_partition(train_shapes)`: per part, each grid point is
    fitted (one model) once on the other parts with max(iterations) and scored at every iteration count and portfolio
    size (the portfolio chosen on the fitted shapes) by the mean efficiency of its picks on the part; the settings with
    the best mean over the parts win, with FINAL_MODELS models for the final fit. Returns the settings and what was
    tried, with "out_of_fold_scores": the winner's scores of every training shape (rows in `train_shapes` order) by the
    part's model that never saw it.
    Nothing outside `train_shapes` is read."""
    efficiencies: dict[tuple[tuple[Any, ...], int, int], list[float]] = {}
    out_of_fold: dict[tuple[tuple[Any, ...], int], np.ndarray] = {}
    for inner_train, inner_validation in inner_partition(train_shapes, seed):
        fit_rows = data.rows_of(train_shapes[inner_train])
        validation_shapes = train_shapes[inner_validation]
        validation_rows = data.rows_of(validation_shapes)
        latency = data.latency_ms[validation_rows].reshape(len(validation_shapes), -1)
        portfolios = {size: portfolio(data, train_shapes[inner_train], size) for size in portfolio_sizes}
        for values in itertools.product(*grid.values()):
            settings = replace(RankerSettings(objective=objective, max_iter=max(iterations)), **dict(zip(grid, values)))
            ranker = ConfigRanker(settings).fit(data, fit_rows)
            for count, scores in enumerate(ranker.staged_scores(ranker.data_matrix(data, validation_rows)), start=1):
                if count not in iterations:
                    continue
                scores = scores.reshape(latency.shape)
                out_of_fold.setdefault((values, count), np.zeros((len(train_shapes), latency.shape[1])))[
                    inner_validation] = scores
                for size, allowed in portfolios.items():
                    picks = restrict(scores, allowed)
                    efficiencies.setdefault((values, count, size), []).append(
                        float(shape_efficiency(picks, latency).mean()))
    tried = [{**dict(zip(grid, values)), "max_iter": count, "portfolio_size": size,
              "inner_mean_efficiency": float(np.mean(split_means)), "inner_split_efficiencies": split_means}
             for (values, count, size), split_means in efficiencies.items()]
    best = max(range(len(tried)), key=lambda index: tried[index]["inner_mean_efficiency"])  # ties: the first tried
    (values, count, size) = list(efficiencies)[best]
    chosen = replace(RankerSettings(objective=objective, max_iter=count, portfolio_size=size, models=FINAL_MODELS),
                     **dict(zip(grid, values)))
    return chosen, {"inner_splits": INNER_SPLITS, "tried": tried, "out_of_fold_scores": out_of_fold[(values, count)]}
