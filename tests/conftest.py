"""Shared test set-up: Triton kernels run under the interpreter where no GPU is present.

TRITON_INTERPRET must be set before triton is first imported, so it is set here, at collection.
"""

import os
import shutil

import pytest

if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402  (after the interpreter switch)

HAS_GPU = torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip_gpu)
