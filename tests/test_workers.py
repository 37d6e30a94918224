"""Worker processes: a crash or a hang costs one request, and the worker comes back."""

import os
import time

import pytest

from tunebench.measure.workers import Worker, WorkerDied, WorkerTimedOut


def _toy_handler():
    def handle(request):
        if request == "crash":
            os._exit(7)
        if request == "hang":
            time.sleep(60)
        return request * 2

    return handle


def test_worker_survives_crash_and_hang():
    worker = Worker(_toy_handler, name="toy")
    try:
        assert worker.call(21, timeout_s=60) == 42
        with pytest.raises(WorkerDied, match="exit code 7"):
            worker.call("crash", timeout_s=60)
        assert worker.call(1, timeout_s=60) == 2
        with pytest.raises(WorkerTimedOut, match="within 1 s"):
            worker.call("hang", timeout_s=1)
        assert worker.call(5, timeout_s=60) == 10
        assert worker.restarts == 2
    finally:
        worker.close()
