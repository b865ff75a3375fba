"""Element types: numpy/torch dtypes <-> the core's DType codes. torch is imported lazily."""
from __future__ import annotations

import numpy as np

FLOAT32, FLOAT64, FLOAT16, BFLOAT16, INT32, INT64, UINT8, BOOL, INT8, INT16 = range(1, 11)

NAMES = {FLOAT32: "float32", FLOAT64: "float64", FLOAT16: "float16", BFLOAT16: "bfloat16",
         INT32: "int32", INT64: "int64", UINT8: "uint8", BOOL: "bool", INT8: "int8",
         INT16: "int16"}

_NUMPY_TO_CODE = {
    np.dtype(np.float32): FLOAT32, np.dtype(np.float64): FLOAT64, np.dtype(np.float16): FLOAT16,
    np.dtype(np.int32): INT32, np.dtype(np.int64): INT64, np.dtype(np.uint8): UINT8,
    np.dtype(np.bool_): BOOL, np.dtype(np.int8): INT8, np.dtype(np.int16): INT16,
}

# numpy dtype a raw tensor of each code is read back as (bfloat16: its bits, see to_numpy).
NUMPY_OF_CODE = {FLOAT32: np.float32, FLOAT64: np.float64, FLOAT16: np.float16,
                 BFLOAT16: np.uint16, INT32: np.int32, INT64: np.int64, UINT8: np.uint8,
                 BOOL: np.bool_, INT8: np.int8, INT16: np.int16}

_torch_map = None


def numpy_code(dtype) -> int:
    """DType code of a numpy dtype; KeyError for types the core does not know."""
    return _NUMPY_TO_CODE[np.dtype(dtype)]


def _torch_codes():
    global _torch_map
    if _torch_map is None:
        import torch
        _torch_map = {torch.float32: FLOAT32, torch.float64: FLOAT64, torch.float16: FLOAT16,
                      torch.bfloat16: BFLOAT16, torch.int32: INT32, torch.int64: INT64,
                      torch.uint8: UINT8, torch.bool: BOOL, torch.int8: INT8, torch.int16: INT16}
    return _torch_map


def torch_to_buffer(t):
    """(numpy array sharing memory with a CPU tensor, DType code, shape tuple).

    Zero-copy for contiguous CPU tensors. bfloat16 is passed as its int16 bits with code
    BFLOAT16; types the core does not know (complex, uint16...) are converted to float64.
    """
    if t.requires_grad:  # (detach() costs about as much as numpy(): only when needed)
        t = t.detach()
    shape = tuple(t.shape)
    code = (_torch_map or _torch_codes()).get(t.dtype)
    if code is None:
        import torch
        t = t.to(torch.float64) if not t.is_complex() else t.abs().to(torch.float64)
        code = FLOAT64
    if not t.is_contiguous():
        t = t.contiguous()
    if code == BFLOAT16:
        import torch
        arr = t.view(torch.int16).numpy()
    else:
        arr = t.numpy()
    return arr, code, shape


def raw_to_numpy(data: bytes, code: int, shape, bf16: str = "float32"):
    """Numpy array of a raw tensor's bytes. bfloat16 becomes float32 (exact) by default, or
    its uint16 bit patterns with bf16="uint16"."""
    arr = np.frombuffer(data, dtype=NUMPY_OF_CODE[code]).reshape(tuple(shape))
    if code == BFLOAT16 and bf16 != "uint16":
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr
