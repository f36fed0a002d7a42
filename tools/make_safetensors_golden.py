"""Writes tests/data/safetensors/mixed.safetensors with the reference `safetensors`
package, so test_safetensors checks our reader against an independent writer.

Run from the repository root:
    /work/venv/bin/python tools/make_safetensors_golden.py

Tensors (values are exact in their dtype; test_safetensors.c hard-codes the same list):
    f32_mat   F32  [2, 3]     0.5 * i - 1        for i = 0..5
    f32_cube  F32  [2, 2, 2]  i * 0.25 + 100     for i = 0..7
    f16_vec   F16  [4]        1, -2, 0.5, 65504
    bf16_mat  BF16 [2, 2]     1, -2, 3.5, 0.15625
    bf16_zero BF16 [0, 3]     (no data)
    f32_scalar F32 []         -7.25
"""
import os

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                   "safetensors", "mixed.safetensors")


def main():
    tensors = {
        "f32_mat": (torch.arange(6, dtype=torch.float32) * 0.5 - 1).reshape(2, 3),
        "f32_cube": (torch.arange(8, dtype=torch.float32) * 0.25 + 100).reshape(2, 2, 2),
        "f16_vec": torch.tensor([1, -2, 0.5, 65504], dtype=torch.float16),
        "bf16_mat": torch.tensor([[1, -2], [3.5, 0.15625]], dtype=torch.bfloat16),
        "bf16_zero": torch.zeros(0, 3, dtype=torch.bfloat16),
        "f32_scalar": torch.tensor(-7.25, dtype=torch.float32),
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(tensors, OUT, metadata={"format": "pt"})
    print(OUT, os.path.getsize(OUT), "bytes")


if __name__ == "__main__":
    main()
