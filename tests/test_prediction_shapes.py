"""The prediction datasets' shapes against the seeded draws that made them (benchmarks/hinted_shapes.py,
benchmarks/odd_shapes.py, benchmarks/both_hinted_shapes.py, benchmarks/narrow_hinted_shapes.py,
benchmarks/model_projection_shapes.py, benchmarks/unaligned_check_shapes.py and, for the H200 transfer set,
benchmarks/h200_shapes.py; the H200's own training shapes, benchmarks/h200_training_shapes.py): the list in kernels/matmul.py must be what the draws give, in measured order; and the picks
frozen for the checks' draws (benchmarks/preregistered_picks.py) are never overwritten and score as committed."""

import os
import subprocess
import sys
from math import gcd
from pathlib import Path

import pytest

from tunebench.kernels import matmul
from tunebench.measure.dataset import load_dataset

REPOSITORY = Path(__file__).resolve().parent.parent


def run_script(name: str, *arguments: str) -> subprocess.CompletedProcess:
    paths = [str(REPOSITORY / "lib"), os.environ.get("PYTHONPATH", "")]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.run([sys.executable, str(REPOSITORY / "benchmarks" / name), *arguments], cwd=REPOSITORY,
                          env=environment, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("arguments", [("hinted_shapes.py",), ("odd_shapes.py", "--check"),
                                       ("both_hinted_shapes.py", "--check"), ("narrow_hinted_shapes.py", "--check"),
                                       ("model_projection_shapes.py", "--check"),
                                       ("unaligned_check_shapes.py", "--check"), ("h200_shapes.py", "--check"),
                                       ("h200_training_shapes.py", "--check")])
def test_the_listed_shapes_are_the_seeded_draws(arguments):
    completed = run_script(*arguments)
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_the_odd_draw_has_an_odd_n_or_k_unless_its_pattern_says_hinted():
    lines = run_script("odd_shapes.py").stdout.split()
    shapes = [tuple(int(size) for size in shape.split("x")) for line in lines for shape in line.split(",")]
    assert len(shapes) == 160 and len(set(shapes)) == 160
    hinted_both = [shape for shape in shapes if all(gcd(size, 16) in (2, 4, 8) for size in shape[1:])]
    assert len(hinted_both) == 160 // 8  # one (hinted, hinted) per cycle of 8; every other has N or K odd
    assert all(shape[1] % 2 or shape[2] % 2 for shape in shapes if shape not in hinted_both)
    assert not set(shapes) & set(matmul.DATASET_SHAPES)


def test_the_both_hinted_draw_hints_n_and_k_and_is_new():
    lines = run_script("both_hinted_shapes.py").stdout.split()
    shapes = [tuple(int(size) for size in shape.split("x")) for line in lines for shape in line.split(",")]
    assert len(shapes) == len(set(shapes)) == 64
    assert all(gcd(n, 16) in (2, 4, 8) and gcd(k, 16) in (2, 4, 8) for _, n, k in shapes)
    assert not set(shapes) & (set(matmul.DATASET_SHAPES) | set(matmul.PREDICTION_SHAPES[:505]))


def test_the_narrow_hinted_draw_has_n_and_k_odd_multiples_of_2_or_4_and_is_new():
    lines = run_script("narrow_hinted_shapes.py").stdout.split()
    shapes = [tuple(int(size) for size in shape.split("x")) for line in lines for shape in line.split(",")]
    assert len(shapes) == len(set(shapes)) == 128
    assert all(gcd(n, 16) in (2, 4) and gcd(k, 16) in (2, 4) for _, n, k in shapes)
    assert not set(shapes) & (set(matmul.DATASET_SHAPES) | set(matmul.PREDICTION_SHAPES[:569]))


def test_the_model_projection_draw_is_real_layers_and_new():
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    import model_projection_shapes as draw

    layers = {draw.projection_nk(model, projection, degree) for model in draw.MODELS
              for projection in draw.PROJECTIONS for degree in draw.TENSOR_PARALLEL} - {None}
    assert draw.projection_nk("Llama-3.1-8B", "qkv", 1) == (6144, 4096)  # (32 + 2 x 8) heads of 128
    assert draw.projection_nk("Qwen2.5-7B", "down", 4) == (3584, 4736)  # row parallel: K = 18944 / 4
    lines = run_script("model_projection_shapes.py").stdout.split()
    shapes = [tuple(int(size) for size in shape.split("x")) for line in lines for shape in line.split(",")]
    assert len(shapes) == len(set(shapes)) == draw.COUNT
    assert all((n, k) in layers and 1 <= m <= 8192 for m, n, k in shapes)
    assert not set(shapes) & (set(matmul.DATASET_SHAPES) | set(matmul.PREDICTION_SHAPES[:697]))


def test_the_live_check_continues_the_model_projection_draw_with_layers_no_dataset_holds():
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    import live_check_shapes
    import model_projection_shapes as draw

    completed = run_script("live_check_shapes.py", "--first", "0", "--count", "12")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    shapes = [tuple(int(size) for size in shape.split("x")) for shape in completed.stdout.split()[0].split(",")]
    assert shapes == live_check_shapes.shapes_after_draw(0, 12)
    assert live_check_shapes.shapes_after_draw(5, 7) == shapes[5:]  # the same stream, wherever it starts
    listed = matmul.PREDICTION_SHAPES[draw.narrow_hinted_draw_end():][:draw.COUNT]
    continued = draw.draw(set(matmul.PREDICTION_SHAPES[:draw.narrow_hinted_draw_end()]) | set(matmul.DATASET_SHAPES),
                          draw.COUNT + 12)
    assert continued[:draw.COUNT] == list(listed) and continued[draw.COUNT:] == shapes
    layers = {draw.projection_nk(model, projection, degree) for model in draw.MODELS
              for projection in draw.PROJECTIONS for degree in draw.TENSOR_PARALLEL} - {None}
    assert all((n, k) in layers for _, n, k in shapes)
    assert not set(shapes) & (set(matmul.PREDICTION_SHAPES) | live_check_shapes.recorded_shapes())
    refused = run_script("live_check_shapes.py", "--count", "0")
    assert refused.returncode == 2 and "--count 0" in refused.stderr


def test_the_unaligned_check_draw_has_n_or_k_off_multiples_of_16_and_is_new():
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    import unaligned_check_shapes as draw

    lines = run_script("unaligned_check_shapes.py").stdout.split()
    shapes = [tuple(int(size) for size in shape.split("x")) for line in lines for shape in line.split(",")]
    assert len(shapes) == len(set(shapes)) == draw.COUNT
    assert all(n % 16 or k % 16 for _, n, k in shapes)
    assert sum(n % 2 == 1 and k % 2 == 1 for _, n, k in shapes) == draw.COUNT // len(draw.PATTERN)  # (odd, odd)
    earlier = matmul.PREDICTION_SHAPES[:draw.model_projection_draw_end()]
    assert not set(shapes) & (set(matmul.DATASET_SHAPES) | set(earlier))


def test_the_fresh_check_alternates_real_model_layers_and_unaligned_shapes_none_measured_and_as_batched():
    """`fresh_check_shapes.py`: a projection of a listed model, then a shape with N or K off multiples of 16; none in
    the prediction or default shapes; its committed batch files are the draw grouped by compiled binary, the largest
    group first."""
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    import fresh_check_shapes as draw
    import model_projection_shapes

    shapes = draw.draw(set(matmul.PREDICTION_SHAPES[:draw.unaligned_draw_end()]) | set(matmul.DATASET_SHAPES))
    assert len(set(shapes)) == len(shapes) == draw.COUNT
    layers = {model_projection_shapes.projection_nk(model, projection, parallel)
              for model in model_projection_shapes.MODELS for projection in model_projection_shapes.PROJECTIONS
              for parallel in model_projection_shapes.TENSOR_PARALLEL}
    assert all((n, k) in layers for _, n, k in shapes[0::2])
    assert all(n % 16 or k % 16 for _, n, k in shapes[1::2])
    assert not set(shapes) & (set(matmul.PREDICTION_SHAPES) | set(matmul.DATASET_SHAPES))
    batches = sorted(draw.BATCH_DIR.glob("batch_*.txt"))
    listed = [tuple(map(int, line.split("x"))) for path in batches for line in path.read_text().split()]
    assert listed == draw.sitting_order(shapes) and sorted(listed) == sorted(shapes)
    binaries = [matmul.specialization(shape) for shape in listed]
    assert all(binaries.index(b) == first for first, b in enumerate(binaries) if b != binaries[first - 1])  # grouped
    assert binaries[:48] == [binaries[0]] * 48  # the 48 layers share one binary: N and K multiples of 16


def test_the_h200_draw_is_balanced_and_new():
    """Each batch of 16 holds 7 hinted, 7 odd and 2 aligned H100 prediction shapes, none of the first 22."""
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    import h200_shapes
    from tunebench.predict.evaluation import alignment

    shapes = h200_shapes.draw()
    assert len(set(shapes)) == len(shapes) == h200_shapes.BATCHES * h200_shapes.BATCH
    assert set(shapes) <= set(matmul.PREDICTION_SHAPES) and not set(shapes) & set(h200_shapes.FIRST)
    for start in range(0, len(shapes), h200_shapes.BATCH):
        kinds = [alignment(n, k) for _, n, k in shapes[start:start + h200_shapes.BATCH]]
        assert {kind: kinds.count(kind) for kind in set(kinds)} == h200_shapes.PER_BATCH


def test_the_h200_training_draw_is_new_unaligned_and_of_m_8_up():
    """No shape measured on either GPU before; N or K off multiples of 16; M >= 8."""
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    import h200_training_shapes
    from tunebench.predict.evaluation import alignment

    shapes = h200_training_shapes.draw()
    assert len(set(shapes)) == len(shapes) == h200_training_shapes.COUNT
    assert not set(shapes) & (set(matmul.PREDICTION_SHAPES) | set(matmul.DATASET_SHAPES))
    assert all(alignment(n, k) != "aligned" and m >= h200_training_shapes.MIN_M for m, n, k in shapes)


def test_frozen_picks_are_never_overwritten(tmp_path):
    picks = tmp_path / "picks.csv"
    picks.write_text("frozen\n")
    completed = run_script("preregistered_picks.py", "freeze", "--picks", str(picks))
    assert completed.returncode != 0 and "never overwritten" in completed.stderr
    assert picks.read_text() == "frozen\n"


@pytest.mark.parametrize("draw", ["model_projection", "unaligned", "fresh"])
def test_nothing_is_frozen_once_every_drawn_shape_is_measured(tmp_path, monkeypatch, draw):
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    import preregistered_picks

    module = preregistered_picks.DRAWS[draw][0]
    monkeypatch.setattr(module, "draw", lambda taken: list(matmul.PREDICTION_SHAPES[-3:]))
    picks = tmp_path / "picks.csv"
    with pytest.raises(SystemExit, match=f"nothing to freeze; raise COUNT in {module.__name__}.py"):
        preregistered_picks.freeze(preregistered_picks.PREDICTOR, picks, draw)
    assert not picks.exists()


def test_scoring_the_frozen_picks_gives_the_committed_per_shape_efficiencies(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPOSITORY / "benchmarks"))
    import preregistered_picks

    results = REPOSITORY / "results" / "config_prediction"
    dataset = load_dataset(preregistered_picks.DATASET)  # loaded once for both files
    for picks, per_shape in [("preregistered_picks.csv", "preregistered_per_shape.csv"),
                             ("preregistered_picks_793.csv", "preregistered_793_per_shape.csv")]:
        preregistered_picks.score(results / picks, dataset, preregistered_picks.DATASET.name, tmp_path / "report.md",
                                  tmp_path / per_shape)
        assert (tmp_path / per_shape).read_text() == (results / per_shape).read_text()
