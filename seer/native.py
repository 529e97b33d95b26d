"""Finding the CUDA libraries torch has already loaded, for the few calls torch does not expose."""
from __future__ import annotations


def loaded_library(name: str) -> str | None:
    """The path of a shared library whose file name starts with ``name`` mapped into this process."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if path.rsplit("/", 1)[-1].startswith(name):
                    return path
    except OSError:  # no /proc: not Linux
        return None
    return None
