"""The harness's SSH command runner returns all of a command's output, whenever it arrives."""

from __future__ import annotations

import threading

import pytest

from lab.harness import ssh


class _ArrivingChannel:
    """A channel whose transport delivers output, EOF and exit status together at the `at`-th
    query the reader makes, as paramiko's transport thread may do between any two of them."""

    def __init__(self, at: int, out: bytes, err: bytes) -> None:
        self.at, self.queries = at, 0
        self._out, self._err = out, err
        self.out, self.err = b"", b""
        self.eof_arrived = self.status_arrived = False
        self.status_event = threading.Event()

    def _tick(self) -> None:
        self.queries += 1
        if self.queries == self.at:
            self.out, self.err = self._out, self._err
            self.eof_arrived = self.status_arrived = True
            self.status_event.set()

    @property
    def eof_received(self) -> bool:
        self._tick()
        return self.eof_arrived

    def exit_status_ready(self) -> bool:
        self._tick()
        return self.status_arrived

    def recv_ready(self) -> bool:
        self._tick()
        return bool(self.out)

    def recv_stderr_ready(self) -> bool:
        self._tick()
        return bool(self.err)

    def recv(self, n: int) -> bytes:
        data, self.out = self.out[:n], self.out[n:]
        return data

    def recv_stderr(self, n: int) -> bytes:
        data, self.err = self.err[:n], self.err[n:]
        return data

    def recv_exit_status(self) -> int:
        return 0

    def settimeout(self, _: float) -> None:
        pass

    def exec_command(self, _: str) -> None:
        pass

    def shutdown_write(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Client:
    def __init__(self, channel: _ArrivingChannel) -> None:
        self.channel = channel

    def get_transport(self):
        return self

    def open_session(self, timeout: float):
        return self.channel


@pytest.mark.parametrize("at", range(1, 16))
def test_output_arriving_with_the_exit_status_between_any_two_checks_is_kept(at):
    channel = _ArrivingChannel(at, b'{"ok": true}\n', b"warning\n")
    result = ssh.run_on(_Client(channel), "true", timeout=5)
    assert (result.code, result.stdout, result.stderr) == (0, '{"ok": true}\n', "warning\n")
