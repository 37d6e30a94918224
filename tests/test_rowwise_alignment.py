"""The row-wise kernels' alignment hint (`rowwise.compile_arguments`' ALIGN) under the interpreter: it divides the
row strides as well as the column count, so rows of a wider tensor get the hint their stride allows."""

import pytest
import torch

from tunebench.kernels import layernorm, rowwise, softmax

from test_layernorm import IN_REGISTERS, STREAMED  # valid in both kernels' spaces (checked below)


def test_the_hint_is_the_largest_of_8_4_2_dividing_cols_and_strides():
    assert rowwise.compile_arguments(STREAMED, 5000, 5000, 5000)["ALIGN"] == 8
    assert rowwise.compile_arguments(STREAMED, 4100)["ALIGN"] == 4
    assert rowwise.compile_arguments(STREAMED, 5000, 5002, 5000)["ALIGN"] == 2
    assert rowwise.compile_arguments(STREAMED, 4096, 4096, 4096)["ALIGN"] == 1  # Triton's own specialization sees 16
    assert rowwise.compile_arguments(STREAMED, 37)["ALIGN"] == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU tests of each kernel cover hinted shapes")
@pytest.mark.parametrize("kernel", [layernorm, softmax], ids=["layernorm", "softmax"])
@pytest.mark.parametrize("row_stride, hint", [(56, 8), (42, 2)])
@pytest.mark.parametrize("config", [STREAMED, IN_REGISTERS], ids=["streamed", "in_registers"])
def test_rows_of_a_wider_tensor_take_the_hint_of_their_stride(kernel, config, row_stride, hint):
    """Rows of 40 columns in tensors `row_stride` wide: a stride of 42 takes 2, not the 8 that 40 alone would allow
    (which would read the wrong rows); without the hint the result is the same."""
    kernel.config_space().check(config)
    inputs = kernel.make_inputs((3, 40), "float32", "cpu", seed=7)
    inputs.x = torch.randn((3, row_stride), generator=torch.Generator().manual_seed(8))[:, :40]
    inputs.out = torch.full((3, row_stride), float("nan"))[:, :40]
    assert rowwise.compile_arguments(config, 40, row_stride, row_stride)["ALIGN"] == hint
    expected = kernel.reference(inputs)
    assert kernel.relative_error(kernel.run(config, inputs), expected) <= kernel.TOLERANCE["float32"]
    hinted = inputs.out.clone()
    inputs.out.fill_(float("nan"))
    assert torch.equal(kernel.run(config, inputs, hint=False), hinted)
