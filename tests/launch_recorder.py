"""A stand-in for a Triton kernel in tests: records what `warmup` (compile_only) and a launch (run) were given, so a
test can check that compile_only builds the binary that run launches."""


class LaunchRecorder:
    """Put in place of a `@triton.jit` function; `calls["warmup"]` and `calls["launch"]` are (args, keyword args)."""

    def __init__(self) -> None:
        self.calls: dict[str, tuple] = {}

    def warmup(self, *args, grid, **kwargs):
        self.calls["warmup"] = (args, kwargs)

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.setdefault("launch", (args, kwargs))
