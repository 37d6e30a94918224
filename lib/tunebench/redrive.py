"""Re-driving a strategy through a recorded live trace: each batch it asks is answered from the trace while it asks
the trace's next batch, config for config. A variant that asks what the recorded run asked until it stops (a
stopping rule, say) is so measured on the live run's own results and clock, on a CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from tunebench.measure.result import Result, Status
from tunebench.search.base import Config, Strategy
from tunebench.space import ConfigError, Space
from tunebench.study import key_text


@dataclass(frozen=True)
class Redrive:
    """How far a strategy followed a trace. outcome: "stopped" (it asked nothing more), "diverged" (its next batch
    differs from the trace's) or "trace ended" (it asked every recorded batch and wants more); evaluations and
    batches: what it asked and was answered before that; seconds: the trace's clock at its last answered evaluation;
    best_ms: the fastest latency among them (inf when none ran)."""

    outcome: str
    evaluations: int
    batches: int
    seconds: float
    best_ms: float


def config_of_key_text(space: Space, text: str) -> Config:
    """The config whose trace `config_key` is `text` (`study.key_text`); a ConfigError names a token no value of its
    parameter prints as."""
    tokens = text.split(",")
    if len(tokens) != len(space.parameters):
        raise ConfigError(f"config key {text!r} has {len(tokens)} values; space {space.name!r} has "
                          f"{len(space.parameters)} parameters ({', '.join(space.names)})")
    config = {}
    for parameter, token in zip(space.parameters, tokens):
        matches = [value for value in parameter.values if str(value) == token]
        if not matches:
            raise ConfigError(f"config key {text!r}: {token!r} is not a value of {parameter.name} "
                              f"({', '.join(map(str, parameter.values))})")
        config[parameter.name] = matches[0]
    return config


def recorded_batches(trace: pd.DataFrame) -> list[list[str]]:
    """One strategy's trace as its batches of config keys, in the order asked."""
    ordered = trace.sort_values("eval_index")
    return [list(group.config_key) for _, group in ordered.groupby("batch", sort=True)]


def redrive(strategy: Strategy, trace: pd.DataFrame) -> Redrive:
    """Ask `strategy` batch by batch, telling it the trace's results, while each batch is the trace's next one.
    `trace`: one strategy's rows of a live trace (eval_index, batch, config_key, status, latency_ms, time_s)."""
    rows = trace.sort_values("eval_index").set_index("config_key")
    asked: list[str] = []
    answered_batches, outcome = 0, "trace ended"
    for expected in recorded_batches(trace):
        batch = strategy.ask()
        if not batch:
            outcome = "stopped"
            break
        keys = [key_text(strategy.space.key(config)) for config in batch]
        if keys != expected:
            outcome = "diverged"
            break
        strategy.tell([_result(config, rows.loc[key]) for config, key in zip(batch, keys)])
        asked += keys
        answered_batches += 1
    else:
        if not strategy.ask():
            outcome = "stopped"
    answered = rows.loc[asked]
    ok = answered[answered.status == Status.OK.value]
    return Redrive(outcome, len(asked), answered_batches, float(answered.time_s.max()) if asked else 0.0,
                   float(ok.latency_ms.min()) if len(ok) else math.inf)


def _result(config: Config, row: pd.Series) -> Result:
    status = Status.parse(row.status)
    if status is Status.OK:
        return Result(dict(config), status, latency_ms=float(row.latency_ms), repeats_ms=(float(row.latency_ms),))
    return Result(dict(config), status)
