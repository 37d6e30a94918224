"""The dispatcher: a trained ranker that picks a config for an unseen GEMM shape, saved with a JSON header.

`Predictor.model_scores` scores every candidate with the model (sklearn), and `Predictor.scores` adds the correction
from the nearest training shapes' out-of-fold errors (`predict.neighbours`) and re-orders the top 10 with the pairwise
head (`predict.head`); `Predictor.best_config` is the fast path: it scores a shortlist (the top configs of the
corrected scores at the grid shapes around the query, `predict.shortlist`) with the same trees compiled to flat numpy
arrays, every model's in one walk (`predict.forest`; of a ranker split by alignment class, `predict.split`, only the
query's group's trees), because sklearn's predict pays about 10-20 us per tree per call whatever the number of rows.
`Predictor.timed_best_config` spends k measurements: it times the model's top k and keeps the fastest.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
import warnings
import zlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import sklearn

from tunebench.kernels import get_kernel, kernel_source_sha256, matmul
from tunebench.measure.dataset import recorded_kernel_sources
from tunebench.measure.result import Evaluator, Result
from tunebench.predict.compiled import CompiledResources
from tunebench.predict.evidence import COLUMNS as EVIDENCE_COLUMNS, NeighbourEvidence
from tunebench.predict.features import CandidateFeatures, Hardware, check_dtype, feature_names, features
from tunebench.predict.forest import CompiledForest, check_threads, default_threads
from tunebench.predict.head import HEAD_SIZE, HeadLists, PairwiseHead, head_lists, select_head
from tunebench.predict.model import ConfigRanker, RankerSettings, TrainingData, portfolio, restrict
from tunebench.predict.neighbours import NeighbourCorrection, one_shape_coordinates, select_correction
from tunebench.predict.shortlist import GridShortlist, build_shortlist, grid_axes
from tunebench.predict.split import check_split, row_groups, shape_group
from tunebench.space import Space, parameter_from_spec

MAGIC = b"TUNEBENCH-PREDICTOR 1\n"
# 9: the ranker may carry a config profile; 8: the ranker may be split by alignment class; 7: the head reads
# neighbour evidence; 6: the ranker is a list of models, averaged; 5: the payload is zlib-compressed; 4: the shortlist
# grid ranks the corrected scores, and the pairwise head; 3: with the neighbour correction; 2: the shortlist is a grid
# of the model's own top lists
FORMAT_VERSION = 9
READABLE_VERSIONS = (5, 6, 7, 8, 9)  # a format-5 file holds one model: it loads as a ranker of one; a file before 7
# has a head without neighbour evidence; a file before 8 has no alignment split; before 9, no config profile
# Configs `timed_best_config` measures by default: on the H100 prediction dataset, timing the model's top 10 and
# keeping the fastest scored 99.22 % mean efficiency when re-timed side by side (results/config_prediction/retime.md).
TIMED_TOP_K = 10
PAYLOAD_COMPRESSION_LEVEL = 9  # zlib: the payload shrinks about threefold, loading stays well under a second


class PredictorError(ValueError):
    """A predictor file that is malformed, or that does not fit the kernel, GPU, dtype or feature code asked for."""


class StaleTrainingWarning(UserWarning):
    """A predictor trained on timings of other kernel code than the current code's: where the kernel changed, its
    picks follow the old code's speeds."""


@dataclass(frozen=True)
class TimedPick:
    """The fastest of the configs measured for one shape, and every measurement in the model's order (best-ranked
    first)."""

    config: dict[str, int]
    latency_ms: float
    results: tuple[Result, ...]


def checked_shape(shape: Sequence[int]) -> tuple[int, int, int]:
    """(M, N, K) as Python ints, numpy integers accepted; a clear error for anything else or a dimension < 1."""
    return matmul.check_shape(tuple(int(size) if isinstance(size, np.integer) else size for size in shape))


