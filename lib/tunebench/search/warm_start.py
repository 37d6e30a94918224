"""Warm start: measure a model's top-k configs for the shape first, then hand over to any strategy, seeded with them.

`WarmStart` yields the seed configs as its first batch. It then drives the inner strategy, which it built over a
`SeededSpace`: the inner strategy's first `Space.sample` returns the seeds ahead of its random draws, so a strategy
that starts from a sampled population (pattern search, LFBO, random search, DE) finds the seeds in it and starts
its search copies from the best of them. The inner strategy is told the seeds' results like any other; the wrapper
answers configs it has measured already itself, and asks only for new ones. Before the inner strategy's first ask,
the seeds' results also go into its `observed` (the base class's record of measured configs), so a strategy that
never samples still knows them when it compares configs.

With `restart`, the seeds alone are the inner strategy's initial population, so its search copies start from them at
once, and when it stops a fresh, unseeded run of the inner strategy (the next seed) takes over, knowing everything
measured so far: when the seeds are close, the copies get there without 90 random configs first; when they are not,
the fresh run keeps looking (`benchmarks/warm_start_variants.py` measures both). `restart_patience` ends the restarts
once that many fresh runs in a row improved the best by less than RESTART_GAIN; without it they go on until one asks
nothing new, which on a large space means until the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Generator, Mapping, Sequence

import numpy as np

from tunebench.measure.result import Result
from tunebench.search import make_strategy
from tunebench.search.base import Config, Key, Search, Strategy, StrategySettings
from tunebench.space import Space
from tunebench.study import STALLED_BATCHES

RESTART_GAIN = 0.01  # a fresh run that lowers the best latency by less than this share did not pay for itself


class SeededSpace:
    """A view of a Space whose first `sample` calls return the seed configs first (each once), then random draws;
    everything else is the wrapped space's."""

    def __init__(self, space: Space, seeds: Sequence[Config]) -> None:
        self._space = space
        self._pending = [dict(config) for config in seeds]

    def sample(self, rng: np.random.Generator, n: int, *, unique: bool = False) -> list[Config]:
        seeds, self._pending = self._pending[:n], self._pending[n:]
        return seeds + self._space.sample(rng, n - len(seeds), unique=unique)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._space, name)

    def __getitem__(self, name: str) -> Any:
        return self._space[name]

    def __len__(self) -> int:
        return len(self._space)


@dataclass(frozen=True)
class WarmStartSettings(StrategySettings):
    """Defaults for `WarmStart`.

    inner: the strategy that takes over after the seeds (a name in tunebench.search.NAMES).
    inner_settings: overrides of the inner strategy's defaults, as (name, value) pairs.
    restart: the seeded run's initial population is the seeds alone (its `initial_population` setting, which the
        inner strategy must have), and each time a run stops, a fresh unseeded one starts, until one asks nothing new.
    restart_patience: with restart, stop after this many fresh runs in a row that each lowered the best latency by
        less than RESTART_GAIN (0: never stop for that).
    """

    inner: str = "lfbo"
    inner_settings: tuple[tuple[str, Any], ...] = ()
    restart: bool = False
    restart_patience: int = 0


class WarmStart(Strategy):
    """The seeds first, then the inner strategy (same seed), seeded with them. With no seeds and no restart it asks
    exactly what the inner strategy asks."""

    Settings = WarmStartSettings

    def __init__(self, space: Space, seed: int = 0, settings: WarmStartSettings | None = None, *,
                 seeds: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(space, seed, settings)
        if self.settings.restart_patience < 0 or (self.settings.restart_patience and not self.settings.restart):
            raise ValueError(f"restart_patience={self.settings.restart_patience!r}: it counts fresh runs, so it must "
                             "be 0 (never stop for it) or, with restart=True, a positive number of runs")
        unique: dict[Key, Config] = {}
        for config in seeds:
            space.check(config)
            unique.setdefault(space.key(config), dict(config))
        self.seeds = list(unique.values())
        seeded = dict(self.settings.inner_settings)
        if self.settings.restart and self.seeds:
            seeded["initial_population"] = len(self.seeds)
        self.inner = make_strategy(self.settings.inner, SeededSpace(space, self.seeds), seed=seed, **seeded)

    def search(self) -> Search:
        known: dict[Key, Result] = {}
        if self.seeds:
            results = yield list(self.seeds)
            known.update((self.space.key(config), result) for config, result in zip(self.seeds, results))
        run, restarts, fruitless = self.inner, 0, 0
        while True:
            for key, result in known.items():
                run.observed[key] = min(run.observed.get(key, math.inf), result.objective)
            best_before = min((result.objective for result in known.values()), default=math.inf)
            asked_new = yield from self._drive(run, known)
            if not (self.settings.restart and asked_new):
                return
            if restarts:  # a fresh run ended: did it pay?
                best_after = min(result.objective for result in known.values())
                fruitless = fruitless + 1 if not best_after < best_before * (1 - RESTART_GAIN) else 0
                if self.settings.restart_patience and fruitless >= self.settings.restart_patience:
                    return
            restarts += 1
            run = make_strategy(self.settings.inner, self.space, seed=self.seed + restarts,
                                **dict(self.settings.inner_settings))

    def _drive(self, run: Strategy, known: dict[Key, Result]) -> Generator[list[Config], list[Result], bool]:
        """Ask `run` until it stops (or asks only measured configs for STALLED_BATCHES batches), measuring only what
        `known` lacks and adding it there; whether it asked for anything new."""
        stalled, asked_new = 0, False
        while stalled < STALLED_BATCHES:
            batch = run.ask()
            if not batch:
                break
            keys = [self.space.key(config) for config in batch]
            new = [config for config, key in zip(batch, keys) if key not in known]
            stalled = 0 if new else stalled + 1
            if new:
                asked_new = True
                results = yield new
                known.update((self.space.key(config), result) for config, result in zip(new, results))
            run.tell([known[key] for key in keys])
        return asked_new


def warm_start(inner: str, space: Space, seeds: Sequence[Mapping[str, Any]], seed: int = 0, *, restart: bool = False,
               restart_patience: int = 0, **inner_settings: Any) -> WarmStart:
    """`inner` (a registered strategy name, with its settings checked by `make_strategy`) warm-started from `seeds`;
    `restart`, `restart_patience`: see `WarmStartSettings`."""
    return WarmStart(space, seed, WarmStartSettings(inner, tuple(sorted(inner_settings.items())), restart,
                                                    restart_patience), seeds=seeds)
