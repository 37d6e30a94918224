"""Optuna's samplers (TPE, GP, CMA-ES, QMC, random) as strategies, driven through Optuna's ask/tell API.
The objective told to Optuna is log(latency); constraint violations and failures are told as penalties."""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass
from typing import Any, Iterator

from tunebench.search.base import Config, Key, Search, Strategy, StrategySettings, sample_new
from tunebench.space import Choice, Flag, IntRange, Ordinal, Parameter, PowerOfTwo, Space

# Optuna imports tqdm.auto, which in a notebook kernel without ipywidgets warns that it falls back to text bars; no
# strategy draws progress bars, so the warning would only clutter the report of every notebook that imports one.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="IProgress not found")
    import optuna
    from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
    from optuna.trial import Trial, TrialState


@dataclass(frozen=True)
class OptunaSettings(StrategySettings):
    """Settings shared by the Optuna strategies (our choices; Helion has no Optuna strategies).

    batch_size: trials asked per batch; 1 because these samplers are sequential (a batch of n asks n trials
        before telling any, which TPE covers with its constant liar and the others ignore).
    penalty_factor: a failed measurement or a constraint violation is told as log(penalty_factor x the worst
        finite latency measured so far), i.e. worse than anything that ran. Until a first latency is known the
        value has no scale, so such trials are held and told as soon as one is.
    max_suggestions: invalid suggestions tolerated per config slot; after this many, one random unmeasured
        valid config is enqueued instead (a repeated suggestion is substituted at once, see `OptunaSearch`).
    """

    batch_size: int = 1
    penalty_factor: float = 10.0
    max_suggestions: int = 20


def distribution(parameter: Parameter) -> BaseDistribution:
    """How a parameter is shown to Optuna.

    Samplers that model distance (TPE's Parzen estimators, GP kernels, CMA-ES) need ordered parameters encoded
    so that neighbours are close: a power of two as its exponent, an ordinal as its index, an integer range as
    itself. Genuinely unordered choices and flags are categorical, so no false order is implied.
    """
    if isinstance(parameter, PowerOfTwo):
        return IntDistribution(parameter.values[0].bit_length() - 1, parameter.values[-1].bit_length() - 1)
    if isinstance(parameter, IntRange):
        return IntDistribution(parameter.values[0], parameter.values[-1])
    if isinstance(parameter, Ordinal):
        return IntDistribution(0, len(parameter.values) - 1)
    if isinstance(parameter, (Choice, Flag)):
        return CategoricalDistribution(parameter.values)
    raise TypeError(f"no Optuna encoding for parameter {parameter.name!r} of type {type(parameter).__name__}")


def decode(space: Space, params: dict[str, Any]) -> Config:
    """The config named by an Optuna trial's parameters."""
    config = {}
    for parameter in space.parameters:
        value = params[parameter.name]
        if isinstance(parameter, PowerOfTwo):
            value = 1 << value
        elif isinstance(parameter, Ordinal):
            value = parameter.values[value]
        config[parameter.name] = value
    return config


def encode(space: Space, config: Config) -> dict[str, Any]:
    """The Optuna parameters of a config (inverse of `decode`)."""
    params = {}
    for parameter in space.parameters:
        value = config[parameter.name]
        if isinstance(parameter, PowerOfTwo):
            value = value.bit_length() - 1
        elif isinstance(parameter, Ordinal):
            value = list(parameter.values).index(value)
        params[parameter.name] = value
    return params


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence Optuna's info logs and warnings (e.g. independent-sampling notices) for one block only."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        optuna.logging.set_verbosity(verbosity)