class Predictor:
    """A trained ranker over a fixed candidate set, for one kernel, dtype and GPU; it picks among the `portfolio`
    (indices into the candidates, chosen on the training shapes). `resources`: the compiler's facts of the
    candidates, which the features read; `correction`: the neighbour correction added to the model's scores (None:
    the model alone); `head`: the pairwise re-ranker of the top of the corrected ranking (None: no re-ranking);
    `evidence`: the training shapes' measurements the head reads beside the features (None: a head trained without);
    `threads`: how many threads `best_config` walks the trees in (1 to `forest.PARTS`; the same picks for any)."""

    def __init__(self, ranker: ConfigRanker, space: Space, candidates: np.ndarray, *, kernel: str, dtype: str,
                 gpu: str, hardware: Hardware, resources: CompiledResources, shortlist: GridShortlist,
                 portfolio: np.ndarray, correction: NeighbourCorrection | None = None,
                 head: PairwiseHead | None = None, evidence: NeighbourEvidence | None = None,
                 header: Mapping[str, Any] | None = None, threads: int = 1) -> None:
        self.ranker = ranker
        self.space = space
        self.candidates = np.asarray(candidates, dtype=np.int64)
        self.portfolio = np.asarray(portfolio, dtype=np.int64)
        self.kernel, self.dtype, self.gpu, self.hardware = kernel, dtype, gpu, hardware
        self.resources = resources
        self.shortlist = shortlist
        self.correction = correction
        self.head = head
        self.evidence = evidence
        self.header = dict(header or {})
        self.threads = check_threads(threads)
        self.forests = compiled_forests(ranker)
        self.candidate_features = CandidateFeatures(self.candidates, space, dtype, resources, hardware)
        self.feature_names = feature_names(space)

    def _features(self, shape: Sequence[int], dtype: str | None, candidates: np.ndarray) -> np.ndarray:
        if dtype is not None and dtype != self.dtype:
            check_dtype(dtype)
            raise PredictorError(f"this predictor was trained for {self.dtype}, not {dtype!r}")
        return self.candidate_features.rows(checked_shape(shape), candidates)

    def with_models(self, count: int) -> Predictor:
        """The same predictor with only its ranker's first `count` models (an ablation of their average); its
        shortlist grid is still the whole average's."""
        if not 1 <= count <= len(self.ranker.models_):
            raise ValueError(f"count must be from 1 to {len(self.ranker.models_)} (the models), got {count}")
        ranker = ConfigRanker(replace(self.ranker.settings, models=count))
        ranker.models_, ranker.profile_ = self.ranker.models_[:count], self.ranker.profile_
        return Predictor(ranker, self.space, self.candidates, kernel=self.kernel, dtype=self.dtype, gpu=self.gpu,
                         hardware=self.hardware, resources=self.resources, shortlist=self.shortlist,
                         portfolio=self.portfolio, correction=self.correction, head=self.head,
                         evidence=self.evidence, header=self.header, threads=self.threads)

    def _head_wins(self, coordinates: np.ndarray, rows: np.ndarray, scores: np.ndarray,
                   candidates: np.ndarray) -> np.ndarray:
        """The head's summed wins of the listed candidates (indices), from their feature rows and first-stage scores,
        with the neighbour evidence on them when the head was trained with it (the shape's `one_shape_coordinates`
        find its neighbours)."""
        if self.evidence is not None:
            rows = np.concatenate([rows, self.evidence.for_coordinates(coordinates, candidates)], axis=-1)
        return self.head.wins(rows[None], scores[None])[0]

    def compiled_scores(self, matrix: np.ndarray) -> np.ndarray:
        """The model's scores of rows of any shapes (`ranker.matrix(features, candidates)`) by the compiled trees
        (sklearn's to rounding), each row by its alignment group's forest."""
        if len(self.forests) == 1:
            return self.forests[0].predict(matrix, self.threads)
        groups = row_groups(self.ranker.settings.alignment_split, matrix)
        scores = np.empty(len(matrix))
        for index, forest in enumerate(self.forests):
            rows = np.flatnonzero(groups == index)
            if len(rows):
                scores[rows] = forest.predict(matrix[rows], self.threads)
        return scores

    def config(self, index: int) -> dict[str, int]:
        return dict(zip(self.space.names, (int(value) for value in self.candidates[index])))

    def model_scores(self, shape: Sequence[int], dtype: str | None = None) -> np.ndarray:
        """The model's score of every candidate (higher: predicted faster), through sklearn's predict."""
        every = np.arange(len(self.candidates))
        return self.ranker.score(self.ranker.matrix(self._features(shape, dtype, every), every))

    def _corrected(self, shape: Sequence[int], dtype: str | None) -> tuple[np.ndarray, np.ndarray]:
        """Every candidate's feature rows, and its model score plus the neighbour correction."""
        every = np.arange(len(self.candidates))
        matrix = self._features(shape, dtype, every)
        scores = self.ranker.score(self.ranker.matrix(matrix, every))
        if self.correction is not None:
            scores = scores + self.correction.for_shape(checked_shape(shape))
        return matrix, scores

    def corrected_scores(self, shape: Sequence[int], dtype: str | None = None) -> np.ndarray:
        """`model_scores` plus the neighbour correction, for every candidate."""
        return self._corrected(shape, dtype)[1]

    def ranked_scores(self, shape: Sequence[int], dtype: str | None = None) -> np.ndarray:
        """`corrected_scores`, except that with a head the portfolio's top `head.settings.size` are lifted above
        every other candidate and ordered by the head's wins."""
        matrix, scores = self._corrected(shape, dtype)
        if self.head is None:
            return scores
        top = np.argsort(-restrict(scores, self.portfolio), kind="stable")[:self.head.settings.size]
        wins = self._head_wins(one_shape_coordinates(checked_shape(shape)), matrix[top], scores[top], top)
        lifted = scores.copy()
        lifted[top] = scores.max() + 1.0 + wins
        return lifted

    def scores(self, shape: Sequence[int], dtype: str | None = None) -> np.ndarray:
        """`ranked_scores`, -inf outside the portfolio: the argmax is the predicted best config."""
        return restrict(self.ranked_scores(shape, dtype), self.portfolio)

    def top_configs(self, shape: Sequence[int], k: int, dtype: str | None = None) -> list[dict[str, int]]:
        """The k candidates ranked highest (`ranked_scores`), best first: the portfolio's, then (when k is larger)
        the others'."""
        scores = self.ranked_scores(shape, dtype)
        outside = np.ones(len(scores), dtype=bool)
        outside[self.portfolio] = False
        order = np.lexsort((-scores, outside))[:k]
        return [self.config(int(index)) for index in order]

    def best_config(self, shape: Sequence[int], dtype: str | None = None) -> dict[str, int]:
        """The predicted best config: the shortlist around the shape (`predict.shortlist`, ranked by the corrected
        scores at the grid points), scored by the compiled forest plus the correction at the shape; with a head, its
        top `head.settings.size` re-ordered by the head (compiled too)."""
        shape = checked_shape(shape)
        shortlist = self.shortlist.for_shape(shape)
        matrix = self._features(shape, dtype, shortlist)
        forest = self.forests[shape_group(self.ranker.settings.alignment_split, shape)]
        scores = forest.predict(self.ranker.matrix(matrix, shortlist), self.threads)
        coordinates = one_shape_coordinates(shape)  # the correction's and the evidence's query
        if self.correction is not None:
            scores = scores + self.correction.for_coordinates(coordinates, shortlist)
        if self.head is None:
            return self.config(int(shortlist[np.argmax(scores)]))
        top = np.argsort(-scores, kind="stable")[:self.head.settings.size]
        wins = self._head_wins(coordinates, matrix[top], scores[top], shortlist[top])
        return self.config(int(shortlist[top[np.argmax(wins)]]))

    def timed_best_config(self, shape: Sequence[int], evaluator: Evaluator, k: int = TIMED_TOP_K,
                          dtype: str | None = None) -> TimedPick:
        """Prediction plus k measurements: the model's k highest-ranked candidates (`top_configs`) measured by
        `evaluator` in one batch (a LiveEvaluator on the GPU, or a ReplayEvaluator of a recorded dataset), and the
        fastest that ran. The evaluator must measure this shape."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= len(self.candidates):
            raise ValueError(f"k must be an integer from 1 to {len(self.candidates)} (the candidates), got {k!r}")
        shape = checked_shape(shape)
        measured_shape = getattr(evaluator, "shape", None)
        if measured_shape is not None and tuple(measured_shape) != shape:
            raise ValueError(f"the evaluator measures shape {tuple(measured_shape)}, not {shape}")
        configs = self.top_configs(shape, int(k), dtype)
        results = tuple(evaluator.evaluate(configs))
        ran = [result for result in results if result.ok]
        if not ran:
            failures = ", ".join(sorted({result.status.value for result in results}))
            raise RuntimeError(f"none of the model's top {k} configs ran for shape {shape} ({failures})")
        fastest = min(ran, key=lambda result: result.objective)
        return TimedPick(dict(fastest.config), float(fastest.latency_ms), results)


def compiled_forests(ranker: ConfigRanker) -> list[CompiledForest]:
    """Per group of the ranker's alignment split (one group without a split), every member's trees of that group
    compiled into one forest: a query walks only its own group's."""
    if ranker.settings.alignment_split == "none":
        return [CompiledForest(*ranker.models_)]
    groups = len(check_split(ranker.settings.alignment_split))
    return [CompiledForest(*(member.models[index] for member in ranker.models_)) for index in range(groups)]


