"""A benchmark script's command line refused: its `main` run with given arguments must exit with argparse's status 2
before doing any work; returns what it printed to stderr, for the test to check the message."""

import sys
from typing import Callable

import pytest


def refusal(main: Callable[[], int], argv: list[str], monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    return capsys.readouterr().err
