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


def compile_and_launch(monkeypatch, module, kernel_name: str, config: dict, shape: tuple, dtype: str = "float16"):
    """`module.compile_only` then `module.run` of `config` at `shape` (CPU inputs) with `module.<kernel_name>` replaced
    by a recorder: the (args, keyword args) that warmup and the launch were given, in that order."""
    recorder = LaunchRecorder()
    monkeypatch.setattr(module, kernel_name, recorder)
    module.compile_only(config, shape, dtype)
    module.run(config, module.make_inputs(shape, dtype, "cpu"))
    return recorder.calls["warmup"], recorder.calls["launch"]
