"""The pipeline-selection autotuner: per batch-size bucket, coordinate descent over an MLP's projections, each step a
search over pipeline x matmul tile x SM share with any registered strategy against an Evaluator.

Objective. A bucket's MLP step is modelled as the sum over its projections of each projection's measured step, the
family's call (family.py): "decode the next weight on `decode_sm_percent` of the SMs while the current matmul runs"
(overlapped), or "decode this weight, then multiply" (serial). The competition between the decoder's share and the
matmul is inside that measurement, charged to the projection whose config sets both.

Coupling. In a real chain (gate, up, down, then the next layer's gate) the decode that overlaps projection p's matmul
is the NEXT projection's weight, in the form that projection's pipeline reads (BF16, exponent bytes, 4-bit codes, or
nothing) at its share; so p's true step depends on its successor's choice. The recorded data cannot show this: a row
decodes a stand-in of p's own weight with p's own decoder and share (schedule.PrefetchedProjection). Under the
recorded objective each projection's step is a function of its own config alone, the sum is separable and the
projections are independent: holding the others fixed changes nothing, and coordinate descent with an exact step (a
search that finds each optimum) converges in its first round; the second finds nothing to improve and stops. With a
budgeted search each round re-runs every step with a fresh seed and keeps a config only if it is faster, so rounds
go on while the searches still find gains. Where every projection of a bucket gets one pipeline and share, the model
matches the chain up to decoding a different weight of the same size (the three Llama-3.1-8B weights have the same
number of elements); with mixed pipelines it pairs each decode with the wrong matmul. Only a measurement of the chain
can check that (`chain.GatedMlpChain`, timed whole by benchmarks/compressed_mlp_chain.py), so this module assumes no
coupling the recording does not hold. A serial step has none: it decodes its own weight, as in the chain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

from tunebench.kernels.compressed_matmul.family import NAME
from tunebench.kernels.compressed_matmul.mlp import Mlp, Projection
from tunebench.kernels.compressed_matmul.pipelines import PIPELINES
from tunebench.measure.dataset import Dataset
from tunebench.measure.replay import ReplayEvaluator
from tunebench.measure.result import Evaluator, Result
from tunebench.search import PRESETS, strategy_class
from tunebench.search.stratified import Stratified, StratifiedSettings
from tunebench.space import Space
from tunebench.study import Budget, run_search


@dataclass(frozen=True)
class AutotuneSettings:
    """Defaults of the autotuner (our choices; replayed at 30 seeds on the H100 and H200 sweeps,
    `results/pipeline_selection/cost_h100_thirty_seeds.md` and `cost_h200_thirty_seeds.md`: every pick at the
    recorded best at 60 of 60 seeds; at 10, `cost_h100_ten_seeds.md` and `cost_h200_ten_seeds.md`: 20 of 20, against
    15 for pattern search at 128 a pipeline without race or transfer, with 0.31x its evaluations; 18 of 20 without
    `neighbours`, at 1.05x the evaluations).

    strategy, strategy_settings: the registered strategy run on each pipeline's part of a projection's space, and
        (name, value) overrides of its own defaults. LFBO at Helion's quick effort.
    evaluations_per_pipeline: the budget of unique evaluations of each such run.
    seed: round r (from 0) seeds every search with seed + r, so a later round is a fresh search, not a repeat.
    threshold: rounds stop once a full round makes the bucket's MLP step faster by at most this fraction (0.1 %:
        pattern search's own min_improvement).
    max_rounds: rounds at most per bucket.
    probe, leaders: a race among the pipelines (`StratifiedSettings`): with leaders > 0, each pipeline's run stops
        once it has measured `probe` configs, and only the `leaders` fastest pipelines so far go on (0: none). One
        goes on: with the `neighbours`, one leader put every pick at the recorded best at 30 of 30 seeds on both
        sweeps, as two did, at 0.75x (H100) and 0.80x (H200) their evaluations
        (`results/pipeline_selection/cost_h100_thirty_seeds.md` and `cost_h200_thirty_seeds.md`). Two went on
        before as a margin against a miss seen without the neighbours: at seed 2 the probe put decode_exponents
        ahead at the H200's batch 64, where direct_palette holds the best, and the step ended 4.5 % off it.
    transfer: each pipeline's run first measures the configs the autotuner holds as that pipeline's best at the other
        projections and batch sizes tuned so far (same batch first, then the nearest), and starts from them.
    neighbours: with transfer, the run also measures, right after the other projections' picks at the same batch,
        each one's single-parameter neighbours in its pipeline: the best at one shape is often one move from the
        best at a sibling shape, and a seed that is not fast itself never becomes a search's start. Without transfer
        it does nothing.
    """

    strategy: str = "lfbo_quick"
    strategy_settings: tuple[tuple[str, Any], ...] = ()
    evaluations_per_pipeline: int = 128
    seed: int = 0
    threshold: float = 0.001
    max_rounds: int = 4
    probe: int = 30
    leaders: int = 1
    transfer: bool = True
    neighbours: bool = True

    def __post_init__(self) -> None:
        if self.strategy not in PRESETS:
            strategy_class(self.strategy)
        if self.evaluations_per_pipeline < 1 or self.max_rounds < 1:
            raise ValueError(f"evaluations_per_pipeline ({self.evaluations_per_pipeline}) and max_rounds "
                             f"({self.max_rounds}) must be >= 1")
        if not 0 <= self.threshold < 1:
            raise ValueError(f"threshold must be a fraction in [0, 1), got {self.threshold!r}")
        if self.leaders < 0 or (self.leaders and self.probe < 1):
            raise ValueError(f"leaders={self.leaders!r}, probe={self.probe!r}; allowed: leaders 0 (no race), or "
                             "leaders >= 1 with probe >= 1")


class StepEvaluator(Evaluator, Protocol):
    """An Evaluator of one projection's step at one batch size, over the family's configs it can measure."""

    space: Space


StepEvaluators = Callable[[Projection, int], StepEvaluator]  # (projection, batch) -> its step's evaluator


class ReplayStepEvaluators:
    """Step evaluators answered from a recorded compressed_matmul dataset: one ReplayEvaluator per shape, shared by
    every step on it (gate and up share theirs), so a config is charged its compile time once, as live."""

    def __init__(self, dataset: Dataset, *, mode: str = "deterministic", seed: int = 0) -> None:
        if dataset.kernel != NAME:
            raise ValueError(f"the autotuner replays a {NAME} dataset, not {dataset.kernel!r}")
        self.dataset, self.mode, self.seed = dataset, mode, seed
        self._evaluators: dict[tuple[int, int, int], ReplayEvaluator] = {}

    def __call__(self, projection: Projection, batch: int) -> ReplayEvaluator:
        shape = projection.shape(batch)
        if shape not in self._evaluators:
            self._evaluators[shape] = ReplayEvaluator(self.dataset, shape, mode=self.mode, seed=self.seed)
        return self._evaluators[shape]


@dataclass(frozen=True)
class Choice:
    """A config of the compressed_matmul family (pipeline, matmul tile, decoder share and schedule) and its step
    latency."""

    config: Mapping[str, Any]
    latency_ms: float

    @property
    def pipeline(self) -> str:
        return self.config["pipeline"]


@dataclass(frozen=True)
class ProjectionChoice:
    """One projection at one bucket: the chosen config, and the best found of each pipeline (None: none ran ok; under
    a race, a pipeline that did not go on holds the best of its probe). The choice is the fastest of them, so it is
    never slower than a fixed pipeline searched the same way."""

    choice: Choice
    fixed: Mapping[str, Choice | None]


@dataclass(frozen=True)
class BucketTuning:
    """The selection for one batch size: a choice per projection (in the MLP's order) and the MLP step after each
    round; `converged` is False where max_rounds ran out before a round gained at most the threshold."""

    batch: int
    projections: Mapping[str, ProjectionChoice]
    round_totals_ms: tuple[float, ...]
    converged: bool

    @property
    def step_ms(self) -> float:
        """The modelled MLP step: the sum of the chosen configs' step latencies."""
        return self.round_totals_ms[-1]


@dataclass(frozen=True)
class MlpTuning:
    """An MLP's selection over its batch-size buckets, and what finding it cost (on the evaluators' clocks)."""

    mlp: Mlp
    buckets: tuple[BucketTuning, ...]
    evaluations: int
    search_s: float


class _Recorder:
    """An Evaluator that passes batches on, counting them and keeping each pipeline's fastest ok result."""

    def __init__(self, evaluator: StepEvaluator) -> None:
        self.evaluator = evaluator
        self.evaluations = 0
        self.best: dict[str, Result] = {}

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Result]:
        results = self.evaluator.evaluate(configs)
        self.evaluations += len(results)
        for result in results:
            best = self.best.get(result.config["pipeline"])
            if result.ok and (best is None or result.objective < best.objective):
                self.best[result.config["pipeline"]] = result
        return results

    @property
    def elapsed_s(self) -> float:
        return self.evaluator.elapsed_s

    def charge(self, seconds: float) -> None:
        self.evaluator.charge(seconds)


