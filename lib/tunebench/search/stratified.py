"""Stratified search: one run of an inner strategy per value of one parameter (the compressed family's execution
pipeline, say), each on that value's part of the space and with its own budget of unique evaluations.

This is the per-pipeline step of the pipeline-selection autotuner (`kernels/compressed_matmul/autotune.py`) behind the
ask/tell protocol, so a study replays it beside strategies that search the whole space at once. Why search per value:
in a space whose other parameters are pinned per value (a pipeline without a decoder pins the decoder's share), a
one-parameter move rarely changes the value, so a single local search leaves it only through its random start. Each
stratum's run follows the study's own rules (`study.Search`): configs it asks again are answered from what it measured,
a run that asks nothing new for STALLED_BATCHES batches ends, and one whose batch overruns its budget measures the
batch's first configs up to the budget and ends there, untold. In turn (the default) the strata run one after another,
in the order of the parameter's values; interleaved, their runs take turns batch by batch, so the budget reaches every
value early. As a race, every run pauses once it has measured `probe` configs, and only the `leaders` runs with the
fastest results go on. Seed configs (`seeds`, say what was fastest at other shapes) go to their stratum's run, which
measures them first and starts from them (`warm_start.WarmStart`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generator, Mapping, Sequence

from tunebench.measure.result import Result
from tunebench.search import PRESETS, make_strategy, strategy_class
from tunebench.search.base import Config, Key, Search, Strategy, StrategySettings
from tunebench.search.warm_start import WarmStart, WarmStartSettings
from tunebench.space import Space
from tunebench.study import STALLED_BATCHES


@dataclass(frozen=True)
class StratifiedSettings(StrategySettings):
    """Defaults for `Stratified` (those of the autotuner's `AutotuneSettings`).

    parameter: the parameter whose values make the strata.
    inner: the strategy run on each stratum (a name in tunebench.search.NAMES); inner_settings: overrides of its
        defaults, as (name, value) pairs. Every stratum's run is seeded with this strategy's seed.
    evaluations_per_stratum: unique evaluations each stratum's run may spend.
    interleave: the strata's runs take turns batch by batch instead of running one after another.
    probe, leaders: with leaders > 0, a race: every stratum's run first stops at the end of the batch that brings it to
        `probe` unique evaluations (or at its budget, or its end), and then only the `leaders` strata with the fastest
        results so far go on, to their full budget (0: no race; every stratum spends its budget).
    """

    parameter: str = "pipeline"
    inner: str = "pattern"
    inner_settings: tuple[tuple[str, Any], ...] = ()
    evaluations_per_stratum: int = 128
    interleave: bool = False
    probe: int = 0
    leaders: int = 0


class _StratumRun:
    """One stratum's inner strategy, driven under its budget as `study.Search` drives a strategy."""

    def __init__(self, strategy: Strategy, budget: int, pause_at: int | None = None) -> None:
        self.strategy, self.budget = strategy, budget
        self.pause_at = budget if pause_at is None else pause_at  # asks no more once it has measured this many
        self.seen: dict[Key, Result] = {}
        self.over = False
        self._pending: tuple[list[Key], bool] | None = None  # the asked batch's keys, and whether it overran

    def next_configs(self) -> list[Config]:
        """The new configs of the strategy's next batch that asks any (cut to the budget), or [] once it is over."""
        stalled = 0
        if len(self.seen) >= self.pause_at and self.pause_at < self.budget:
            return []  # paused, not over: resume() lets it go on
        while not self.over and stalled < STALLED_BATCHES:
            left = self.budget - len(self.seen)
            batch = self.strategy.ask() if left > 0 else []
            if not batch:
                break
            keys = [self.strategy.space.key(config) for config in batch]
            new = [config for config, key in zip(batch, keys) if key not in self.seen]
            if new:
                self._pending = (keys, len(new) > left)
                return new[:left]
            self.strategy.tell([self.seen[key] for key in keys])
            stalled += 1
        self.over = True
        return []

    @property
    def paused(self) -> bool:
        return not self.over and len(self.seen) >= self.pause_at

    @property
    def best(self) -> float:
        return min((result.objective for result in self.seen.values()), default=float("inf"))

    def resume(self) -> None:
        self.pause_at = self.budget

    def told(self, configs: list[Config], results: list[Result]) -> None:
        keys, overran = self._pending
        self._pending = None
        self.seen.update((self.strategy.space.key(config), result) for config, result in zip(configs, results))
        if overran:
            self.over = True
        else:
            self.strategy.tell([self.seen[key] for key in keys])


class Stratified(Strategy):
    """One inner-strategy run per value of `settings.parameter`, each over that value's configs (module docstring)."""

    Settings = StratifiedSettings

    def __init__(self, space: Space, seed: int = 0, settings: StratifiedSettings | None = None, *,
                 seeds: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(space, seed, settings)
        names = [parameter.name for parameter in space.parameters]
        if self.settings.parameter not in names:
            raise ValueError(f"parameter={self.settings.parameter!r} is not a parameter of this space; allowed: "
                             f"{', '.join(names)}")
        if self.settings.inner not in PRESETS:
            strategy_class(self.settings.inner)  # a clear error for a name that is neither registered nor a path
        if self.settings.evaluations_per_stratum < 1:
            raise ValueError(f"evaluations_per_stratum={self.settings.evaluations_per_stratum!r}; allowed: >= 1")
        if self.settings.leaders < 0 or (self.settings.leaders and not 1 <= self.settings.probe):
            raise ValueError(f"leaders={self.settings.leaders!r}, probe={self.settings.probe!r}; allowed: leaders 0 "
                             "(no race), or leaders >= 1 with probe >= 1")
        self.strata = self._strata()
        self.seeds = [dict(config) for config in seeds]

    def _strata(self) -> dict[Any, Space]:
        """The non-empty part of the space for each value of the parameter, in the order of its values."""
        name = self.settings.parameter
        keys: dict[Any, list[Key]] = {}
        for config in self.space.enumerate():
            keys.setdefault(config[name], []).append(self.space.key(config))
        return {value: self.space.restrict(keys[value], f"{name} {value}")
                for value in self.space[name].values if value in keys}

    def search(self) -> Search:
        settings = self.settings
        pause_at = settings.probe if settings.leaders else None
        runs = [_StratumRun(self._inner(value, stratum), settings.evaluations_per_stratum, pause_at)
                for value, stratum in self.strata.items()]
        yield from self._drive(runs)
        if settings.leaders:
            going_on = sorted((run for run in runs if run.paused), key=lambda run: run.best)[:settings.leaders]
            for run in going_on:
                run.resume()
            yield from self._drive(going_on)

    def _inner(self, value: Any, stratum: Space) -> Strategy:
        """The inner strategy on one stratum, warm-started from the seeds that lie in it (those valid there)."""
        settings = self.settings
        own = [config for config in self.seeds if config.get(settings.parameter) == value and stratum.is_valid(config)]
        if not own:
            return make_strategy(settings.inner, stratum, seed=self.seed, **dict(settings.inner_settings))
        return WarmStart(stratum, self.seed, WarmStartSettings(settings.inner, settings.inner_settings), seeds=own)

    def _drive(self, runs: list[_StratumRun]) -> Search:
        """Step the runs, in turn or interleaved, until each is over or paused."""
        active = list(runs)
        while active:
            for run in list(active[:None if self.settings.interleave else 1]):
                yield from self._step(run)
                if run.over or run.paused:
                    active.remove(run)

    @staticmethod
    def _step(run: _StratumRun) -> Generator[list[Config], list[Result], None]:
        configs = run.next_configs()
        if configs:
            run.told(configs, (yield configs))
