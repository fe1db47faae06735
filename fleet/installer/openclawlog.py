"""The OpenClaw gateway's own log: what it says about a plugin that fails to load.

Why: before 2026.9 no gateway RPC names a plugin's load error (2026.4-2026.7 have no
`plugins.list`; 2026.8's lists the installed catalog only, `state: "enabled"` for a plugin whose
entry threw), but every release logs it as it happens, before the gateway reports ready. Read
from each release's built code (`recordPluginError` in dist/), the loader's line is

    [plugins] <id> failed to load from <source>: <error>          2026.4.24 - 2026.8.x
    [plugins] <id> failed during register from <source>: <error>  (its `register` threw)
    [plugins] <id> failed during <phase> from <source>: <error>   2026.9.x

and 2026.8 and later repeat it from the gateway's diagnostics as `[plugins] failed to load
plugin: <error> (plugin=<id>, source=<source>)` (2026.9: `plugin failed during <phase>: ...`).

Where (https://docs.openclaw.ai/logging): the gateway's console (stdout/stderr), which fleet's
supervised mode writes to `<state>/logs/fleet-openclaw-gateway.log`, and OpenClaw's file log
(JSON lines, the text in `message`): `logging.file` of openclaw.json, else
`/tmp/openclaw/openclaw-YYYY-MM-DD.log` (local date), or `<tmp>/openclaw-<uid>/` when
/tmp/openclaw is not the user's own private directory. 2026.4.24's gateway writes the default
file whatever `logging.file` says, so both are read. A `LogWatch` reads only what was written
after it started (one activation), from each file's offset at that moment, at most `MAX_READ`
bytes per file per look, so a long or busy log costs no more than what is new.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

MAX_READ = 1024 * 1024  # bytes read per file per look; the rest waits for the next look
MAX_LINE = 64 * 1024  # a longer unfinished line is dropped, not buffered
DEFAULT_DIR = Path("/tmp/openclaw")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# the loader's own line (every release): "<id> failed to load from", "<id> failed to load
# setup entry from", "<id> failed during register from", "<id> failed during load from"
_LOADER = re.compile(r"\[plugins\] (?P<id>\S+) failed (?:to load|during [\w-]+)(?: [\w-]+)*? "
                     r"from (?P<source>.+?): (?P<error>.+)")
# the gateway's diagnostic line (2026.8 and later)
_DIAGNOSTIC = re.compile(r"\[plugins\] (?:failed to load plugin|plugin failed during [\w-]+): "
                         r"(?P<error>.+) \(plugin=(?P<id>[^,\s)]+), source=(?P<source>[^)]+)\)")


def default_log_dir() -> Path:
    """Where OpenClaw puts its dated file log without `logging.file`: /tmp/openclaw unless it is
    someone else's or not a plain directory, then `<tmp>/openclaw-<uid>` (OpenClaw's own rule)."""
    try:
        st = os.lstat(str(DEFAULT_DIR))
    except OSError:
        return DEFAULT_DIR  # OpenClaw creates it
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
        return DEFAULT_DIR
    return Path(tempfile.gettempdir()) / f"openclaw-{os.getuid()}"


def file_logs(config: dict, home: Optional[str] = None,
              now: Optional[float] = None) -> List[Path]:
    """OpenClaw's file logs for `config` (openclaw.json's content) on the local date of `now`."""
    out: List[Path] = []
    logging = config.get("logging") if isinstance(config.get("logging"), dict) else {}
    configured = logging.get("file")
    if isinstance(configured, str) and configured.strip():
        path = configured.strip()
        if path.startswith("~") and home:
            path = home + path[1:]
        out.append(Path(os.path.expanduser(path)))
    day = time.strftime("%Y-%m-%d", time.localtime(now))
    out.append(default_log_dir() / f"openclaw-{day}.log")
    return out


def text_of(line: str) -> str:
    """A log line's text: the `message` of a file-log JSON record, else the line itself."""
    line = _ANSI.sub("", line.strip())
    if line.startswith("{"):
        try:
            record = json.loads(line)
        except ValueError:
            return line
        if isinstance(record, dict) and isinstance(record.get("message"), str):
            return record["message"]
    return line


def load_failures(lines: Iterable[str], plugin_ids: Sequence[str],
                  under: Sequence[str] = ()) -> Dict[str, str]:
    """{plugin id: its error} for each of `plugin_ids` that the log `lines` say failed to load.

    `under`: the directories its code was loaded from (a release's plugin dirs); a line naming
    a source elsewhere (another copy of a plugin with that id) does not count.
    """
    wanted = set(plugin_ids)
    found: Dict[str, str] = {}
    for line in lines:
        text = text_of(line)
        if "[plugins]" not in text or "fail" not in text:
            continue
        match = _LOADER.search(text) or _DIAGNOSTIC.search(text)
        if match is None or match.group("id") not in wanted or match.group("id") in found:
            continue
        if under and not _within(match.group("source").strip(), under):
            continue
        found[match.group("id")] = match.group("error").strip()
    return found


def _within(source: str, dirs: Sequence[str]) -> bool:
    """Whether `source` (a path as OpenClaw logs it) lies in one of `dirs`, symlinks resolved."""
    if not source.startswith("/"):
        return True  # `~/...` (another HOME's) or no path: the plugin id decides
    forms = {source, os.path.realpath(source)}
    for base in dirs:
        for top in {base.rstrip("/"), os.path.realpath(base)}:
            if any(form == top or form.startswith(top + "/") for form in forms):
                return True
    return False


class LogWatch:
    """What the files `paths()` names get written from now on, a look at a time.

    Each file is read from its size at the start (or from its beginning when it appears later, a
    dated file after midnight or a rotated one), at most MAX_READ bytes per look; a file that
    shrank or was replaced is read again from its beginning.
    """

    def __init__(self, paths: Callable[[], Sequence[Path]]):
        self.paths = paths
        self.files: Dict[Path, Tuple[int, int]] = {}  # path -> (inode, offset)
        self.partial: Dict[Path, bytes] = {}
        for path in self._unique(paths()):
            found = _stat(path)
            self.files[path] = found if found else (0, 0)

    @staticmethod
    def _unique(paths: Sequence[Path]) -> List[Path]:
        out: List[Path] = []
        for path in paths:
            if path not in out:
                out.append(path)
        return out

    def look(self) -> List[str]:
        """The whole lines written since the last look."""
        new: List[str] = []
        for path in self._unique(self.paths()):
            new.extend(self._read(path))
        return new

    def _read(self, path: Path) -> List[str]:
        found = _stat(path)
        if found is None:
            return []
        inode, size = found
        known_inode, offset = self.files.get(path, (inode, 0))
        if inode != known_inode or size < offset:
            offset = 0  # rotated or truncated: the new file is all new
            self.partial.pop(path, None)
        if size <= offset:
            self.files[path] = (inode, offset)
            return []
        try:
            fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK)  # swapped for a FIFO: no wait
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return []
                fh.seek(offset)
                data = fh.read(min(size - offset, MAX_READ))
        except OSError:
            return []
        self.files[path] = (inode, offset + len(data))
        data = self.partial.pop(path, b"") + data
        *whole, rest = data.split(b"\n")
        if rest and len(rest) <= MAX_LINE:
            self.partial[path] = rest
        return [line.decode("utf-8", "replace") for line in whole if line.strip()]


def _stat(path: Path) -> Optional[Tuple[int, int]]:
    try:
        st = os.stat(str(path))
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):  # a FIFO or a device there is never opened
        return None
    return st.st_ino, st.st_size
