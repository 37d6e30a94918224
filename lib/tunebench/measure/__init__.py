"""Measuring configs: the result record, the live GPU evaluator, recorded datasets and their replay.

Every evaluator answers `evaluate(configs) -> list[Result]` and keeps a clock in seconds.
"""

from tunebench.measure.result import Evaluator, Result, Status

__all__ = ["Evaluator", "Result", "Status"]
