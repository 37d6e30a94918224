"""Pattern search as in Helion: search copies started from the best of a random population walk downhill
through single-parameter moves, evaluating every unvisited neighbour of every copy as one batch per generation."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from tunebench.search.base import Config, Key, Search, Strategy, StrategySettings, is_block_size, sample_new


@dataclass(frozen=True)
class PatternSearchSettings(StrategySettings):
    """Defaults for `PatternSearch`, from Helion's `full` effort profile (`PATTERN_SEARCH_DEFAULTS` in
    helion/autotuner/effort_profile.py) and `PatternSearch.__init__` (helion/autotuner/pattern_search.py).

    initial_population: random valid configs evaluated first (Helion: 100).
    copies: best ok configs of that population that start a search copy (Helion: 5).
    max_generations: generations of neighbour batches per round (Helion: 20).
    min_improvement: a copy moves only if its best neighbour is faster by at least this fraction, and
        stops otherwise (Helion's `min_improvement_delta`: 0.001).
    block_size_pairs: also propose moves of two block-size parameters at once (Helion's
        `_generate_neighbors` does this; a block size is a parameter named "BLOCK*" or "block*").
    restart: when every copy has stopped, start a new round from a fresh random population of unvisited
        configs. Helion has no restart, hence off; our addition so a long budget is not left unused.
    """

    initial_population: int = 100
    copies: int = 5
    max_generations: int = 20
    min_improvement: float = 0.001
    block_size_pairs: bool = True
    restart: bool = False


class PatternSearch(Strategy):
    """Several hill-climbing copies sharing one visited set.

    Judgment call: a copy chooses its move among ALL its measured neighbours, including those another copy
    or the initial population already measured (free information); Helion compares only the neighbours the
    copy itself proposed. Only unvisited neighbours are asked for.
    """

    Settings = PatternSearchSettings

    def search(self) -> Search:
        settings = self.settings
        visited: set[Key] = set()
        while population := sample_new(self.space, self.rng, settings.initial_population, exclude=visited):
            visited.update(self.space.key(config) for config in population)
            yield population
            ranked = sorted(population, key=self._objective)
            starts = [config for config in ranked[: settings.copies] if math.isfinite(self._objective(config))]
            copies = [self._copy(start, visited) for start in starts]
            for _ in range(settings.max_generations):
                proposals = [(copy, next(copy, None)) for copy in copies]
                copies = [copy for copy, proposal in proposals if proposal is not None]
                if not copies:
                    break
                yield [config for _, proposal in proposals if proposal is not None for config in proposal]
            if not settings.restart:
                return

    def _copy(self, start: Config, visited: set[Key]) -> Iterator[list[Config]]:
        """One search copy: yields its unvisited neighbours each generation, then moves or stops."""
        current = start
        while True:
            neighbours = self.neighbours(current)
            fresh = [config for config in neighbours if self.space.key(config) not in visited]
            if fresh:
                visited.update(self.space.key(config) for config in fresh)
                yield fresh
            measured = [config for config in neighbours if self.space.key(config) in self.observed]
            if not measured:
                return
            best = min(measured, key=self._objective)
            if not self._objective(best) < self._objective(current) * (1.0 - self.settings.min_improvement):
                return
            current = best

    def neighbours(self, config: Config) -> list[Config]:
        """Valid single-parameter moves, plus two-block-size moves when `block_size_pairs` is set."""
        moves = {self.space.key(move): move for move in self.space.neighbours(config)}
        if self.settings.block_size_pairs:
            blocks = [name for name in self.space.names if is_block_size(name)]
            for index, first in enumerate(blocks):
                for second in blocks[index + 1 :]:
                    for first_value in self.space[first].neighbours(config[first]):
                        for second_value in self.space[second].neighbours(config[second]):
                            move = {**config, first: first_value, second: second_value}
                            if self.space.is_valid(move):
                                moves.setdefault(self.space.key(move), move)
        return list(moves.values())

    def _objective(self, config: Config) -> float:
        return self.observed.get(self.space.key(config), math.inf)