class OptunaSearch(Strategy):
    """An Optuna sampler behind ask/tell. Subclasses say which sampler, seeded from the strategy's rng.

    Suggestions that violate a constraint are told to Optuna as a penalty and are never asked for, so they cost
    no evaluation (`invalid_suggestions` counts them). Failed measurements are told the penalty, never dropped.
    A suggestion already measured (or already in the batch) is told as failed, since a duplicate point carries no
    news and inflates the model (GP fits grew slow and kept re-suggesting their incumbent), and is replaced by a
    random unmeasured single-parameter neighbour of it, else a random unmeasured config (`repeated_suggestions`).
    A replacement is enqueued in the study so the sampler learns what was measured (`substitutes` counts them).
    """

    Settings = OptunaSettings

    def __init__(self, space: Space, seed: int = 0, settings: OptunaSettings | None = None) -> None:
        super().__init__(space, seed, settings)
        self.invalid_suggestions = 0
        self.repeated_suggestions = 0
        self.substitutes = 0
        self._held: list[Trial] = []

    def make_sampler(self, seed: int) -> optuna.samplers.BaseSampler:
        raise NotImplementedError

    def search(self) -> Search:
        with quiet():
            study = optuna.create_study(direction="minimize", sampler=self.make_sampler(int(self.rng.integers(2**31))))
        distributions = {parameter.name: distribution(parameter) for parameter in self.space.parameters}
        asked: set[Key] = set()
        while True:
            batch: dict[Key, Trial] = {}
            with quiet():
                while len(batch) < self.settings.batch_size and (trial := self._suggest(study, distributions, asked)):
                    key = self.space.key(decode(self.space, trial.params))
                    batch[key] = trial
                    asked.add(key)
            if not batch:
                return
            yield [self.space.config(key) for key in batch]
            with quiet():
                for key, trial in batch.items():
                    self._tell(study, trial, self.observed[key])
                self._release_held(study)

    def _suggest(
        self, study: optuna.Study, distributions: dict[str, BaseDistribution], taken: set[Key]
    ) -> Trial | None:
        """The next trial whose config is valid and not in `taken`, or None once every valid config is taken.
        Invalid and repeated suggestions are told on the way."""
        for _ in range(self.settings.max_suggestions):
            trial = study.ask(distributions)
            config = decode(self.space, trial.params)
            if not self.space.is_valid(config):
                self.invalid_suggestions += 1
                self._tell(study, trial, math.inf)
            elif self.space.key(config) in taken:
                self.repeated_suggestions += 1
                study.tell(trial, state=TrialState.FAIL)
                return self._enqueue(study, distributions, self._substitute(config, taken))
            else:
                return trial
        return self._enqueue(study, distributions, sample_new(self.space, self.rng, 1, exclude=taken))

    def _substitute(self, config: Config, taken: set[Key]) -> list[Config]:
        """A random unmeasured single-parameter neighbour of `config`, else a random unmeasured config."""
        fresh = [move for move in self.space.neighbours(config) if self.space.key(move) not in taken]
        if fresh:
            return [fresh[int(self.rng.integers(len(fresh)))]]
        return sample_new(self.space, self.rng, 1, exclude=taken)

    def _enqueue(
        self, study: optuna.Study, distributions: dict[str, BaseDistribution], configs: list[Config]
    ) -> Trial | None:
        if not configs:
            return None
        self.substitutes += 1
        study.enqueue_trial(encode(self.space, configs[0]))
        return study.ask(distributions)

    def _tell(self, study: optuna.Study, trial: Trial, objective: float) -> None:
        if math.isfinite(objective):
            study.tell(trial, math.log(objective))
        elif self._worst_latency() is None:
            self._held.append(trial)
        else:
            study.tell(trial, self._penalty())

    def _release_held(self, study: optuna.Study) -> None:
        if self._held and self._worst_latency() is not None:
            for trial in self._held:
                study.tell(trial, self._penalty())
            self._held = []

    def _worst_latency(self) -> float | None:
        finite = [value for value in self.observed.values() if math.isfinite(value)]
        return max(finite) if finite else None

    def _penalty(self) -> float:
        return math.log(self.settings.penalty_factor * self._worst_latency())


@dataclass(frozen=True)
class TPESettings(OptunaSettings):
    """TPE: multivariate=True (models parameter interactions; the brief's choice), n_startup_trials=10 (Optuna's
    default random warm-up)."""

    n_startup_trials: int = 10
    multivariate: bool = True


class OptunaTPE(OptunaSearch):
    Settings = TPESettings

    def make_sampler(self, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=self.settings.n_startup_trials,
            multivariate=self.settings.multivariate,
            warn_independent_sampling=False,
        )


@dataclass(frozen=True)
class GPSettings(OptunaSettings):
    """GP: n_startup_trials=10 (Optuna's default). deterministic_objective=True: the runner measures a config
    once and serves revisits from its cache, so a told value never changes."""

    n_startup_trials: int = 10
    deterministic_objective: bool = True


class OptunaGP(OptunaSearch):
    Settings = GPSettings

    def make_sampler(self, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.GPSampler(
            seed=seed,
            n_startup_trials=self.settings.n_startup_trials,
            deterministic_objective=self.settings.deterministic_objective,
        )


@dataclass(frozen=True)
class CmaEsSettings(OptunaSettings):
    """CMA-ES: with_margin=True, the margin correction for integer variables (Hamano et al. 2022) that Optuna's
    documentation recommends for discrete spaces; n_startup_trials=1 and the population size are Optuna's
    defaults. Categorical parameters are sampled independently (Optuna's CMA-ES handles numbers only)."""

    n_startup_trials: int = 1
    with_margin: bool = True


class OptunaCmaEs(OptunaSearch):
    Settings = CmaEsSettings

    def __init__(self, space: Space, seed: int = 0, settings: CmaEsSettings | None = None) -> None:
        try:
            import cmaes  # noqa: F401  (Optuna's CmaEsSampler imports it only when it first samples)
        except ImportError:
            raise ImportError("optuna_cmaes needs the `cmaes` package, which is not installed") from None
        super().__init__(space, seed, settings)

    def make_sampler(self, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.CmaEsSampler(
            seed=seed,
            n_startup_trials=self.settings.n_startup_trials,
            with_margin=self.settings.with_margin,
            warn_independent_sampling=False,
        )


@dataclass(frozen=True)
class QMCSettings(OptunaSettings):
    """QMC: a scrambled Sobol sequence (Optuna's default is unscrambled, which would give every seed the same
    trace). Categorical parameters are sampled independently, as Optuna does."""

    qmc_type: str = "sobol"
    scramble: bool = True


class OptunaQMC(OptunaSearch):
    Settings = QMCSettings

    def make_sampler(self, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.QMCSampler(
            qmc_type=self.settings.qmc_type,
            scramble=self.settings.scramble,
            seed=seed,
            warn_independent_sampling=False,
            warn_asynchronous_seeding=False,
        )


class OptunaRandom(OptunaSearch):
    """Optuna's RandomSampler: independent uniform draws per parameter (not uniform over valid configs)."""

    def make_sampler(self, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=seed)
