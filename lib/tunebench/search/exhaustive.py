"""Exhaustive search: every valid config once, in a seeded random order, in batches.
The oracle for replay studies (it finds the optimum of a recording) and a check on budgets."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.search.base import Search, Strategy, StrategySettings


@dataclass(frozen=True)
class ExhaustiveSettings(StrategySettings):
    """Defaults for `Exhaustive`. batch_size: configs per ask (our choice; it only sets the batch granularity)."""

    batch_size: int = 64


class Exhaustive(Strategy):
    """Enumerate the space, shuffle it with the strategy's rng, and ask for it in batches."""

    Settings = ExhaustiveSettings

    def search(self) -> Search:
        configs = list(self.space.enumerate())
        order = self.rng.permutation(len(configs))
        size = self.settings.batch_size
        for start in range(0, len(configs), size):
            yield [configs[int(i)] for i in order[start : start + size]]
