"""Replaceable worker processes that serve requests over a pipe, so that a crash or a hang costs one request.

Workers are forked from a server process (`forkserver`) that has imported the heavy modules once and never touches
CUDA; where there is none, they are spawned. Never forked from their parent, which may hold a CUDA context. On Linux a
worker dies with the process that started it, however that process dies.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from types import ModuleType
from typing import AbstractSet, Any, Callable, Iterable

Handler = Callable[[Any], Any]

_PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when the thread that started it ends
START_METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
_CONTEXT = multiprocessing.get_context(START_METHOD)


class WorkerDied(RuntimeError):
    """The worker process exited while serving a request."""


class WorkerTimedOut(RuntimeError):
    """The worker did not answer within the deadline and was killed."""


def end_with_parent(parent: int, signal_number: int = signal.SIGKILL) -> None:
    """Linux: have the kernel send this process `signal_number` when `parent` (the pid that started it) ends, however
    it ends, SIGKILL included; exit at once if it has ended already. Elsewhere: nothing."""
    if not sys.platform.startswith("linux"):
        return
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal_number) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent ended before the request took effect
        os._exit(128 + signal_number)


def start_worker_server(preload: Iterable[str] = (), wait: bool = False) -> float:
    """Start the server that workers are forked from, importing there once the modules `preload` and those of the main
    script (`main_script_modules`): torch and Triton take seconds to import, which each spawned worker paid. With
    `wait`, wait until it has, returning the seconds waited. Where the server runs already, it stays as it is: its
    workers import the modules it lacks themselves. Nothing the server imports may start CUDA. Where there is no
    `forkserver` start method, nothing: workers are spawned."""
    if START_METHOD != "forkserver":
        return 0.0
    from multiprocessing import forkserver

    started = time.monotonic()
    _CONTEXT.set_forkserver_preload(sorted({*preload, *main_script_modules()}))
    # Python passes the server this process's sys.path but never applies it: PYTHONPATH carries it instead.
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(entry for entry in sys.path if entry)
    try:
        forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    if wait:  # the server forks its first child once its imports are done
        probe = _CONTEXT.Process(target=_nothing, name="worker-server-probe")
        probe.start()
        probe.join()
    return time.monotonic() - started


def main_script_modules() -> set[str]:
    """The modules the main script's top-level names come from, and the main module where it was run by name. Every
    worker runs the main script again (as `__mp_main__`, guarded by `if __name__ == "__main__"`), which takes as long
    as its imports unless the server has imported them. (`forkserver`'s own `__main__` preload never takes effect:
    Python does not pass the server the script's path.)"""
    main = sys.modules.get("__main__")
    if main is None or not getattr(main, "__file__", None):  # an interactive session: workers import no main
        return set()
    spec = getattr(main, "__spec__", None)
    names = {spec.name} if spec is not None else set()
    for value in vars(main).values():
        name = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
        if isinstance(name, str) and name in sys.modules and not name.startswith("_"):
            names.add(name)
    return names - {"builtins"}


def _nothing() -> None:
    pass


def _end_with_starter() -> None:
    """Have this worker die with the process that started it, however that ends: a thread exits the worker when the
    starter's end shows on its sentinel; a spawned worker also has the kernel signal it when its parent ends. (A forked
    worker's parent is the fork server, which every worker it forked keeps alive.)"""
    starter = multiprocessing.parent_process()
    if starter is None:
        return
    if os.getppid() == starter.pid:
        end_with_parent(starter.pid)
    threading.Thread(target=_exit_when_ended, args=(starter.sentinel,), name="end-with-starter", daemon=True).start()


def _exit_when_ended(sentinel: int) -> None:
    multiprocessing.connection.wait([sentinel])
    os._exit(128 + signal.SIGKILL)


def _serve(connection: multiprocessing.connection.Connection, make_handler: Callable[[], Handler],
           cpus: AbstractSet[int] | None, environment: dict[str, str]) -> None:
    _end_with_starter()  # a compile or a timing left running would go on for a parent that is gone
    os.environ.clear()  # a forked worker has the server's environment, as it was when the server started
    os.environ.update(environment)
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
    the process runs on those CPU cores only. It runs with the environment this process had when the worker was made
    (restarts included). It dies with the process that made it; a spawned one (no fork server) also with the thread
    that made it: make workers from the main thread."""

    def __init__(self, make_handler: Callable[[], Handler], name: str = "worker",
                 cpus: AbstractSet[int] | None = None) -> None:
        self._make_handler = make_handler
        self.name = name
        self.cpus = frozenset(cpus) if cpus else None
        self.restarts = 0
        self.environment = dict(os.environ)
        self._start()

    def _start(self) -> None:
        self.connection, child_end = _CONTEXT.Pipe()
        arguments = (child_end, self._make_handler, self.cpus, self.environment)
        self.process = _CONTEXT.Process(target=_serve, args=arguments, name=self.name, daemon=True)
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

    def close(self, timeout_s: float = 5.0) -> None:
        """Ask the worker to finish; kill it if it does not within `timeout_s`."""
        close_all([self], timeout_s)


def close_all(workers: Iterable[Worker], timeout_s: float = 5.0) -> None:
    """Ask every worker to finish, wait for them together, and kill those still running after `timeout_s`: a pool
    closes within `timeout_s` however many of its workers are busy or still starting, not one timeout per worker."""
    workers = list(workers)
    for worker in workers:
        try:
            worker.connection.send(None)
        except OSError:  # the worker is gone already
            pass
    deadline = time.monotonic() + timeout_s
    for worker in workers:
        worker.process.join(timeout=max(0.0, deadline - time.monotonic()))
    for worker in workers:
        worker._kill()


def wait_any(workers: list[Worker], timeout_s: float) -> list[Worker]:
    """The busy workers that have an answer (or have died) within `timeout_s`."""
    by_connection = {worker.connection: worker for worker in workers}
    ready = multiprocessing.connection.wait(list(by_connection), timeout=timeout_s)
    return [by_connection[connection] for connection in ready]
