"""The record of one evaluation and the evaluator protocol shared by live and replay measurement.

A failure is data: it is a `Result` with a non-ok status, never an exception that ends a search.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence


class Status(str, enum.Enum):
    """How one evaluation ended; only `ok` carries a latency."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    OUT_OF_RESOURCES = "out_of_resources"
    TIMEOUT = "timeout"
    CRASH = "crash"
    WRONG_RESULT = "wrong_result"

    @classmethod
    def parse(cls, text: str) -> "Status":
        try:
            return cls(text)
        except ValueError:
            allowed = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown status {text!r}; allowed: {allowed}") from None


@dataclass(frozen=True)
class Result:
    """One config's evaluation: status, median latency and its repeats, and what it cost."""

    config: Mapping[str, Any]
    status: Status
    latency_ms: float | None = None
    repeats_ms: tuple[float, ...] = field(default=())
    compile_s: float = 0.0
    bench_s: float = 0.0
    error: str = ""

    def __post_init__(self) -> None:
        if self.status is Status.OK and (self.latency_ms is None or not math.isfinite(self.latency_ms)):
            raise ValueError(f"an ok result needs a finite latency_ms, got {self.latency_ms!r}")
        if self.status is not Status.OK and self.latency_ms is not None:
            raise ValueError(f"a {self.status.value} result carries no latency, got {self.latency_ms!r}")

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def objective(self) -> float:
        """Latency in ms to minimize; failures count as infinitely slow."""
        return self.latency_ms if self.latency_ms is not None else math.inf


class Evaluator(Protocol):
    """Measures batches of configs of one task and keeps the clock that budgets are charged on."""

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Result]:
        """Measure every config of the batch; one result per config, in order."""
        ...

    @property
    def elapsed_s(self) -> float:
        """Seconds spent so far: wall clock when live, simulated when replaying."""
        ...

    def charge(self, seconds: float) -> None:
        """Add a strategy's own CPU time to the clock (a no-op where the clock is the wall clock)."""
        ...
