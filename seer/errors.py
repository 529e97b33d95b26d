"""Exceptions seer raises. Each names the problem and, where there is one, the fix."""


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
