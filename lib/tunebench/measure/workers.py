"""Replaceable worker processes that serve requests over a pipe, so that a crash or a hang costs one request.

Workers are started with the `spawn` method: a forked child would inherit the parent's CUDA state.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import time
from typing import AbstractSet, Any, Callable

Handler = Callable[[Any], Any]


class WorkerDied(RuntimeError):
    """The worker process exited while serving a request."""


class WorkerTimedOut(RuntimeError):
    """The worker did not answer within the deadline and was killed."""


def _serve(connection: multiprocessing.connection.Connection, make_handler: Callable[[], Handler],
           cpus: AbstractSet[int] | None) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)
    handler = make_handler()
    while True:
        try:
            request = connection.recv()
        except EOFError:
            return
        if request is None:
            return
        connection.send(handler(request))


class Worker:
    """A long-lived child process running `make_handler()` once, then answering one request at a time; with `cpus`,
    the process runs on those CPU cores only."""

    def __init__(self, make_handler: Callable[[], Handler], name: str = "worker",
                 cpus: AbstractSet[int] | None = None) -> None:
        self._make_handler = make_handler
        self.name = name
        self.cpus = frozenset(cpus) if cpus else None
        self.restarts = 0
        self._start()

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child_end = context.Pipe()
        self.process = context.Process(target=_serve, args=(child_end, self._make_handler, self.cpus), name=self.name, daemon=True)
        self.process.start()
        child_end.close()
        self.busy_since: float | None = None

    def submit(self, request: Any) -> None:
        """Send a request; the answer is read with `receive`."""
        self.connection.send(request)
        self.busy_since = time.monotonic()

    def receive(self, timeout_s: float | None = None) -> Any:
        """The answer to the last request; kills and restarts the worker on a timeout or a death."""
        try:
            ready = self.connection.poll(timeout_s)
        except (EOFError, OSError):
            ready = True
        if not ready:
            self.restart()
            raise WorkerTimedOut(f"{self.name} gave no answer within {timeout_s:.0f} s")
        try:
            answer = self.connection.recv()
        except (EOFError, OSError):
            self.process.join(timeout=5)  # the pipe closes a moment before the exit code is known
            exit_code = self.process.exitcode
            self.restart()
            raise WorkerDied(f"{self.name} exited (exit code {exit_code}) while serving a request") from None
        self.busy_since = None
        return answer

    def call(self, request: Any, timeout_s: float | None = None) -> Any:
        self.submit(request)
        return self.receive(timeout_s)

    def restart(self) -> None:
        """Replace the process; whatever it held (a broken CUDA context, say) is gone."""
        self._kill()
        self.restarts += 1
        self._start()

    def _kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=10)
        self.connection.close()

    def close(self) -> None:
        """Ask the worker to finish; kill it if it does not."""
        try:
            self.connection.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.process.join(timeout=5)
        self._kill()


def wait_any(workers: list[Worker], timeout_s: float) -> list[Worker]:
    """The busy workers that have an answer (or have died) within `timeout_s`."""
    by_connection = {worker.connection: worker for worker in workers}
    ready = multiprocessing.connection.wait(list(by_connection), timeout=timeout_s)
    return [by_connection[connection] for connection in ready]