def fit_predictor(data: TrainingData, settings: RankerSettings, shape_indices: np.ndarray | None = None,
                  header: Mapping[str, Any] | None = None,
                  shortlist_shapes: Sequence[Sequence[int]] | None = None,
                  out_of_fold_scores: np.ndarray | None = None) -> Predictor:
    """A predictor trained on the given shapes (all by default). Its shortlist grid covers the training shapes' range;
    `shortlist_shapes` limits it to the grid points around those shapes (cross-validation's test shapes: the same top
    lists, without scoring the tens of thousands of points a deployed predictor needs; () for a predictor that only
    ranks). `out_of_fold_scores` (training shapes, candidates), each shape scored by an inner model that never saw
    it (`select_ranker`'s), gives the predictor a neighbour correction whose settings `select_correction` chooses;
    without them the model scores alone; they also train the pairwise head (`predict.head`) on each training shape's
    top list, corrected from the other shapes' residuals, sized by `select_head`. The grid's top lists rank the
    corrected scores."""
    shape_indices = np.arange(len(data.shapes)) if shape_indices is None else np.asarray(shape_indices)
    ranker = ConfigRanker(settings).fit(data, data.rows_of(shape_indices))
    allowed = portfolio(data, shape_indices, settings.portfolio_size)
    resources = data.resources.restricted(data.candidates)
    correction, tried, head, head_tried, evidence = None, [], None, [], None
    if out_of_fold_scores is not None:
        correction, tried, evidence, lists = corrected_lists(data, ranker, shape_indices, out_of_fold_scores, allowed)
        head, head_tried = select_head(lists, seed=settings.random_state)

    def score(shapes: np.ndarray) -> np.ndarray:
        rows = features(np.repeat(shapes, len(allowed), axis=0), np.tile(data.candidates[allowed], (len(shapes), 1)),
                        data.space, data.dtype, resources, data.hardware)
        scores = ranker.score(ranker.matrix(rows, np.tile(allowed, len(shapes)))).reshape(len(shapes), len(allowed))
        return scores if correction is None else scores + correction.for_shapes(shapes, allowed)

    shortlist = build_shortlist(score, grid_axes(data.shapes[shape_indices]), allowed, shortlist_shapes)
    return Predictor(ranker, data.space, data.candidates, kernel=data.kernel, dtype=data.dtype, gpu=data.gpu,
                     hardware=data.hardware, resources=resources, shortlist=shortlist, portfolio=allowed,
                     correction=correction, head=head, evidence=evidence,
                     header={"training": {"shapes": data.shapes[shape_indices].tolist(),
                                          "provenance": data.provenance},
                             "correction_tried": tried, "head_tried": head_tried, **(header or {})})


