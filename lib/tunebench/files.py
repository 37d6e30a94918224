"""Writing result files so that a reader never sees half of one: write beside the target, then rename over it.

A kill mid-write leaves the old file (or none) and a stray temporary, never a truncated result.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd


def write_text_atomically(path: str | os.PathLike[str], text: str) -> Path:
    """Write `text` to `path` (creating its folder) through a temporary file and an atomic rename; the path.

    A plain open, not mkstemp, so the file gets the umask's usual, shareable permissions."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
    return path


def write_parquet_atomically(frame: pd.DataFrame, path: str | os.PathLike[str], **options: object) -> Path:
    """Write `frame` to `path` as parquet (without its index; `options` go to `DataFrame.to_parquet`) the same way:
    through a temporary file beside it and an atomic rename; the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        frame.to_parquet(temporary, index=False, **options)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path
