"""A search strategy written outside tunebench, as a user writes one: iterated local search in batches, compared
beside the registered strategies by its import path (docs/strategies.md, "Your own strategy")."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tunebench.search import Strategy, StrategySettings, sample_new
from tunebench.search.base import Config, Search


@dataclass(frozen=True)
class IteratedLocalSearchSettings(StrategySettings):
    """initial_population: random configs measured first; the walk starts at the fastest.
    batch: configs measured per step: unmeasured single-parameter neighbours of where the walk stands, in random order.
    kick_changes: parameters that one kick moves at once (each within two steps), to leave a local optimum.
    """

    initial_population: int = 20
    batch: int = 8
    kick_changes: int = 3


class IteratedLocalSearch(Strategy):
    """Local search that moves to the fastest of each batch of neighbours when it beats where the walk stands; once
    every neighbour there is measured, it kicks: random multi-parameter moves from the fastest config so far, and the
    walk goes on from the fastest of them, better or not (iterated local search: Lourenco, Martin and Stuetzle, 2003).
    Kernel Tuner's `greedy_ils` is a strategy of this family."""

    Settings = IteratedLocalSearchSettings

    def search(self) -> Search:
        settings = self.settings
        batch = sample_new(self.space, self.rng, settings.initial_population)
        while batch:
            yield batch
            here = min(batch, key=self._objective)
            while math.isfinite(self._objective(here)):
                steps = [config for config in self.space.neighbours(here) if not self._measured(config)]
                if not steps:
                    break
                batch = [steps[int(i)] for i in self.rng.permutation(len(steps))[: settings.batch]]
                yield batch
                fastest = min(batch, key=self._objective)
                if self._objective(fastest) < self._objective(here):
                    here = fastest
            batch = self._kicks()

    def _kicks(self) -> list[Config]:
        """Unmeasured moves of up to `kick_changes` parameters from the fastest config so far; random unmeasured
        configs where the moves find too few; none once every config is measured."""
        start = self.best.config if self.best is not None else None
        kicks: dict[tuple, Config] = {}
        for _ in range(4 * self.settings.batch if start is not None else 0):
            move = self.space.perturb(start, self.rng, radius=2, max_changes=self.settings.kick_changes)
            if not self._measured(move):
                kicks.setdefault(self.space.key(move), move)
            if len(kicks) == self.settings.batch:
                break
        missing = self.settings.batch - len(kicks)
        fresh = sample_new(self.space, self.rng, missing, exclude=[*self.observed, *kicks]) if missing else []
        return [*kicks.values(), *fresh]

    def _measured(self, config: Config) -> bool:
        return self.space.key(config) in self.observed

    def _objective(self, config: Config) -> float:
        return self.observed.get(self.space.key(config), math.inf)
