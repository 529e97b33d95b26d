"""Launching a compiled Triton kernel again without Triton's per-call binding.

``kernel[grid](*args)`` binds every argument, computes a specialisation key, looks the compiled
kernel up and only then launches: about 20 us of host time on an H100 host with triton 3.6,
more than the GPU time of a small SpMV. Once seer has decided what to run on an input, most
arguments are fixed, so :class:`LaunchCache` keeps a direct launch per *specialisation* (Triton
compiles separate code for 16-byte-aligned pointers, for integers equal to 1 or divisible by 16,
and for integers past 32 bits), which calls the compiled kernel's launcher through its C entry
(:func:`direct_launch`). :class:`InputLaunches` finds them for one input by the per-call
operands' part of the key alone. The first launch of each specialisation, and every launch under
the interpreter, goes through Triton's normal path.
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading
from typing import Callable

import torch
import triton

from seer.errors import InputError, no_memory_error, warn

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"


def interpreter_conflict(triton_version: str, numpy_version: str) -> str | None:
    """What keeps this Triton's interpreter from running seer's kernels with this numpy, or None.
    Triton 3.6's interpreter takes a program id as an int through ``int()`` of a one-element
    array, which numpy 2.4 refuses (3.7 squeezes it first): every kernel then fails with a
    TypeError naming neither."""
    def release(version: str) -> tuple:
        return tuple(int(part) for part in version.split(".")[:2])

    if release(triton_version) == (3, 6) and release(numpy_version) >= (2, 4):
        return (f"triton {triton_version}'s interpreter (TRITON_INTERPRET=1) cannot run with numpy "
                f"{numpy_version}: every kernel will fail with 'only 0-dimensional arrays can be converted "
                "to Python scalars'; install numpy<2.4 or triton>=3.7")
    return None


if INTERPRETING:
    import numpy

    if (conflict := interpreter_conflict(triton.__version__, numpy.__version__)) is not None:
        warn(conflict)
# How the C entry of the Triton launcher's (``CompiledKernel.run``) takes its arguments, for the
# versions checked (tests/test_launch.py reads the launcher's source for the order): 3.6 builds
# one module per kernel whose entry takes the kernel's arguments spread out; 3.7 to 3.9 have one
# entry for every kernel, taking them as a tuple after the kernel's signature. None: unknown.
LAUNCHER_LAYOUT = {"3.6": "arguments spread", "3.7": "arguments in a tuple", "3.8": "arguments in a tuple",
                   "3.9": "arguments in a tuple"}.get(".".join(triton.__version__.split(".")[:2]))


def check_runnable(device: torch.device) -> None:
    """CPU inputs run under the interpreter only, which Triton reads when a kernel is defined: set
    after seer was imported, its kernels are compiled ones, which fail on CPU tensors obscurely."""
    if device.type != "cpu":
        return
    now = os.environ.get("TRITON_INTERPRET") == "1"
    if not (now and INTERPRETING):
        when = "it was set after seer was imported" if now else "it is not set"
        raise InputError("inputs are on the CPU; seer's Triton kernels run on CUDA GPUs, or on the CPU only under "
                         f"the Triton interpreter: set TRITON_INTERPRET=1 before importing seer ({when})")


# Triton launches, and seer's direct launches, go to the current CUDA device, which torch's own ops
# do not assume: an input on another GPU would be read across the link or fault. Where the process
# sees several GPUs, seer makes the input's GPU current around its launches, as torch's device
# guards do; with one GPU there is nothing to check and the calls stay as they are.
def several_gpus() -> bool:
    return torch.cuda.is_initialized() and torch.cuda.device_count() > 1


def capturing() -> bool:
    """Whether the current stream is capturing a CUDA graph. is_initialized first: no stream captures
    before CUDA is initialised, and the query needs CUDA."""
    return torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()


def on_device(device: torch.device):
    """A context in which ``device`` is the current CUDA device: a no-op where it already is, where
    it is not a GPU, or where the process sees one GPU at most."""
    if device.type == "cuda" and several_gpus() and device.index != torch._C._cuda_getDevice():
        return torch.cuda.device(device.index)
    return contextlib.nullcontext()


def specialisation(*values) -> tuple:
    """What Triton specialises on for these arguments: pointer alignment; for ints, == 1, % 16 and
    whether they fit 32 bits (past 2**31 the parameter becomes 64-bit: nnz of a large matrix).
    One comprehension: every first call on a new input computes a few keys."""
    return tuple([(v.dtype, v.data_ptr() % 16 == 0) if isinstance(v, torch.Tensor)
                  else (v == 1, v % 16 == 0, -2**31 <= v < 2**31) if isinstance(v, int) and not isinstance(v, bool)
                  else v for v in values])


def vector_operands(x: torch.Tensor, y: torch.Tensor) -> tuple:
    """``(key, x address, x stride, y address, y stride)`` of a launch's two per-call vectors.

    ``key`` is their share of the launch specialisation, read once with the addresses and strides
    the launch passes: dtypes, 16-byte alignment and exact strides (a finer key than Triton's
    ``== 1``, ``% 16``, so never a wrong one)."""
    try:
        x_at, y_at = x.data_ptr(), y.data_ptr()
    except RuntimeError:
        raise no_memory_error("spmv", "A @ x") from None
    x_stride, y_stride = x.stride()[0], y.stride()[0]  # stride() then [0]: a third of stride(0)'s host time
    if x_stride > 1 or y_stride > 1:
        _check_offsets(x, x_stride, "x")
        _check_offsets(y, y_stride, "out")
    return (x.dtype, x_at % 16 == 0, x_stride, y.dtype, y_at % 16 == 0, y_stride), x_at, x_stride, y_at, y_stride


def _check_offsets(vector: torch.Tensor, stride: int, name: str) -> None:
    """Raise if an element of ``vector`` lies 2**31 or more elements past its first: the kernels
    index vectors with 32-bit offsets (an index times the stride), which would wrap."""
    if (vector.shape[0] - 1) * stride >= 2**31:
        raise InputError(f"{name} has stride {stride}: its last element lies {(vector.shape[0] - 1) * stride:,} "
                         f"elements past its first, beyond the kernels' 32-bit offsets; pass {name}.contiguous()"
                         + (" and copy the result back" if name == "out" else ""))


def addresses(args: tuple) -> tuple:
    """``args`` with every tensor replaced by its device address (for ``direct_args`` of arguments
    fixed per matrix: worked out once, with the plan that holds the tensors)."""
    return tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args)


# Pretend SM count under the CPU interpreter: small, so that persistent programs loop and grids
# sized by SMs take their several-program paths in tests.
INTERPRETER_SMS = 4


# Triton (3.6 to 3.9) stores a compiled kernel's launcher before it loads the kernel's function
# handle (``CompiledKernel._init_handles``), and the load lets other threads run: a thread launching
# the same kernel meanwhile launches handle 0, "invalid resource handle" (tests/test_dispatch_gpu.py's
# threads failed so under triton 3.9 on an H200). seer's launches through Triton's own path, the only
# ones that compile and load, therefore take turns; direct launches, of kernels loaded, do not wait.
_TRITON_PATH = threading.Lock()


def through_triton(kernel, grid: tuple, *args, **options):
    """``kernel[grid](*args, **options)`` (compiling and loading if needed), one thread at a time;
    returns the compiled kernel."""
    with _TRITON_PATH:
        return kernel[grid](*args, **options)


@functools.lru_cache(maxsize=None)
def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device (cached), or :data:`INTERPRETER_SMS` elsewhere."""
    if device.type != "cuda":
        return INTERPRETER_SMS
    return torch.cuda.get_device_properties(device).multi_processor_count


