"""The draw of a held-out check after the whole re-recording: real-model layers (`model_projection_shapes.py`'s
generator) and shapes with N or K off multiples of 16 (`unaligned_check_shapes.py`'s pattern), alternating, each with
its own seed, none of them measured before; prints them in batches of BATCH; `--write-batches` writes them grouped by
compiled binary, the order the sittings measure them in.

Run: `.venv/bin/python benchmarks/fresh_check_shapes.py [--write-batches]` (well under a second); `--check` exits 1
unless the shapes of `matmul.PREDICTION_SHAPES` after the unaligned draw are whole batches of this draw;
`--save-measured h100 D.parquet` saves the shapes the sittings' journals finished as one dataset.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import model_projection_shapes
import unaligned_check_shapes
from hinted_shapes import draw_shapes, later_draw_main
from odd_shapes import SIZES
from rerecord_progress import journal_dataset
from rerecord_sitting import CONFIGS
from tunebench.collect import read_records
from tunebench.files import write_text_atomically
from tunebench.kernels import matmul
from tunebench.measure.dataset import save_dataset

SEED = 2047  # the layers' stream; the unaligned shapes' is SEED + 1
COUNT = 96  # the first check of the predictor fitted on the whole re-recording (1,897 shapes) beside the one before
BATCH = 16
BATCH_DIR = Path(__file__).resolve().parents[1] / "results" / "config_prediction" / "fresh"


def draw(taken: set[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """COUNT shapes: a real-model layer, then an unaligned shape, and so on (each stream continues as COUNT grows)."""
    layers = model_projection_shapes.draw(taken, COUNT // 2, seed=SEED)
    unaligned = draw_shapes(SEED + 1, COUNT // 2, unaligned_check_shapes.PATTERN, SIZES, taken | set(layers))
    return [shape for pair in zip(layers, unaligned) for shape in pair]


def unaligned_draw_end() -> int:
    """The index in matmul.PREDICTION_SHAPES just past the unaligned draw (this draw follows it)."""
    return unaligned_check_shapes.model_projection_draw_end() + unaligned_check_shapes.COUNT


def sitting_order(shapes: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The shapes grouped by compiled binary (`matmul.specialization`), the binary most shapes share first, in draw
    order within each: a fresh machine compiles all 600 candidates once per binary it meets (about 26 s each), so a
    sitting cut short has measured whole groups, not one shape of every binary."""
    binaries = [matmul.specialization(shape) for shape in shapes]
    counts = {binary: binaries.count(binary) for binary in binaries}
    order = sorted(range(len(shapes)), key=lambda i: (-counts[binaries[i]], binaries[i], i))
    return [shapes[i] for i in order]


def write_batches(directory: Path = BATCH_DIR) -> list[Path]:
    """The draw's shapes in `sitting_order`, as `directory`/batch_NN.txt (one MxNxK a line), for
    `rerecord_sitting.py --batch-dir`."""
    start = unaligned_draw_end()
    ordered = sitting_order(draw(set(matmul.PREDICTION_SHAPES[:start]) | set(matmul.DATASET_SHAPES)))
    paths = []
    for number, first in enumerate(range(0, len(ordered), BATCH), start=1):
        path = directory / f"batch_{number:02d}.txt"
        write_text_atomically(path, "".join(f"{m}x{n}x{k}\n" for m, n, k in ordered[first:first + BATCH]))
        paths.append(path)
    return paths


def save_measured(tag: str, out: Path, directory: Path = BATCH_DIR, configs: list[dict] | None = None) -> int:
    """The shapes the sittings on GPU model `tag` finished (every one of `configs`, by default the 600 candidates; the
    vendor row; the screen's full pass), from `directory`'s journals, saved as one dataset at `out` for
    `preregistered_picks.py score`; how many."""
    configs = json.loads(CONFIGS.read_text()) if configs is None else configs
    records = [record for journal in sorted(directory.glob(f"batch_*_{tag}.journal.jsonl.gz"))
               for record in read_records(journal)]
    if not records:
        raise SystemExit(f"no batch_*_{tag}.journal.jsonl.gz in {directory}")
    dataset = journal_dataset(records, configs)
    save_dataset(dataset, out)
    return len(dataset.shapes())


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--save-measured":
        print(f"{save_measured(sys.argv[2], Path(sys.argv[3]))} shapes saved to {sys.argv[3]}")
        return 0
    if "--write-batches" in sys.argv[1:]:
        for path in write_batches():
            print(path)
        return 0
    return later_draw_main(__doc__.split("\n\n")[0], draw, unaligned_draw_end(), BATCH)


if __name__ == "__main__":
    raise SystemExit(main())
