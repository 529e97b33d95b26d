"""Finding the CUDA libraries torch has already loaded, for the few calls torch does not expose."""
from __future__ import annotations

from collections.abc import Iterable

_DELETED = " (deleted)"  # the kernel's mark on a mapped file since removed from its folder


def loaded_library(name: str) -> str | None:
    """The path of a shared library whose file name starts with ``name`` mapped into this process."""
    try:
        with open("/proc/self/maps") as maps:
            return library_in_maps(maps, name)
    except OSError:  # no /proc: not Linux
        return None


def library_in_maps(lines: Iterable[str], name: str) -> str | None:
    """The first mapped path of ``/proc/<pid>/maps`` ``lines`` whose file name starts with ``name``.

    A line is address, permissions, offset, device, inode and then the path, which may hold spaces."""
    for line in lines:
        fields = line.rstrip("\n").split(maxsplit=5)
        if len(fields) < 6:  # an anonymous mapping
            continue
        path = fields[5].removesuffix(_DELETED)
        if path.rsplit("/", 1)[-1].startswith(name):
            return path
    return None
