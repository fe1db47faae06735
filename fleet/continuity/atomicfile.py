"""Atomic replacement of a file or a symlink: a reader sees the old one or the new one, never half.

Write temp (beside the target, same filesystem, named by fleet.continuity.tempfiles so a dead
writer's leftovers can be swept), fsync, `os.replace`, fsync the directory. The one copy of that
sequence for the host side and the control side alike (stdlib only, a leaf: it imports nothing of
fleet but the temp-file naming).
"""

from __future__ import annotations

import contextlib
import os
from typing import Optional, Union

from fleet.continuity import tempfiles

PathLike = Union[str, "os.PathLike[str]"]


def fsync_dir(directory: PathLike) -> None:
    """Make a rename or link in `directory` durable; best effort (some filesystems refuse)."""
    try:
        dfd = os.open(str(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename is still atomic
    finally:
        os.close(dfd)


def atomic_write(path: PathLike, text: Union[str, bytes], mode: Optional[int] = None) -> None:
    """Write `text` (str as UTF-8, exact line endings; or bytes) via temp file + fsync +
    `os.replace` + dir fsync, so a crash leaves the old file or the new one, never a torn one.

    `mode` sets the permissions (the temp file is created 0600 and widened only then); by default
    the file keeps its own, and a new file gets the umask-based mode from the kernel (no
    `os.umask` round trip, which would race with other threads creating files).
    """
    p = os.fspath(path)  # a string: see tempfiles.temp_path
    parent = os.path.dirname(p) or "."
    os.makedirs(parent, exist_ok=True)
    data = text if isinstance(text, bytes) else text.encode("utf-8", errors="replace")
    if mode is None:
        try:
            mode = os.stat(p).st_mode & 0o7777
        except FileNotFoundError:
            pass
    tmp = tempfiles.temp_path(p)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if mode is not None else 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(parent)


def atomic_symlink(link: PathLike, target: PathLike, sync: bool = True) -> None:
    """Point `link` at `target` (kept as given: relative stays relative) in one `os.replace`, so
    the link always exists and names the old target or the new one. `sync=False` leaves the
    directory fsync to a caller switching several links in one directory."""
    p = os.fspath(link)
    tmp = tempfiles.temp_path(p)
    os.symlink(str(target), tmp)
    try:
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync:
        fsync_dir(os.path.dirname(p) or ".")
