"""LFBO pattern search (Helion 1.0's `LFBOPatternSearch`): pattern-search copies whose many random multi-parameter
moves are ranked by a random-forest classifier of "good" configs, so only the most promising tenth is measured."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
from sklearn.ensemble import RandomForestClassifier

from tunebench.search.base import Config, Key, Search, Strategy, StrategySettings, is_block_size, sample_new
from tunebench.space import Space


@dataclass(frozen=True)
class LFBOPatternSearchSettings(StrategySettings):
    """Defaults for `LFBOPatternSearch`, from Helion's helion/autotuner/surrogate_pattern_search.py
    (`LFBOPatternSearch.__init__`, `_fit_surrogate`) and its `full` effort profile (`PATTERN_SEARCH_DEFAULTS`).

    initial_population, copies, max_generations: as PatternSearch (Helion: 100, 5, 20).
    min_improvement: a generation improves a copy if its best selected config is faster by this fraction
        (Helion's `min_improvement_delta`: 0.001).
    patience: generations without improvement a copy may spend before it stops (Helion: 1, and like Helion the
        count is not reset by a later improvement); 0 stops a copy after its first unimproved generation.
    num_neighbors: random multi-parameter moves drawn per copy per generation (Helion: 300).
    block_radius, warps_radius: how far a block size or `num_warps` may move, in log2 / index steps (Helion's
        `radius`: 2). other_radius: how far any other parameter may move (Helion's `pattern_neighbors`: 1).
    max_changes: most parameters one move changes: one block size, num_warps and up to two others, as Helion's
        `_generate_neighbors`.
    include_neighbours: also rank every single-parameter neighbour (not in Helion; keeps every one-step move
        in reach of the ranking).
    frac_selected: fraction of a copy's candidates measured, at least one (Helion: 0.10; its docstring says 0.15).
    quantile: configs at or below this quantile of the finite latencies are labelled good (Helion: 0.1).
    similarity_penalty: weight of the mean leaf-similarity to already-picked candidates (Helion: 1.0).
    n_trees: trees in the forest (Helion: `n_estimators=100`, `criterion="log_loss"`; we fit with n_jobs=1 and
        a seed from the strategy's rng where Helion uses n_jobs=-1 and random_state=42: on a 16-core GPU host more
        jobs made LFBO's fits 1.4x slower, results/lfbo_fit_jobs/gpu_host_16cores.md).
    """

    initial_population: int = 100
    copies: int = 5
    max_generations: int = 20
    min_improvement: float = 0.001
    patience: int = 1
    num_neighbors: int = 300
    block_radius: int = 2
    warps_radius: int = 2
    other_radius: int = 1
    max_changes: int = 4
    include_neighbours: bool = True
    frac_selected: float = 0.10
    quantile: float = 0.1
    similarity_penalty: float = 1.0
    n_trees: int = 100


@dataclass
class SearchCopy:
    """One copy's walk: where it stands, the configs it moved through, and how much patience it has left."""

    current: Config
    patience_left: int
    path: list[Config] = field(default_factory=list)
    stopped: bool = False


def training_set(
    space: Space, observed: Mapping[Key, float], quantile: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, good/bad labels and sample weights, one row per measured config at its best timing.

    Good (1): objective at or below the `quantile` of the finite objectives; failures (inf) are bad (0), so the
    forest learns to avoid them. Weights follow Helion: a good config weighs in proportion to how far it beats the
    threshold (normalized to mean 1), a bad one weighs 1.
    """
    keys = list(observed)
    objectives = np.array([observed[key] for key in keys], dtype=float)
    features = space.encode([space.config(key) for key in keys])
    finite = np.isfinite(objectives)
    if not finite.any():
        return features, np.zeros(len(keys), dtype=int), np.ones(len(keys))
    threshold = np.quantile(objectives[finite], quantile)
    good = objectives <= threshold
    margin = np.where(good, np.maximum(threshold - np.where(finite, objectives, threshold), 1e-5), 0.0)
    weights = np.where(good, margin / margin[good].mean(), 1.0)
    return features, good.astype(int), weights


def forest_scores(forest: RandomForestClassifier, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(good) and the leaf each tree puts each row in: `forest.predict_proba(features)[:, 1]` and
    `forest.apply(features)`, equal to the last bit, in one pass over the trees without joblib's per-tree overhead.

    Like `forest.predict_proba` with n_jobs=1, the trees' probabilities are summed in tree order and divided by
    their number, so the sum's rounding is the same; a test holds the two equal.
    """
    rows = np.ascontiguousarray(features, dtype=np.float32)
    trees = forest.estimators_
    probability = np.zeros((len(rows), forest.n_classes_))
    leaves = np.empty((len(rows), len(trees)), dtype=np.intp)
    for index, tree in enumerate(trees):
        probability += tree.predict_proba(rows, check_input=False)
        leaves[:, index] = tree.tree_.apply(rows)
    probability /= len(trees)
    return probability[:, 1], leaves


def diverse_pick(probability: np.ndarray, leaves: np.ndarray, count: int, penalty: float) -> list[int]:
    """Indices of `count` rows picked greedily: each the highest P(good) minus `penalty` times its mean
    leaf-similarity (the share of trees that put both in one leaf) to the rows picked before it."""
    similarity_sum = np.zeros(len(probability))
    available = np.ones(len(probability), dtype=bool)
    chosen: list[int] = []
    for _ in range(count):
        score = probability - penalty * similarity_sum / max(len(chosen), 1)
        index = int(np.argmax(np.where(available, score, -np.inf)))
        chosen.append(index)
        available[index] = False
        similarity_sum += (leaves == leaves[index]).mean(axis=1)
    return chosen


class LFBOPatternSearch(Strategy):
    """Pattern search pruned by a likelihood-free BO classifier (Song et al. 2022, "A General Recipe for
    Likelihood-free Bayesian Optimization"), following Helion's `LFBOPatternSearch` with its reported defects fixed:

    - only evaluated configs enter the visited set, so a candidate not selected can be proposed again;
    - the 10 % quota is at least one config, so rounding never ends a copy;
    - a copy moves only to a measured config that improves on its current point, never to a worse one;
    - labels use each config's best timing (`Strategy.observed`), not its first.

    Judgment calls: candidates come from `Space.perturb` with a per-parameter radius (block sizes and num_warps
    2, others 1) and `max_changes` parameters at most, rather than Helion's fixed "one block size + num_warps +
    up to two others" recipe; copies pick in order and a later copy never picks a config an earlier copy picked
    in the same generation; the forest is refitted once per generation on everything measured so far.
    """

    Settings = LFBOPatternSearchSettings

    def __init__(self, space: Space, seed: int = 0, settings: LFBOPatternSearchSettings | None = None) -> None:
        super().__init__(space, seed, settings)
        self.visited: set[Key] = set()
        self.copies: list[SearchCopy] = []
        self.radius = {name: self._radius(name) for name in space.names}

    def search(self) -> Search:
        settings = self.settings
        population = sample_new(self.space, self.rng, settings.initial_population)
        self.visited.update(self.space.key(config) for config in population)
        yield population
        ranked = sorted(population, key=self._objective)
        starts = [config for config in ranked[: settings.copies] if math.isfinite(self._objective(config))]
        self.copies = [SearchCopy(current=start, patience_left=settings.patience, path=[start]) for start in starts]
        for _ in range(settings.max_generations):
            if all(copy.stopped for copy in self.copies):
                return  # before fitting a forest that no copy would use
            forest = self.fit()
            picks: list[tuple[SearchCopy, list[Config]]] = []
            picked: set[Key] = set()
            for copy in self.copies:
                if copy.stopped:
                    continue
                candidates = [c for c in self.candidates(copy.current) if self.space.key(c) not in picked]
                if not candidates:
                    copy.stopped = True
                    continue
                chosen = self.select(forest, candidates, max(1, int(len(candidates) * settings.frac_selected)))
                picked.update(self.space.key(config) for config in chosen)
                picks.append((copy, chosen))
            if not picks:
                return
            self.visited.update(picked)
            yield [config for _, chosen in picks for config in chosen]
            for copy, chosen in picks:
                self._advance(copy, min(chosen, key=self._objective))

    def candidates(self, config: Config) -> list[Config]:
        """Unvisited configs around `config`: its single-parameter neighbours and `num_neighbors` random moves."""
        settings = self.settings
        found: dict[Key, None] = {}
        if settings.include_neighbours:
            found.update((self.space.key(move), None) for move in self.space.neighbours(config))
        found.update((key, None) for key in self.space.perturbed_keys(
            config, self.rng, settings.num_neighbors, self.radius, max_changes=settings.max_changes))
        found.pop(self.space.key(config), None)
        return [self.space.config(key) for key in found if key not in self.visited]

    def training_set(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Features, labels and weights of every config measured so far, each at its best timing."""
        return training_set(self.space, self.observed, self.settings.quantile)

    def fit(self) -> RandomForestClassifier | None:
        """The classifier of good configs trained on every measurement so far; None while one class is missing."""
        features, labels, weights = self.training_set()
        if labels.min() == labels.max():
            return None
        forest = RandomForestClassifier(
            n_estimators=self.settings.n_trees,
            criterion="log_loss",
            random_state=int(self.rng.integers(2**31)),
            n_jobs=1,
        )
        return forest.fit(features, labels, sample_weight=weights)

    def select(self, forest: RandomForestClassifier | None, candidates: list[Config], count: int) -> list[Config]:
        """Greedy diverse pick (`diverse_pick`) by the forest's P(good); at random while there is no forest."""
        count = min(count, len(candidates))
        if forest is None:
            return [candidates[int(i)] for i in self.rng.permutation(len(candidates))[:count]]
        probability, leaves = forest_scores(forest, self.space.encode(candidates))
        chosen = diverse_pick(probability, leaves, count, self.settings.similarity_penalty)
        return [candidates[index] for index in chosen]

    def _advance(self, copy: SearchCopy, best: Config) -> None:
        if self._objective(best) < self._objective(copy.current) * (1.0 - self.settings.min_improvement):
            copy.current = best
            copy.path.append(best)
        elif copy.patience_left > 0:
            copy.patience_left -= 1
        else:
            copy.stopped = True

    def _objective(self, config: Config) -> float:
        return self.observed.get(self.space.key(config), math.inf)

    def _radius(self, name: str) -> int:
        if is_block_size(name):
            return self.settings.block_radius
        if name == "num_warps":
            return self.settings.warps_radius
        return self.settings.other_radius
