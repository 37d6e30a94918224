"""benchmarks/decoder_sass.py: finding the innermost loop in SASS, its argument errors, and, compiled here with the
installed Triton for sm_90, a stream decoder loop free of shared-memory layout conversions."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "decoder_sass.py"

SASS = """
.L_x_0:
        /*0000*/                   IADD3 R1, R1, 0x1, RZ ;
        /*0010*/                   LDG.E.U16 R2, desc[UR4][R2.64] ;
        /*0020*/                   IADD3 R3, R3, 0x1, RZ ;
        /*0030*/                   BRA `(.L_x_1) ;
.L_x_1:
        /*0040*/                   LDG.E R4, desc[UR4][R4.64] ;
        /*0050*/                   IMAD R5, R4, R4, RZ ;
        /*0060*/               @P0 STG.E desc[UR4][R6.64], R5 ;
        /*0070*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0080*/                   LDS.U8 R7, [R8] ;
        /*0090*/               @P1 BRA `(.L_x_1) ;
        /*00a0*/              @!P2 BRA `(.L_x_0) ;
.L_x_2:
        /*00b0*/                   BRA `(.L_x_2);
"""


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("decoder_sass", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["decoder_sass"] = module
    spec.loader.exec_module(module)
    return module


def test_the_innermost_loop_is_found_and_the_trap_loop_skipped(script):
    assert script.loop_opcodes(SASS) == ["LDG.E", "IMAD", "STG.E", "BAR.SYNC.DEFER_BLOCKING", "LDS.U8", "BRA"]
    with pytest.raises(ValueError, match="no loop"):
        script.loop_opcodes(SASS.split(".L_x_1:")[0])


@pytest.mark.parametrize("argv, message", [(["--outputs", "fp8"], "unknown output 'fp8'"),
                                           (["--num-warps", "3"], "--num-warps 3 is not allowed")])
def test_bad_arguments_are_named(script, argv, message, tmp_path):
    with pytest.raises(SystemExit, match=message):
        script.main(argv + ["--out-dir", str(tmp_path)])


def test_the_stream_loop_has_no_layout_conversion_and_writes_a_bf16_pair_at_once(script, tmp_path):
    """Triton 3.6 put a shared-memory conversion (BAR, LDS, STS) in stop 72's loop; lane pairs left none. The register
    cap (32 where N is even) spills nothing in the loop."""
    # In a process of its own: the tests run Triton's interpreter, which cannot compile for a GPU.
    environment = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    environment["PYTHONPATH"] = str(SCRIPT.parents[1] / "lib")
    subprocess.run([sys.executable, str(SCRIPT), "--outputs", "codes,bfloat16", "--out-dir", str(tmp_path)],
                   env=environment, check=True, capture_output=True)
    rows = {(row["output"], row["N"]): row
            for row in json.loads(next(tmp_path.glob("decoder_sass_triton*.json")).read_text())["rows"]}
    assert set(rows) == {("codes", "even"), ("bfloat16", "even"), ("bfloat16", "odd")}
    assert all(row["BAR"] == row["LDS"] == row["STS"] == 0 for row in rows.values())
    assert all(row["LDL"] == row["STL"] == 0 for row in rows.values())  # no register spilled in the loop
    steps = rows["codes", "even"]["steps_a_loop"]
    assert steps == 2  # the default layout's codes have at most 8 bits: the buffers are topped up every other step
    assert rows["codes", "even"]["memory_opcodes"].get("STG.E.U16") == steps
    assert rows["bfloat16", "even"]["memory_opcodes"].get("STG.E") == 2 * steps  # a row's two weights in one store
    assert next(tmp_path.glob("decoder_sass_triton*.md")).read_text().startswith("# The stream decoder's loop in SASS")
