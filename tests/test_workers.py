"""Worker processes: a crash or a hang costs one request and the worker comes back; a pool closes within one timeout,
and a worker dies with the process that started it."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunebench.measure.workers import Worker, WorkerDied, WorkerTimedOut, close_all, start_worker_server


def _toy_handler():
    def handle(request):
        if request == "crash":
            os._exit(7)
        if request == "hang":
            time.sleep(60)
        return request * 2

    return handle


def _environment_handler():
    return os.environ.get


def test_a_worker_runs_with_the_environment_it_was_made_with_not_the_servers(monkeypatch):
    """Workers are forked from a server started earlier, with the environment of then; a worker must see this
    process's (a fresh TRITON_CACHE_DIR per run, say), as it was when the worker was made, restarts included."""
    start_worker_server(wait=True)
    monkeypatch.setenv("TUNEBENCH_WORKER_TEST", "when made")
    worker = Worker(_environment_handler, name="environment")
    monkeypatch.setenv("TUNEBENCH_WORKER_TEST", "later")
    try:
        assert worker.call("TUNEBENCH_WORKER_TEST", timeout_s=60) == "when made"
        worker.restart()
        assert worker.call("TUNEBENCH_WORKER_TEST", timeout_s=60) == "when made"
    finally:
        worker.close()


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


def _slow_to_start_handler():
    time.sleep(60)
    return _toy_handler()


def test_closing_workers_waits_once_for_all_of_them():
    """Closing a bench closes every worker: those still starting, or busy with a compile, must not cost one timeout
    each (14 compile workers at 5 s each could hold up the end of a sweep, or of an interrupted one, for 70 s)."""
    workers = [Worker(_slow_to_start_handler, name=f"slow-{i}") for i in range(4)]
    started = time.monotonic()
    close_all(workers, timeout_s=1.5)
    assert time.monotonic() - started < 4.5  # one at a time would take 6 s
    assert not any(worker.process.is_alive() for worker in workers)


def test_a_busy_worker_dies_with_the_process_that_started_it(tmp_path):
    """A collector killed outright (SIGKILL) must not leave its workers compiling or timing for nobody: a worker busy
    with a request is killed with its parent, not when its request ends."""
    pid_file = tmp_path / "worker.pid"
    parent = f"""
import sys, time; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from test_workers import _toy_handler
from tunebench.measure.workers import Worker
worker = Worker(_toy_handler, name="busy")
assert worker.call(1, timeout_s=60) == 2
worker.submit("hang")
open({str(pid_file)!r}, "w").write(str(worker.process.pid))
time.sleep(120)
"""
    process = subprocess.Popen([sys.executable, "-c", parent])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not pid_file.exists():
        time.sleep(0.1)
    time.sleep(0.5)  # the worker is inside its 60 s request
    process.kill()
    process.wait()
    worker = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(worker):
        time.sleep(0.1)
    assert not _alive(worker), "the worker went on after its parent was killed"


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_server_imports_what_the_main_script_imports_so_a_worker_does_not(tmp_path):
    """Each worker runs the main script again; the server has imported the modules the script's names come from, so
    that costs the worker no imports (a benchmark importing pandas, scikit-learn and optuna cost each of 15 workers
    2 to 3 s)."""
    log = tmp_path / "imported_by.txt"
    (tmp_path / "counted.py").write_text(f"import os\nopen({str(log)!r}, 'a').write(f'{{os.getpid()}}\\n')\n")
    script = tmp_path / "script.py"
    script.write_text(f"""
import json, sys
sys.path[:0] = [{str(tmp_path)!r}, {str(Path(__file__).resolve().parent)!r}]
from pathlib import Path
import counted
from test_workers import _toy_handler
from tunebench.measure.workers import Worker, main_script_modules, start_worker_server

if __name__ == "__main__":
    start_worker_server(wait=True)
    worker = Worker(_toy_handler)
    assert worker.call(1, timeout_s=60) == 2
    print(json.dumps({{"modules": sorted(main_script_modules()), "worker": worker.process.pid}}))
    worker.close()
""")
    completed = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    answer = json.loads(completed.stdout.strip().splitlines()[-1])
    assert {"counted", "json", "sys", "pathlib", "test_workers", "tunebench.measure.workers"} <= set(answer["modules"])
    importers = log.read_text().split()
    assert str(answer["worker"]) not in importers and len(importers) == 2  # this script, then the server
