"""Private files of a state dir: created 0700/0600 whatever the umask, never opened through a
symlink, and only ever regular files.

Transcripts, memory and openclaw.json are the user's conversations and config: under the usual
umask 022 they were readable by every local user. Pidfile, audit log and locks are opened with
O_NOFOLLOW (a symlink planted there cannot redirect a write) and O_NONBLOCK plus a regular-file
check (a FIFO planted at the lock path hung the installer on open).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Union

from fleet.continuity.statelayout import StateLayout

DIR_MODE = 0o700
FILE_MODE = 0o600
PathLike = Union[str, Path]


class NotRegularFile(OSError):
    """A path that must be a regular file is something else (FIFO, device, symlink, dir)."""


def open_regular(path: PathLike, flags: int, mode: int = FILE_MODE) -> int:
    """`os.open` that refuses symlinks and anything but a regular file, without blocking on a
    FIFO; the returned fd is blocking again."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(str(path), flags | nofollow | os.O_NONBLOCK, mode)
    except OSError as exc:
        if nofollow and os.path.islink(str(path)):
            raise NotRegularFile(exc.errno, f"{path} is a symlink; remove it") from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"{path} is not a regular file; remove it")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_dir(path: PathLike) -> Path:
    """Create `path` (and parents) and make it 0700 when we own it (whatever the umask was)."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    tighten(p, DIR_MODE)
    return p


def tighten(path: PathLike, mode: int) -> None:
    """chmod `path` to `mode` if it exists, is ours and is looser; never follows a symlink."""
    try:
        st = os.lstat(str(path))
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
        return
    if stat.S_IMODE(st.st_mode) & ~mode:
        try:
            os.chmod(str(path), stat.S_IMODE(st.st_mode) & mode)
        except OSError:
            pass


def secure_state_dir(state_dir: PathLike) -> None:
    """Make the private parts of a state dir private: the dirs 0700, openclaw.json 0600.

    Release files (fleet/, extensions/) stay as they are: they hold code, not user data.
    """
    root = Path(state_dir)
    for name in (StateLayout.AGENTS, StateLayout.RUN, StateLayout.LOGS, "memory"):
        tighten(root / name, DIR_MODE)
    try:
        for child in root.iterdir():
            if child.name == "workspace" or child.name.startswith("workspace-"):
                tighten(child, DIR_MODE)
    except OSError:
        pass
    tighten(root / StateLayout.CONFIG, FILE_MODE)
