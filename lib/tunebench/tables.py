"""Plain Markdown tables for results files and the README, without extra dependencies.

pandas' `to_markdown` needs the `tabulate` package; these tables need nothing but pandas.
"""

from __future__ import annotations

import pandas as pd


def markdown_table(frame: pd.DataFrame, float_format: str = "{:.4g}") -> str:
    """A pipe table of `frame` (index dropped), floats written with `float_format`."""
    def cell(value: object) -> str:
        return float_format.format(value) if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "| " + " | ".join("---" for _ in frame.columns) + " |"]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)
