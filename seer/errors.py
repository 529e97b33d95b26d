"""Exceptions seer raises. Each names the problem and, where there is one, the fix."""
import sys
import warnings


class SeerError(Exception):
    """Base class of every error seer raises on purpose."""


class InputError(SeerError, ValueError):
    """An input to an op has the wrong shape, dtype, device or contents."""


class ModelError(SeerError):
    """A model file is missing, corrupted, of an unknown schema or for another op."""


class ProfileTableError(SeerError, ValueError):
    """A profile table does not follow the documented format."""


class SeerWarning(UserWarning):
    """A documented fallback was taken (foreign model, dropped profile rows, ...)."""


def warn(message: str, category: type[Warning] = SeerWarning) -> None:
    """Warn at the first frame outside seer (its modules live in several source folders: seer/,
    kernels/, datasets/, ...), so that the warning names the caller's line; a ``stacklevel``
    counted by hand points into seer wherever a path adds or drops a call."""
    frame, level = sys._getframe(0), 1
    while frame is not None and _in_seer(frame.f_globals.get("__name__", "")):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def _in_seer(module: str) -> bool:
    return module == "seer" or module.startswith("seer.")
