"""Is there a CUDA device (or numba's simulator) to run the GPU path on?

``numba.cuda`` is imported here on first use, not at module import: it is an
optional dependency (the ``gpu`` extra), loading it costs a noticeable part of
a second, and numba reads ``NUMBA_ENABLE_CUDASIM`` when it is first imported,
so ``import matchsql`` must not pin that choice.
"""

from __future__ import annotations

import ctypes
import importlib
import os
from dataclasses import dataclass
from functools import cache
from types import ModuleType

import numpy as np

NO_DEVICE = (
    "no CUDA device: install the gpu extra on a machine with an NVIDIA GPU, or set "
    "NUMBA_ENABLE_CUDASIM=1 to run the kernels in numba's simulator"
)


@dataclass(frozen=True)
class Device:
    """What the GPU path would run on."""

    present: bool  # a device or the simulator can run kernels
    simulated: bool  # numba's CUDA simulator (correct, but slow: tests only)
    name: str


@cache
def detect() -> Device:
    """The device of this process (detected once: numba fixes it at first import).

    Without numba's simulator and without NVIDIA's driver library there is no device,
    and that is known without importing numba.cuda (a third of a second, which every
    query the GPU path could run would pay under ``gpu = 'auto'``)."""
    if not _simulator_asked() and not _driver_loads():
        return Device(False, False, "none (no CUDA driver: libcuda.so.1 does not load)")
    try:
        cuda = importlib.import_module("numba.cuda")
        config = importlib.import_module("numba.core.config")
    except ImportError:
        return Device(False, False, "numba.cuda is not installed")
    simulated = bool(getattr(config, "ENABLE_CUDASIM", 0))
    try:
        present = bool(cuda.is_available())
    except Exception:  # a broken driver install reads as "no device"
        present = False
    if simulated:
        return Device(present, True, "numba CUDA simulator")
    if not present:
        return Device(False, False, "none")
    try:
        name = cuda.get_current_device().name
        name = name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        name = "CUDA device"
    return Device(True, False, name)


def _simulator_asked() -> bool:
    """``NUMBA_ENABLE_CUDASIM`` set to a true value, as numba reads it."""
    value = os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip()
    return value not in ("", "0")


def _driver_loads() -> bool:
    """Whether the CUDA driver's library loads (what numba.cuda would load first)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def array_module() -> ModuleType:
    """The array library of the device columns: CuPy on a CUDA device where it is
    installed, numpy in numba's simulator (whose kernels read host arrays)."""
    found = detect()
    if found.present and not found.simulated:
        try:
            return importlib.import_module("cupy")
        except ImportError:
            pass
    return np


def to_kernel(xp: ModuleType, array: object) -> object:
    """``array`` (of module ``xp``) as a kernel argument, without a copy where it is
    already on the device."""
    cuda = importlib.import_module("numba.cuda")
    if xp is np:
        return cuda.to_device(np.ascontiguousarray(array))
    return cuda.as_cuda_array(xp.ascontiguousarray(array))
