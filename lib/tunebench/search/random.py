"""Random search, the baseline every other strategy is scored against: batches of distinct valid configs
drawn uniformly from those not asked before, until the space is exhausted."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.search.base import Search, Strategy, StrategySettings, sample_new


@dataclass(frozen=True)
class RandomSearchSettings(StrategySettings):
    """Defaults for `RandomSearch`.

    batch_size: configs per ask. Helion's RandomSearch draws its whole `full`-effort count (1000) as one
    population; a study budget decides when we stop, so we ask in small batches instead.
    """

    batch_size: int = 16


class RandomSearch(Strategy):
    """Uniform sampling without replacement over the valid configs."""

    Settings = RandomSearchSettings

    def search(self) -> Search:
        asked: set[tuple] = set()
        while batch := sample_new(self.space, self.rng, self.settings.batch_size, exclude=asked):
            asked.update(self.space.key(config) for config in batch)
            yield batch
