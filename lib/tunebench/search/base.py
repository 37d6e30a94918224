"""The ask/tell protocol every search strategy speaks, and a base class that runs a strategy written as a
generator. A strategy sees only a `Space` and the `Result`s it is told: no evaluator, dataset or budget."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Generator, Iterable, Sequence

import numpy as np

from tunebench.measure.result import Result
from tunebench.space import Space

Config = dict[str, Any]
Key = tuple
Search = Generator[list[Config], list[Result], None]
REJECTION_ROUNDS = 4  # rounds of uniform draws in `sample_new` before it enumerates what is left


@dataclass(frozen=True)
class StrategySettings:
    """Base of every strategy's settings: one frozen dataclass per strategy holds all its defaults."""


class Strategy:
    """A search strategy: `ask()` a batch of valid configs, `tell(results)` in the same order, until `done`.

    Subclasses set `Settings` to their frozen dataclass and write `search()`, a generator that yields
    batches and receives their results. The base drives it, checks the batches, and keeps `history`
    (every result told, in order), `best` (the fastest ok result), and `observed` (the best objective
    told for each config key, so a re-measured config keeps its best timing).
    """

    Settings: ClassVar[type[StrategySettings]] = StrategySettings

    def __init__(self, space: Space, seed: int = 0, settings: StrategySettings | None = None) -> None:
        if settings is None:
            settings = self.Settings()
        if not isinstance(settings, self.Settings):
            raise TypeError(f"{type(self).__name__} takes {self.Settings.__name__}, got {type(settings).__name__}")
        self.space = space
        self.seed = seed
        self.settings = settings
        self.rng = np.random.default_rng(seed)
        self.history: list[Result] = []
        self.best: Result | None = None
        self.observed: dict[Key, float] = {}
        self._search: Search | None = None
        self._asked: list[Config] | None = None
        self._told: list[Result] | None = None
        self._done = False

    def search(self) -> Search:
        """Yield batches of valid configs; each `yield` returns the batch's results in order."""
        raise NotImplementedError

    @property
    def done(self) -> bool:
        return self._done

    def ask(self) -> list[Config]:
        """The next batch of distinct valid configs, or [] once the search has ended."""
        if self._asked is not None:
            raise RuntimeError("tell the results of the last ask before asking again")
        if self._done:
            return []
        try:
            if self._search is None:
                self._search = self.search()
                batch = next(self._search)
            else:
                told, self._told = self._told, None
                batch = self._search.send(told)
        except StopIteration:
            self._done = True
            return []
        self._check_batch(batch)
        self._asked = [dict(config) for config in batch]
        return [dict(config) for config in batch]

    def tell(self, results: Sequence[Result]) -> None:
        """Record the results of the last ask, in its order; failures are results with infinite objective."""
        if self._asked is None:
            raise RuntimeError("tell without a pending ask")
        if len(results) != len(self._asked):
            raise ValueError(f"asked for {len(self._asked)} configs, told {len(results)} results")
        for config, result in zip(self._asked, results):
            if self.space.key(result.config) != self.space.key(config):
                raise ValueError(f"results out of order: asked {config}, told {dict(result.config)}")
        for result in results:
            self.history.append(result)
            key = self.space.key(result.config)
            self.observed[key] = min(self.observed.get(key, math.inf), result.objective)
            if result.ok and (self.best is None or result.objective < self.best.objective):
                self.best = result
        self._asked = None
        self._told = list(results)

    def _check_batch(self, batch: list[Config]) -> None:
        if not batch:
            raise RuntimeError(f"{type(self).__name__}.search yielded an empty batch; return to end the search")
        keys = [self.space.key(config) for config in batch]
        if len(set(keys)) != len(keys):
            raise RuntimeError(f"{type(self).__name__}.search yielded a batch with repeated configs")
        for config in batch:
            self.space.check(config)


def sample_new(space: Space, rng: np.random.Generator, count: int, exclude: Iterable[Key] = ()) -> list[Config]:
    """Up to `count` distinct valid configs drawn uniformly from those whose keys are not in `exclude`;
    fewer only when fewer remain, none once the space is exhausted."""
    excluded = set(exclude)
    chosen: dict[Key, Config] = {}
    # Rejection is cheap while most of the space is new and never enumerates a huge space; once draws
    # keep hitting excluded configs (a small, nearly exhausted space), the remaining ones are enumerated.
    for _ in range(REJECTION_ROUNDS):
        if len(chosen) >= count:
            return list(chosen.values())[:count]
        for config in space.sample(rng, 2 * (count - len(chosen)) + 8):
            key = space.key(config)
            if key not in excluded:
                chosen.setdefault(key, config)
    if len(chosen) >= count:
        return list(chosen.values())[:count]
    taken = excluded | set(chosen)
    rest = [config for config in space.enumerate() if space.key(config) not in taken]
    return list(chosen.values()) + [rest[int(i)] for i in rng.permutation(len(rest))[: count - len(chosen)]]


def is_block_size(name: str) -> bool:
    """Parameters named like tile sizes ("BLOCK_M", "block_k") get wider moves, as in Helion."""
    return name.startswith(("BLOCK", "block"))
