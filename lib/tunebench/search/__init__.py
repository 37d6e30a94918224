"""Search strategies behind one ask/tell protocol, and the registry that builds them by name.
`make_strategy("lfbo", space, seed=3, copies=2)` checks each setting against the strategy's dataclass."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from tunebench.search.base import Strategy, StrategySettings, sample_new
from tunebench.search.differential_evolution import DifferentialEvolution
from tunebench.search.exhaustive import Exhaustive
from tunebench.search.lfbo import LFBOPatternSearch
from tunebench.search.optuna_sampler import OptunaCmaEs, OptunaGP, OptunaQMC, OptunaRandom, OptunaTPE
from tunebench.search.pattern import PatternSearch
from tunebench.search.random import RandomSearch
from tunebench.space import Space

STRATEGIES: dict[str, type[Strategy]] = {
    "random": RandomSearch,
    "exhaustive": Exhaustive,
    "pattern": PatternSearch,
    "lfbo": LFBOPatternSearch,
    "de": DifferentialEvolution,
    "optuna_tpe": OptunaTPE,
    "optuna_gp": OptunaGP,
    "optuna_cmaes": OptunaCmaEs,
    "optuna_qmc": OptunaQMC,
    "optuna_random": OptunaRandom,
}


# Helion's `quick` autotuning effort for the searches it shrinks (helion/autotuner/effort_profile.py, the "quick"
# entry of `_PROFILES`): each strategy's defaults follow Helion's `full` profile, these presets its `quick` one. Helion
# may also seed a quick search's first population with default configs; these draw it at random, as `full` does.
_QUICK_PATTERN = {"initial_population": 30, "copies": 2, "max_generations": 5}
PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "pattern_quick": ("pattern", _QUICK_PATTERN),
    "lfbo_quick": ("lfbo", _QUICK_PATTERN),
    "de_quick": ("de", {"population_size": 20, "max_generations": 8}),
}
NAMES = (*STRATEGIES, *PRESETS)  # every name make_strategy builds


def make_strategy(name: str, space: Space, seed: int = 0, **settings: Any) -> Strategy:
    """The strategy registered as `name`, with its defaults overridden by `settings` (checked by name and type); a
    preset's name (`PRESETS`) gives its strategy with the preset's settings, which `settings` may override in turn."""
    if name in PRESETS:
        registered, preset = PRESETS[name]
        return make_strategy(registered, space, seed, **{**preset, **settings})
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(NAMES)}")
    strategy = STRATEGIES[name]
    known = {field.name: field for field in fields(strategy.Settings)}
    for key, value in settings.items():
        if key not in known:
            raise ValueError(
                f"unknown setting {key!r} for strategy {name!r}; "
                f"{strategy.Settings.__name__} has: {', '.join(known) or 'none'}"
            )
        default = known[key].default
        if default is not MISSING and not _same_kind(value, default):
            raise TypeError(f"setting {key!r} of strategy {name!r} must be {type(default).__name__}, got {value!r}")
    return strategy(space, seed, strategy.Settings(**settings))


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


__all__ = ["NAMES", "PRESETS", "STRATEGIES", "Strategy", "StrategySettings", "make_strategy", "sample_new"]
