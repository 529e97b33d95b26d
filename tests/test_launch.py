"""Launch specialisation keys keep apart what Triton compiles apart, and the direct launch's
assumptions about Triton's launcher hold (no kernel runs here)."""
import ast
import inspect
import textwrap

import pytest
import torch

from seer.launch import LAUNCHER_LAYOUT, InputLaunches, LaunchCache, specialisation, vector_operands


def test_ints_past_32_bits_get_their_own_key():
    # Triton passes such an int as a 64-bit parameter: a kernel compiled for 32 bits would wrap.
    assert specialisation(2**31 - 16) == specialisation(32)
    assert specialisation(2**31 - 16) != specialisation(2**31 + 16)
    assert specialisation(-(2**31)) != specialisation(-(2**31) - 16)


def test_ones_multiples_of_16_and_pointer_alignment_are_told_apart():
    assert len({specialisation(1), specialisation(16), specialisation(17)}) == 3
    base = torch.empty(8)
    assert specialisation(base) != specialisation(base[1:])
    assert specialisation(base) != specialisation(base.double())


def test_vector_operands_tell_apart_dtype_alignment_and_stride():
    base = torch.empty(64)
    y = torch.empty(16)
    keys = {vector_operands(x, y)[0] for x in (base[:16], base[1:17], base[::2][:16], base.double()[:16])}
    assert len(keys) == 4
    key, x_at, x_stride, y_at, y_stride = vector_operands(base[::2], y)
    assert (x_at, x_stride, y_at, y_stride) == (base.data_ptr(), 2, y.data_ptr(), 1)


def _positional_names(source: str, call: str) -> list[str]:
    """The argument expressions of the first ``call(...)`` in ``source``, as written."""
    tree = ast.parse(textwrap.dedent(source))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == call:
            return [ast.unparse(a) for a in node.args]
    raise AssertionError(f"{call}(...) not found")


@pytest.mark.skipif(LAUNCHER_LAYOUT is None, reason="this Triton's launcher layout is not known: compiled.run is used")
def test_the_known_launcher_layout_matches_this_tritons_launcher():
    """direct_launch calls the launcher's C entry with the arguments its Python wrapper would pass:
    check the wrapper's call on the installed Triton (the GPU tests run the entry itself)."""
    from triton.backends.nvidia.driver import CudaLauncher

    passed = _positional_names(inspect.getsource(CudaLauncher.__call__), "self.launch")
    common = ["gridX", "gridY", "gridZ", "stream", "function", "self.launch_cooperative_grid", "self.launch_pdl"]
    if LAUNCHER_LAYOUT == "arguments in a tuple":
        expected = common + ["kernel_metadata", "launch_metadata", "launch_enter_hook", "launch_exit_hook",
                             "global_scratch", "profile_scratch", "self.arg_annotations", "self.kernel_signature"]
        assert passed[:-1] == expected and passed[-1] in ("args", "kernel_args")
    else:
        assert passed == common + ["global_scratch", "profile_scratch", "*args"]


def test_input_launches_keep_launch_options_apart(monkeypatch):
    """Two launches of one kernel on one input that differ only in num_warps must not share code:
    the second compiles its own, and each later launch runs its own."""
    import seer.launch as launch

    class Compiled:  # what Triton's first launch returns; the direct path needs these names, a handle loaded
        run = packed_metadata = None
        function = 0x7F00

        def __init__(self, warps):
            self.warps = warps

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, num_warps: Compiled(num_warps)

    ran = []
    monkeypatch.setattr(launch, "INTERPRETING", False)
    monkeypatch.setattr(launch, "direct_launch", lambda compiled: lambda grid_x, args, grid_y=1: ran.append(compiled.warps))
    cache = LaunchCache(Kernel())
    launches = {warps: InputLaunches(cache, ("matrix",), {"num_warps": warps}) for warps in (4, 8)}
    for warps in (4, 8, 4, 8):  # the first two compile, the last two launch directly
        launches[warps].launch(("x",), 1, (), ())
    assert len(cache._ready) == 2 and ran == [4, 8]