class CoordinateDescent:
    """Tunes an MLP bucket by bucket: rounds over the projections in order, each step searching one projection's
    space pipeline by pipeline while the others keep their choices, until a round gains at most the threshold."""

    def __init__(self, mlp: Mlp, evaluators: StepEvaluators, settings: AutotuneSettings = AutotuneSettings()) -> None:
        self.mlp, self.evaluators, self.settings = mlp, evaluators, settings
        self.evaluations = 0
        self.search_s = 0.0
        self.held: dict[tuple[str, int], ProjectionChoice] = {}  # (projection, batch): what the tuning holds so far

    def run(self, batches: Sequence[int]) -> MlpTuning:
        """The selection for every batch-size bucket, in increasing batch order."""
        if not batches:
            raise ValueError("no batch-size buckets to tune")
        bad = [batch for batch in batches if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1]
        if bad:
            raise ValueError(f"batch-size buckets must be integers >= 1, got {bad}")
        buckets = tuple(self.tune_bucket(batch) for batch in sorted(set(batches)))
        return MlpTuning(self.mlp, buckets, self.evaluations, self.search_s)

    def tune_bucket(self, batch: int) -> BucketTuning:
        """Coordinate descent at one batch size (see the module docstring for why the projections are independent
        under the recorded objective)."""
        chosen: dict[str, ProjectionChoice] = {}
        totals: list[float] = []
        for round_index in range(self.settings.max_rounds):
            for projection in self.mlp.projections:
                found = self.search_projection(projection, batch, self.settings.seed + round_index)
                chosen[projection.name] = _better(chosen.get(projection.name), found)
                self.held[projection.name, batch] = chosen[projection.name]
            totals.append(sum(choice.choice.latency_ms for choice in chosen.values()))
            if len(totals) > 1 and totals[-2] - totals[-1] <= self.settings.threshold * totals[-2]:
                return BucketTuning(batch, chosen, tuple(totals), converged=True)
        return BucketTuning(batch, chosen, tuple(totals), converged=False)

    def search_projection(self, projection: Projection, batch: int, seed: int) -> ProjectionChoice:
        """One `Stratified` run: the strategy on each pipeline's part of the projection's space in turn, each with
        its own budget (the pins of the space make most single-parameter moves across pipelines invalid, so one run
        over the whole space would change pipeline only through its random population; and the file needs each fixed
        pipeline's best)."""
        recorder = _Recorder(self.evaluators(projection, batch))
        started_s = recorder.elapsed_s
        per_pipeline = self.settings.evaluations_per_pipeline
        strategy = Stratified(recorder.evaluator.space, seed, StratifiedSettings(
            "pipeline", self.settings.strategy, self.settings.strategy_settings, per_pipeline,
            probe=self.settings.probe, leaders=self.settings.leaders),
            seeds=self.transferred(projection, batch, recorder.evaluator.space) if self.settings.transfer else ())
        run_search(strategy, recorder, Budget(evaluations=len(strategy.strata) * per_pipeline))
        self.evaluations += recorder.evaluations
        self.search_s += recorder.elapsed_s - started_s
        selection = _selection({pipeline: _choice(recorder.best.get(pipeline)) for pipeline in PIPELINES})
        if selection is None:
            raise ValueError(f"no config of any pipeline ran ok for projection {projection.name!r} "
                             f"{projection.shape(batch)} at batch {batch}")
        return selection

    def transferred(self, projection: Projection, batch: int, space: Space) -> list[dict[str, Any]]:
        """Every pipeline's best config held for the other (projection, batch) pairs tuned so far: those at this batch
        first, then (with `neighbours`) their single-parameter neighbours in `space` that keep the pipeline, then the
        others by distance in batch size; the projection's own at this batch is kept by `_better` anyway."""
        others = sorted((key for key in self.held if key != (projection.name, batch)),
                        key=lambda key: (abs(key[1] - batch), key[1]))
        picks = [[dict(choice.config) for choice in self.held[key].fixed.values() if choice is not None]
                 for key in others]
        same_batch = [config for key, configs in zip(others, picks) if key[1] == batch for config in configs]
        around = [neighbour for config in same_batch for neighbour in space.neighbours(config)
                  if neighbour["pipeline"] == config["pipeline"]] if self.settings.neighbours else []
        return [*same_batch, *around, *(config for key, configs in zip(others, picks) if key[1] != batch
                                        for config in configs)]


