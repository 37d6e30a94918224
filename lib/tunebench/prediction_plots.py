"""Figures of the config-prediction notebook: the distribution of per-shape efficiency over held-out shapes, for
several pickers, with CK Tile's published P10 and min marked for orientation."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from matplotlib.axes import Axes

# CK Tile's dispatcher, published (fp16 on gfx950, their protocol and candidates): P10 and min efficiency.
CK_MARKS = {"CK P10": 0.9805, "CK min": 0.9545}


def plot_efficiency_cdf(axis: Axes, curves: Mapping[str, np.ndarray], left: float) -> Axes:
    """One step curve per picker: the share of shapes whose efficiency is at or below x, from `left` to 1 (further
    right is better). The title counts the shapes left of the axis."""
    if not 0 < left < 1:
        raise ValueError(f"left must lie in (0, 1), got {left!r}")
    below = {}
    for label, efficiency in curves.items():
        values = np.sort(np.asarray(efficiency, dtype=float))
        axis.step(values, np.arange(1, len(values) + 1) / len(values), where="post", label=label)
        below[label] = int((values < left).sum())
    for name, value in CK_MARKS.items():
        axis.axvline(value, color="grey", linestyle=":", linewidth=1)
        axis.text(value, 0.02, name, rotation=90, color="grey", ha="right")
    counted = ", ".join(f"{label} {count}" for label, count in below.items() if count)
    axis.set(xlabel="efficiency (best latency / latency of the pick)", ylabel="share of shapes at or below",
             xlim=(left, 1.005),
             title=f"shapes below {left:.0%} (left of the axis): {counted}" if counted else "every shape is on the axis")
    axis.legend(loc="upper left")
    return axis