def cdiv(a: int, b: int) -> int:
    """Ceiling division on host ints (``triton.cdiv`` is a constexpr function in newer Tritons,
    ~3 us a call: more than a small kernel's launch budget)."""
    return -(-a // b)


class LaunchCache:
    """Compiled launchers of one jit kernel, keyed by the caller's specialisation key.

    ``args`` are every kernel parameter in order, constexprs included (the launcher skips them);
    ``options`` are Triton launch options (``num_warps``, ...), which must not change for a key.
    ``direct_args``, if given, are ``args`` with every tensor replaced by its address, and the
    direct path passes them instead: Triton's launcher takes an int pointer as is, where a tensor
    costs a ``data_ptr()`` call and a driver query of the address, ~0.45 us of host time each
    (``benchmarks/results/launch-pointers-h100.md``). The caller has checked the devices.
    Grids have one or two dimensions.
    """

    def __init__(self, kernel):
        self.kernel = kernel
        self._ready: dict = {}

    def launch(self, key, grid: tuple, args: tuple, direct_args: tuple | None = None, **options) -> None:
        ready = self.ready(key)
        if ready is None:
            self.first_launch(key, grid, args, options)
        else:
            ready(grid[0], args if direct_args is None else direct_args, *grid[1:])

    def ready(self, key) -> Callable | None:
        """The direct launch compiled for ``key`` (called as ``ready(grid_x, direct_args[, grid_y])``), or None
        before the first launch of ``key`` and always under the interpreter."""
        return None if INTERPRETING else self._ready.get(key)

    def first_launch(self, key, grid: tuple, args: tuple, options: dict) -> None:
        """Triton's own launch (compiling if needed); keeps the direct launch of what it compiled."""
        compiled = through_triton(self.kernel, grid, *args, **options)
        if not INTERPRETING and _launchable(compiled):
            self._ready[key] = direct_launch(compiled)


class InputLaunches:
    """The direct launches of one kernel on one input whose part of the specialisation is fixed,
    found by the per-call operands' part alone: a short flat key instead of the whole nested
    specialisation on every call. Kept with the input's cached plan."""

    def __init__(self, cache: LaunchCache, input_key, options: dict):
        # The options (num_warps, ...) compile different code: they are part of every key.
        self.cache, self.input_key, self.options = cache, (input_key, tuple(sorted(options.items()))), options
        self._ready: dict = {}

    def launch(self, operand_key, grid_x: int, args: tuple, direct_args: tuple, grid_y: int = 1) -> None:
        ready = self._ready.get(operand_key)
        if ready is None:
            key = (self.input_key, operand_key)
            ready = self.cache.ready(key)
            if ready is None:
                self.cache.first_launch(key, (grid_x, grid_y), args, self.options)
                return
            self._ready[operand_key] = ready
        ready(grid_x, direct_args, grid_y)


def direct_launch(compiled) -> Callable:
    """``launch(grid_x, args, grid_y=1)`` of a compiled kernel on the current stream.

    Where this Triton's launcher layout is known (:data:`LAUNCHER_LAYOUT`) and the kernel needs no
    scratch memory, it calls the launcher's C entry, skipping its Python wrapper (which only
    allocates that scratch memory; ~1.5 us of host time a launch, ``benchmarks/results/
    host-path-h100.md``); otherwise ``compiled.run``. Launch hooks are not called: Triton calls
    none unless a profiler has set one. Triton settings changed after a kernel's first launch (its
    debug flag, say) reach only kernels launched first after the change."""
    launcher = compiled.run
    plain = (not getattr(launcher, "global_scratch_size", 1) and not getattr(launcher, "profile_scratch_size", 1)
             and not getattr(launcher, "gsan_enabled", False))
    if plain and LAUNCHER_LAYOUT is not None:
        entry = launcher.launch
        head = (compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl)
        if LAUNCHER_LAYOUT == "arguments in a tuple":
            fixed = (*head, compiled.packed_metadata, None, None, None, None, None,
                     launcher.arg_annotations, launcher.kernel_signature)

            def launch(grid_x: int, args: tuple, grid_y: int = 1) -> None:
                entry(grid_x, grid_y, 1, current_stream(), *fixed, args)
        else:
            fixed = (*head, None, None, compiled.packed_metadata, None, None, None)

            def launch(grid_x: int, args: tuple, grid_y: int = 1) -> None:
                entry(grid_x, grid_y, 1, current_stream(), *fixed, *args)
        return launch

    def launch(grid_x: int, args: tuple, grid_y: int = 1) -> None:
        launcher(grid_x, grid_y, 1, current_stream(), compiled.function, compiled.packed_metadata, None, None, None,
                 *args)
    return launch


def current_stream() -> int:
    """torch's current stream on the current device, as Triton launches on (read through torch's
    C bindings: ``torch.cuda.current_device()`` adds a Python call and an initialisation check)."""
    return torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice())


def _launchable(compiled) -> bool:
    """The compiled-kernel attributes the direct path needs (triton 3.2 to 3.9 have them), its
    function handle loaded (a handle of 0 kept in a direct launch would fail every launch)."""
    return all(hasattr(compiled, name) for name in ("run", "function", "packed_metadata")) and bool(compiled.function)
