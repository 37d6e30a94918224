"""Differential evolution (DE/rand/1/bin) over config spaces, with Helion's population and generation defaults.
Ordered parameters (all but Choice) move by a + F(b - c) in index steps; a Choice is inherited from a, b or c."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tunebench.search.base import Config, Search, Strategy, StrategySettings, sample_new
from tunebench.space import Choice, Space


@dataclass(frozen=True)
class DifferentialEvolutionSettings(StrategySettings):
    """Defaults for `DifferentialEvolution`, from Helion's helion/autotuner/differential_evolution.py and its
    `full` effort profile (`DIFFERENTIAL_EVOLUTION_DEFAULTS` in helion/autotuner/effort_profile.py).

    population_size: members (Helion: 40).
    max_generations: generations, counting the oversized initial population as two as Helion does (Helion: 40,
        so 38 evolving generations).
    crossover_rate: probability a parameter comes from the mutant in binomial crossover (Helion: 0.8). As in
        Helion's `ConfigGeneration.differential_mutation`, one random parameter always comes from the mutant.
    initial_oversample: the initial random population is this many times `population_size` and its fastest
        `population_size` members survive (Helion's `initial_two_generations`: 2).
    mutation_factor: F in a + F(b - c) on parameter indices, rounded. Not from Helion, whose numeric mutation
        steps one notch in the direction of b - c. 0.8 lies in the [0.5, 1] range of Storn and Price (1997) and,
        unlike 0.5, turns a one-notch difference into a one-notch move in either direction after rounding.
    """

    population_size: int = 40
    max_generations: int = 40
    crossover_rate: float = 0.8
    initial_oversample: int = 2
    mutation_factor: float = 0.8


class DifferentialEvolution(Strategy):
    """Each generation, every member proposes one trial; the trial replaces it if strictly faster.

    A trial that was already measured is not asked again: its known timing is used (revisits are free). An
    invalid trial is repaired, never dropped: its mutated parameters are reverted to the target's values one at
    a time in random order until it is valid, and a trial reverted all the way to its target is replaced by a
    random valid perturbation of the target. `repairs` counts repaired trials. A population of fewer than four
    members (a tiny space) cannot mutate, so the search ends after the initial population.
    """

    Settings = DifferentialEvolutionSettings

    def __init__(self, space: Space, seed: int = 0, settings: DifferentialEvolutionSettings | None = None) -> None:
        super().__init__(space, seed, settings)
        self.repairs = 0

    def search(self) -> Search:
        settings = self.settings
        initial = sample_new(self.space, self.rng, settings.initial_oversample * settings.population_size)
        yield initial
        population = sorted(initial, key=self._objective)[: settings.population_size]
        if len(population) < 4:
            return
        for _ in range(2, settings.max_generations):
            trials = [self.trial(index, population) for index in range(len(population))]
            new = {self.space.key(t): t for t in trials if self.space.key(t) not in self.observed}
            if new:
                yield list(new.values())
            for index, trial in enumerate(trials):
                if self._objective(trial) < self._objective(population[index]):
                    population[index] = trial

    def trial(self, index: int, population: list[Config]) -> Config:
        """Mutant of three other members, crossed over with member `index`, repaired if invalid."""
        settings = self.settings
        others = [i for i in range(len(population)) if i != index]
        a, b, c = (population[int(i)] for i in self.rng.choice(others, size=3, replace=False))
        target = population[index]
        forced = int(self.rng.integers(len(self.space.names)))
        trial = dict(target)
        for position, parameter in enumerate(self.space.parameters):
            if position != forced and self.rng.random() >= settings.crossover_rate:
                continue
            name = parameter.name
            if isinstance(parameter, Choice):
                trial[name] = (a, b, c)[int(self.rng.integers(3))][name]
            else:
                values = list(parameter.values)
                step = values.index(b[name]) - values.index(c[name])
                moved = math.floor(values.index(a[name]) + settings.mutation_factor * step + 0.5)
                trial[name] = values[min(max(moved, 0), len(values) - 1)]
        if self.space.is_valid(trial):
            return trial
        self.repairs += 1
        return self._repair(trial, target)

    def _repair(self, trial: Config, target: Config) -> Config:
        changed = [name for name in self.space.names if trial[name] != target[name]]
        for position in self.rng.permutation(len(changed)):
            trial = {**trial, changed[int(position)]: target[changed[int(position)]]}
            if self.space.is_valid(trial) and trial != target:
                return trial
        return self.space.perturb(target, self.rng)

    def _objective(self, config: Config) -> float:
        return self.observed.get(self.space.key(config), math.inf)
