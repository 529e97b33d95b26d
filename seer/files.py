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
    target = Path(os.path.realpath(path))
    # One partial file per writing process and thread: two merges, or two saves, may run at once.
    partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    try:
        partial.write_bytes(data)
        if target.exists():
            shutil.copymode(target, partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
