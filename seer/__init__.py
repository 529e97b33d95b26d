"""seer: learned decision trees that pick the fastest GPU kernel for each input at run time."""
from seer.dispatch import Decision, cache_info, cached_decision, clear_cache, dispatch, explain, set_cache_size
from seer.errors import InputError, ModelError, ProfileTableError, SeerError, SeerWarning
from seer.registry import OPS, get_op

__version__ = "0.1.0"

__all__ = [
    "dispatch", "explain", "cached_decision", "Decision", "clear_cache", "set_cache_size", "cache_info", "get_op", "OPS",
    "SeerError", "InputError", "ModelError", "ProfileTableError", "SeerWarning", "__version__",
]
