"""tunebench: a workbench for finding fast GPU kernel configurations with few, cheap measurements.

Subpackages: `space` (config spaces), `kernels` (Triton kernels), `measure` (live and replay evaluators,
datasets), `search` (strategies behind one ask/tell protocol).
"""

__version__ = "0.1.0"
