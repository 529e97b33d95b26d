"""Exceptions seer raises. Each names the problem and, where there is one, the fix."""
import contextlib
import sys
import warnings

import torch
from torch.autograd import forward_ad


class SeerError(Exception):
    """Base class of every error seer raises on purpose."""


class InputError(SeerError, ValueError):
    """An input to an op has the wrong shape, dtype, device or contents."""


class RanksRefused(InputError):
    """A multi-GPU call refused on every rank at once, each naming every rank's reason: the ranks
    heard of it together, so nothing more is owed to the peers."""


class ModelError(SeerError):
    """A model file is missing, corrupted, of an unknown schema or for another op."""


class ProfileTableError(SeerError, ValueError):
    """A profile table does not follow the documented format."""


@contextlib.contextmanager
def exit_on_seer_error(parser):
    """Within it, a :class:`SeerError` ends a ``python -m`` command as argparse ends a usage error
    (``prog: error: message`` on stderr, exit status 2): the message already says what is wrong and
    what to do, which a traceback would bury."""
    try:
        yield
    except SeerError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")


class SeerWarning(UserWarning):
    """A documented fallback was taken (foreign model, dropped profile rows, ...)."""


def warn(message: str, category: type[Warning] = SeerWarning) -> None:
    """Warn at the first frame outside seer (its modules live in several source folders: seer/,
    kernels/, datasets/, ...), so that the warning names the caller's line; a ``stacklevel``
    counted by hand points into seer wherever a path adds or drops a call. Frames of the import
    machinery are stepped over uncounted, as ``warnings.warn`` steps over them: a warning while seer
    imports its own modules names the line that imported seer."""
    frame, level = sys._getframe(0), 1
    while frame is not None and _in_seer(frame.f_globals.get("__name__", "")):
        frame, level = frame.f_back, level + 1
        while frame is not None and _is_import_machinery(frame):
            frame = frame.f_back
    warnings.warn(message, category, stacklevel=level)


def _is_import_machinery(frame) -> bool:
    """The frames ``warnings.warn`` leaves out of its ``stacklevel`` count (importlib's bootstrap)."""
    filename = frame.f_code.co_filename
    return "importlib" in filename and "_bootstrap" in filename


def warn_once(told: set, message: str, key=None) -> None:
    """:func:`warn` unless ``key`` (by default the message itself) is in ``told``, the caller's record of
    what it has said (a module's, so that each may say its own notices once and clear them)."""
    key = message if key is None else key
    if key not in told:
        told.add(key)
        warn(message)


def _in_seer(module: str) -> bool:
    return module == "seer" or module.startswith("seer.")


def overlap_error(name: str) -> InputError:
    return InputError(f"out overlaps {name} in memory (their spans, first element to last, meet: interleaved views "
                      "of one buffer count): the result cannot be written over an operand that is read to compute "
                      f"it; pass an out whose memory lies apart from {name}'s")


def no_memory_error(op: str, instead: str) -> InputError:
    """The error for an operand or out without memory of its own: a tensor inside ``torch.vmap`` (or
    another functorch transform) has no address for a kernel, and torch's own error ("Cannot access
    data pointer ...") names no cause. ``instead``: the torch op that works inside the transform."""
    return InputError(f"{op}: an operand or out has no memory of its own (a tensor inside torch.vmap or another "
                      f"functorch transform); call seer outside the transform, or {instead} inside it")


def check_not_negated(op: str, **operands) -> None:
    """Raise an :class:`InputError` for an operand whose negation torch keeps as a flag (``is_neg()``:
    e.g. ``z.conj().imag``): seer's kernels read and write the memory itself, which holds the other sign."""
    for name, operand in operands.items():
        if operand.is_neg():
            raise InputError(f"{op}: {name} is a negated view (its sign is kept as a flag, {name}.is_neg()); "
                             f"seer's kernels read memory directly: pass {name}.resolve_neg()")


def check_writable(op: str, out) -> None:
    """Raise an :class:`InputError` for an inference tensor as ``out`` outside inference mode, as torch's
    own ``out=`` does: it keeps no version counter, so a tensor made from it outside inference mode
    could not tell that it was written."""
    if out.is_inference() and not torch.is_inference_mode_enabled():
        raise InputError(f"{op}: out is an inference tensor (made under torch.inference_mode()), which torch lets "
                         "nothing write outside inference mode; call under torch.inference_mode() or pass "
                         "out.clone()")


def dual_level_open() -> bool:
    """Whether a forward-mode AD level is open (``torch.autograd.forward_ad.dual_level``): tensors may
    carry tangents there with ``requires_grad`` False, which the hot paths' checks read first."""
    return forward_ad._current_level >= 0


def check_no_grad(op: str, **operands) -> None:
    """Raise an :class:`InputError` if autograd is on and an operand requires grad, or if an operand
    carries a forward-mode tangent: seer's kernels have no derivative, so the result would come
    back cut off from the graph (or without its tangent), its derivatives silently missing."""
    if dual_level_open():
        for name, operand in operands.items():
            if forward_ad.unpack_dual(operand).tangent is not None:
                raise InputError(f"{op}: {name} carries a forward-mode tangent (torch.autograd.forward_ad), but "
                                 f"seer's kernels have no derivative, so the result would have none; pass "
                                 f"forward_ad.unpack_dual({name}).primal, or use torch's own op where tangents "
                                 "are needed")
    if not torch.is_grad_enabled():
        return
    for name, operand in operands.items():
        if operand.requires_grad:
            raise InputError(f"{op}: {name} requires grad, but seer's kernels have no backward, so gradients "
                             f"would not flow through the result; call it under torch.no_grad() (or pass "
                             f"{name}.detach()), or use torch's own op where gradients are needed")