def _choice(result: Result | None) -> Choice | None:
    return None if result is None else Choice(dict(result.config), float(result.latency_ms))


def _selection(fixed: Mapping[str, Choice | None]) -> ProjectionChoice | None:
    """The fastest of the pipelines' bests (the first in PIPELINES order on a tie); None if none ran ok."""
    ran = [choice for choice in fixed.values() if choice is not None]
    return ProjectionChoice(min(ran, key=lambda choice: choice.latency_ms), dict(fixed)) if ran else None


def _better(incumbent: ProjectionChoice | None, found: ProjectionChoice) -> ProjectionChoice:
    """Each pipeline's faster best of the incumbent and a new search, and the fastest of those."""
    if incumbent is None:
        return found
    fixed = {}
    for pipeline in PIPELINES:
        old, new = incumbent.fixed[pipeline], found.fixed[pipeline]
        fixed[pipeline] = new if old is None or (new is not None and new.latency_ms < old.latency_ms) else old
    return _selection(fixed)


def autotune(mlp: Mlp, batches: Sequence[int], evaluators: StepEvaluators,
             settings: AutotuneSettings = AutotuneSettings()) -> MlpTuning:
    """Coordinate descent over `mlp`'s projections at every batch-size bucket in `batches`."""
    return CoordinateDescent(mlp, evaluators, settings).run(batches)