def corrected_lists(data: TrainingData, ranker: ConfigRanker, shape_indices: np.ndarray,
                    out_of_fold_scores: np.ndarray, allowed: np.ndarray, size: int = HEAD_SIZE
                    ) -> tuple[NeighbourCorrection, list[dict[str, Any]], NeighbourEvidence, HeadLists]:
    """The neighbour correction chosen on the training shapes' out-of-fold scores (with what it tried), the shapes'
    measurements as neighbour evidence, and their top `size` lists by those scores corrected from the other shapes'
    residuals, with the evidence from the other shapes: what the head trains on."""
    rows = data.rows_of(shape_indices)
    shaped = (len(shape_indices), len(data.candidates))
    targets = ranker.targets(data, rows)[0].reshape(shaped)
    latency = data.latency_ms[rows].reshape(shaped)
    correction, tried = select_correction(data.shapes[shape_indices], targets, out_of_fold_scores, latency, allowed)
    weight = (data.spread[rows] <= ranker.settings.max_training_spread).astype(float).reshape(shaped)
    lists = head_lists(restrict(correction.leave_one_out(out_of_fold_scores), allowed),
                       data.features[rows].reshape(*shaped, -1), latency, weight, size)
    evidence = NeighbourEvidence(data.shapes[shape_indices], latency.min(axis=1, keepdims=True) / latency)  # inf: 0
    return correction, tried, evidence, lists.with_columns(evidence.leave_one_out(lists.candidates))


