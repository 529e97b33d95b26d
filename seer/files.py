"""Writing files that other processes may read meanwhile (profile tables, their metadata, models)."""
from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path


def replace_atomically(path: Path, data: bytes) -> None:
    """``path`` holds ``data``, or what it held before if the process dies while writing: ``data`` is
    written beside it, then moved in its place, so that a reader never finds it half written. A link
    is followed (its target is replaced, not the link), a replaced file keeps its permissions, and
    a write that fails leaves no partial file behind."""
    replace_together({path: data})


def replace_together(files: dict[Path, bytes]) -> None:
    """:func:`replace_atomically` for files that describe each other (a model and its rules): every
    one is written beside its target first, and only then are they moved in place, so a write that
    fails (a full disk) leaves every target as it was rather than some new and some old."""
    moves = []  # (partial, target)
    try:
        for path, data in files.items():
            target = Path(os.path.realpath(path))
            # One partial file per writing process and thread: two merges, or two saves, may run at once.
            partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
            moves.append((partial, target))
            partial.write_bytes(data)
            if target.exists():
                shutil.copymode(target, partial)
        for partial, target in moves:
            os.replace(partial, target)
    finally:
        for partial, _ in moves:
            partial.unlink(missing_ok=True)
