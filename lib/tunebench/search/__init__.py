"""Search strategies behind one ask/tell protocol, and the registry that builds them by name.
`make_strategy("lfbo", space, seed=3, copies=2)` checks each setting against the strategy's dataclass; a strategy
written outside tunebench is named by its import path, `make_strategy("my_package.module.MySearch", space)`."""

from __future__ import annotations

import importlib
from dataclasses import MISSING, fields
from typing import Any, Sequence

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
# The `_start30` presets keep Helion's full effort but start from 30 random configs instead of 100: the start chosen
# on the recorded row-wise and Kernel Tuner tasks by a rule fixed before the run, and reported on the GEMM tasks
# (benchmarks/held_out_setting.py; results/held_out_setting/).
PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "pattern_quick": ("pattern", _QUICK_PATTERN),
    "lfbo_quick": ("lfbo", _QUICK_PATTERN),
    "de_quick": ("de", {"population_size": 20, "max_generations": 8}),
    "pattern_start30": ("pattern", {"initial_population": 30}),
    "lfbo_start30": ("lfbo", {"initial_population": 30}),
    # lfbo_start30 measuring 5 % of its ranked candidates per copy and generation (chosen the same way, by seconds and
    # by expected seconds with restarts), restarted by `WarmStart` each time it stops, until the budget ends.
    "lfbo_restarts": ("tunebench.search.warm_start.WarmStart",
                      {"inner": "lfbo_start30", "inner_settings": (("frac_selected", 0.05),), "restart": True}),
    # Helion's quick LFBO, nothing tuned here, restarted the same way.
    "lfbo_quick_restarts": ("tunebench.search.warm_start.WarmStart", {"inner": "lfbo_quick", "restart": True}),
    # The pipeline-selection autotuner's step (kernels/compressed_matmul/autotune.py): pattern search on each
    # pipeline's part of the space in turn, 128 unique evaluations each; interleaved, the four runs take turns.
    "pattern_per_pipeline": ("tunebench.search.stratified.Stratified", {}),
    "pattern_per_pipeline_interleaved": ("tunebench.search.stratified.Stratified", {"interleave": True}),
}
NAMES = (*STRATEGIES, *PRESETS)  # every name make_strategy builds


def make_strategy(name: str, space: Space, seed: int = 0, **settings: Any) -> Strategy:
    """The strategy registered as `name`, with its defaults overridden by `settings` (checked by name and type); a
    preset's name (`PRESETS`) gives its strategy with the preset's settings, which `settings` may override in turn. A
    dotted name is an import path (`strategy_class`)."""
    if name in PRESETS:
        registered, preset = PRESETS[name]
        return make_strategy(registered, space, seed, **{**preset, **settings})
    strategy = strategy_class(name)
    known = {field.name: field for field in fields(strategy.Settings)}
    for key, value in settings.items():
        if key not in known:
            raise ValueError(
                f"unknown setting {key!r} for strategy {name!r}; "
                f"{strategy.Settings.__name__} has: {', '.join(known) or 'none'}"
            )
        default = known[key].default
        if isinstance(default, tuple) and isinstance(value, list):  # JSON, a study's --settings, has no tuples
            value = settings[key] = _as_tuple(value)
        if default is not MISSING and not _same_kind(value, default):
            raise TypeError(f"setting {key!r} of strategy {name!r} must be {type(default).__name__}, got {value!r}")
    return strategy(space, seed, strategy.Settings(**settings))


def strategy_class(name: str) -> type[Strategy]:
    """The class of strategy `name`: a registered one (`STRATEGIES`), or, for a dotted name such as
    "my_package.module.MySearch", the `Strategy` subclass of that name in that module, so that a study compares a
    strategy written outside tunebench beside the registered ones (the module must be importable where the study's
    worker processes run: installed, or on PYTHONPATH). A clear error for anything else."""
    if name in STRATEGIES:
        return STRATEGIES[name]
    if "." not in name:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(NAMES)}, or a Strategy subclass's import "
                         "path such as 'my_package.module.MySearch'")
    module_name, _, class_name = name.rpartition(".")
    if not (module_name and class_name) or module_name.startswith(".") or module_name.endswith("."):
        raise ValueError(f"strategy {name!r} is not an import path; allowed: 'package.module.ClassName'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"strategy {name!r}: cannot import module {module_name!r} ({error}); put it on PYTHONPATH "
                         "or install it") from error
    found = getattr(module, class_name, None)
    if not (isinstance(found, type) and issubclass(found, Strategy)):
        what = ("nothing" if found is None else f"class {found.__qualname__}" if isinstance(found, type)
                else f"{type(found).__name__} {found!r}")
        raise ValueError(f"strategy {name!r}: module {module_name!r} has {what} by the name {class_name!r}; allowed: "
                         "a subclass of tunebench.search.Strategy")
    return found


def check_strategy_names(names: Sequence[str]) -> None:
    """A clear error naming every name that is neither registered (`NAMES`) nor dotted, or `strategy_class`'s error
    for a dotted one that names no Strategy subclass; called before a study starts, so that a typo costs no replays."""
    unknown = [name for name in names if name not in NAMES and "." not in name]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; known: {', '.join(NAMES)}, or a Strategy subclass's import "
                         "path such as 'my_package.module.MySearch'")
    for name in names:
        if "." in name:
            strategy_class(name)


def _as_tuple(value: list) -> tuple:
    """A list, and the lists in it, as tuples."""
    return tuple(_as_tuple(item) if isinstance(item, list) else item for item in value)


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


__all__ = ["NAMES", "PRESETS", "STRATEGIES", "Strategy", "StrategySettings", "check_strategy_names", "make_strategy",
           "sample_new", "strategy_class"]