# ---------------------------------------------------------------------------------------------
# File format: MAGIC, one line of JSON header, then a zlib-compressed pickle of the models, config profile, shortlist,
# resources, correction, head and neighbour evidence
# ---------------------------------------------------------------------------------------------

def _header(predictor: Predictor, payload: bytes) -> dict[str, Any]:
    return {
        **predictor.header,
        "format_version": FORMAT_VERSION, "kernel": predictor.kernel, "dtype": predictor.dtype,
        "gpu": predictor.gpu, "hardware": asdict(predictor.hardware), "compiled_resources": predictor.resources.source,
        "feature_names": predictor.feature_names,
        "profile_names": [] if predictor.ranker.profile_ is None else predictor.ranker.profile_.names,
        "parameters": [parameter.to_spec() for parameter in predictor.space.parameters],
        "candidates": predictor.candidates.tolist(), "portfolio": predictor.portfolio.tolist(),
        "settings": asdict(predictor.ranker.settings),
        "correction": None if predictor.correction is None else asdict(predictor.correction.settings),
        "head": None if predictor.head is None else asdict(predictor.head.settings),
        "head_evidence": None if predictor.evidence is None else list(EVIDENCE_COLUMNS),
        "sklearn_version": sklearn.__version__, "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }


def save_predictor(predictor: Predictor, path: str | os.PathLike[str]) -> None:
    """Write the predictor atomically: the magic line, a JSON header line, then the models, config profile,
    shortlist, compiled resources, neighbour correction, head and neighbour evidence, pickled and zlib-compressed."""
    path = Path(path)
    content = {"models": predictor.ranker.models_, "profile": predictor.ranker.profile_,
               "shortlist": predictor.shortlist, "resources": predictor.resources,
               "correction": predictor.correction, "head": predictor.head, "evidence": predictor.evidence}
    payload = zlib.compress(pickle.dumps(content), PAYLOAD_COMPRESSION_LEVEL)
    header = json.dumps(_header(predictor, payload), sort_keys=True).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(handle, "wb") as out:
        out.write(MAGIC + header + b"\n" + payload)
    os.chmod(temporary, 0o644)  # mkstemp makes it private; a saved model is meant to be shared
    os.replace(temporary, path)


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON header of a predictor file, without unpickling anything."""
    return _read(Path(path))[0]


def _read(path: Path) -> tuple[dict[str, Any], bytes]:
    if not path.is_file():
        raise FileNotFoundError(f"no predictor file at {path}")
    with path.open("rb") as stream:
        if stream.read(len(MAGIC)) != MAGIC:
            raise PredictorError(f"{path} is not a tunebench predictor file (it does not start with {MAGIC!r})")
        try:
            header = json.loads(stream.readline())
        except json.JSONDecodeError as error:
            raise PredictorError(f"{path}: the header line is not valid JSON ({error})") from None
        payload = stream.read()
    version = header.get("format_version") if isinstance(header, dict) else None
    if version not in READABLE_VERSIONS:
        raise PredictorError(f"{path}: format_version {version!r} is not one this code reads "
                             f"({', '.join(map(str, READABLE_VERSIONS))}): fit and save the predictor again")
    return header, payload


def _warn_of_other_kernel_source(path: Path, header: Mapping[str, Any], kernel: str) -> None:
    """A StaleTrainingWarning when the training data's sittings recorded kernel source hashes other than the current
    code's (nothing where they recorded none)."""
    recorded = recorded_kernel_sources((header.get("training") or {}).get("provenance") or {})
    current = kernel_source_sha256(get_kernel(kernel))
    other = [source for source in recorded if source != current]
    if other:
        shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
        warnings.warn(f"{path} was trained on timings of {kernel} source {shown}, not of the current code "
                      f"({current}{'' if current in recorded else ', in none of its sittings'}): where the kernel's "
                      "speed changed since, its picks follow the old code's (docs/config_prediction.md, 'the recorded "
                      "split rows are stale')", StaleTrainingWarning, stacklevel=3)


def load_predictor(path: str | os.PathLike[str], *, kernel: str = matmul.NAME, gpu: str | None = None,
                   threads: int | None = None) -> Predictor:
    """Read a predictor, checking the header before unpickling: the kernel (and GPU, when given) asked for, the
    payload's checksum, and that the feature schema it was trained on is the one this code computes; `threads` as
    `Predictor`'s, by default `forest.default_threads()` (4 on a host of 8 or more usable cores, else 1). Only load
    files you trust: the payload is a pickle."""
    path = Path(path)
    header, payload = _read(path)
    if header.get("kernel") != kernel:
        raise PredictorError(f"{path} predicts for kernel {header.get('kernel')!r}, not {kernel!r}")
    if gpu is not None and header.get("gpu") != gpu:
        raise PredictorError(f"{path} was trained on GPU {header.get('gpu')!r}, not {gpu!r}")
    check_dtype(header.get("dtype"))
    _warn_of_other_kernel_source(path, header, kernel)
    if hashlib.sha256(payload).hexdigest() != header.get("payload_sha256"):
        raise PredictorError(f"{path}: the payload does not match the header's checksum (truncated or altered)")
    space = Space([parameter_from_spec(spec) for spec in header["parameters"]], name=kernel)
    expected = feature_names(space)
    if header.get("feature_names") != expected:
        stored = header.get("feature_names") or []
        differing = [f"{i}: {a!r} != {b!r}" for i, (a, b) in enumerate(zip(stored, expected)) if a != b]
        raise PredictorError(f"{path}: feature schema mismatch: the file's {len(stored)} features differ from the "
                             f"{len(expected)} this code computes ({'; '.join(differing[:3]) or 'lengths differ'})")
    content = pickle.loads(zlib.decompress(payload))
    models = content["models"] if "models" in content else [content["model"]]
    profile = content.get("profile")
    width = len(expected) + (0 if profile is None else len(profile.names))
    for model in models:
        if int(model.n_features_in_) != width:
            raise PredictorError(f"{path}: a model takes {model.n_features_in_} columns, the schema has {width} "
                                 f"({len(expected)} features and {width - len(expected)} of the config profile)")
    ranker = ConfigRanker(RankerSettings(**header["settings"]))
    if len(models) != ranker.settings.models:
        raise PredictorError(f"{path}: the payload holds {len(models)} models, the header's settings "
                             f"{ranker.settings.models}")
    if (profile is None) != (ranker.settings.profile_factors == 0):
        raise PredictorError(f"{path}: the header's profile_factors is {ranker.settings.profile_factors}, but the "
                             f"payload {'has no' if profile is None else 'has a'} config profile")
    ranker.models_, ranker.profile_ = models, profile
    return Predictor(ranker, space, np.array(header["candidates"], dtype=np.int64), kernel=kernel,
                     dtype=header["dtype"], gpu=header["gpu"], hardware=Hardware(**header["hardware"]),
                     resources=content["resources"], shortlist=content["shortlist"],
                     # a file written before portfolios existed picks among every candidate
                     portfolio=np.array(header.get("portfolio", range(len(header["candidates"]))), dtype=np.int64),
                     correction=content["correction"], head=content["head"], evidence=content.get("evidence"),
                     header={name: header[name] for name in ("training", "metrics", "correction_tried", "head_tried")
                             if name in header}, threads=default_threads() if threads is None else threads)