def test_input_launches_pass_a_second_grid_dimension_both_ways(monkeypatch):
    """Split-K's grid is (tiles, slices): its first launch (Triton's path) and every later direct one
    get both dimensions."""
    import seer.launch as launch

    class Compiled:
        run = packed_metadata = None
        function = 0x7F00

    grids, direct = [], []

    class Kernel:
        def __getitem__(self, grid):
            grids.append(grid)
            return lambda *args: Compiled()

    monkeypatch.setattr(launch, "INTERPRETING", False)
    monkeypatch.setattr(launch, "direct_launch", lambda compiled: lambda grid_x, args, grid_y=1: direct.append(
        (grid_x, grid_y)))
    launches = InputLaunches(LaunchCache(Kernel()), ("problem",), {})
    for _ in range(2):
        launches.launch(("aligned",), 7, (), (), 3)
    launches.launch(("aligned",), 5, (), ())
    assert grids == [(7, 3)] and direct == [(7, 3), (5, 1)]


def test_launches_through_tritons_path_take_turns():
    """Triton publishes a kernel's launcher before it loads the kernel's function handle, and a thread
    launching meanwhile launched handle 0 (an H200 under triton 3.9): seer's launches through
    Triton's path, which compile and load, run one thread at a time."""
    import threading
    import time

    from seer import launch

    inside, most = [0], [0]

    class Kernel:
        def __getitem__(self, grid):
            def run(*args, **options):
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                time.sleep(0.02)  # long enough for every other thread to arrive
                inside[0] -= 1
            return run

    kernel = Kernel()
    cache = LaunchCache(kernel)
    workers = [threading.Thread(target=launch.through_triton, args=(kernel, (1,), i)) for i in range(3)]
    workers += [threading.Thread(target=cache.first_launch, args=(("input", i), (1,), (i,), {})) for i in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert most[0] == 1


def test_a_kernel_whose_handle_is_not_loaded_gets_no_direct_launch(monkeypatch):
    """A direct launch keeps the function handle it was made with: made from a handle still 0 it
    would fail on every call, so that launch stays on Triton's path until the handle is there."""
    from seer import launch

    class Compiled:
        run = packed_metadata = object()
        function = 0

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args: Compiled

    monkeypatch.setattr(launch, "INTERPRETING", False)
    monkeypatch.setattr(launch, "direct_launch", lambda compiled: "direct")
    cache = LaunchCache(Kernel())
    cache.first_launch("key", (1,), (), {})
    assert cache.ready("key") is None
    Compiled.function = 0x7F00
    cache.first_launch("key", (1,), (), {})
    assert cache.ready("key") == "direct"


def test_the_library_launches_jit_kernels_only_through_through_triton():
    """``kernel[grid](...)`` written anywhere in seer would skip the turns above."""
    import importlib
    import pkgutil

    import triton

    import seer
    import seer.features
    import seer.kernels

    found = []
    for package in (seer, seer.kernels, seer.features):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for node in ast.walk(ast.parse(inspect.getsource(module))):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                        and isinstance(node.func.value, (ast.Name, ast.Attribute))
                        and isinstance(getattr(module, ast.unparse(node.func.value), None),
                                       triton.runtime.KernelInterface)):
                    found.append(f"{info.name}, line {node.lineno}")
    assert not found, f"launched without seer.launch.through_triton: {found}"


def test_triton_3_6s_interpreter_beside_numpy_2_4_is_named():
    """Found running the CPU suite under triton 3.6 with numpy 2.4.6: 594 tests failed with a
    TypeError from inside Triton; numpy 2.3.5 ran them."""
    from seer.launch import interpreter_conflict

    assert "numpy<2.4 or triton>=3.7" in interpreter_conflict("3.6.0", "2.4.6")
    assert interpreter_conflict("3.6.0", "2.3.5") is None
    assert interpreter_conflict("3.7.1", "2.4.6") is None
    assert interpreter_conflict("3.9.0", "2.5.2") is None


def test_on_device_switches_only_to_another_gpu_of_several(monkeypatch):
    import contextlib

    from seer import launch

    current, gpus = [0], [2]

    class Switch:  # stands for torch.cuda.device
        def __init__(self, index):
            self.index = index

    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: current[0], raising=False)
    monkeypatch.setattr(torch.cuda, "device", Switch)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus[0])
    switch = launch.on_device(torch.device("cuda", 1))
    assert isinstance(switch, Switch) and switch.index == 1
    for device in (torch.device("cuda", 0), torch.device("cpu")):
        assert isinstance(launch.on_device(device), contextlib.nullcontext)
    gpus[0] = 1
    assert isinstance(launch.on_device(torch.device("cuda", 1)), contextlib.nullcontext)
