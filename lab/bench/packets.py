"""SSH packets this process receives and sends, counted: whether the control side's work per host
changes with the hosts' pace or the fleet's size, in numbers that do not depend on the machine's
load (CPU time does).

paramiko's `Packetizer.read_message` and `send_message` (every SSH message of every connection,
on any thread) are wrapped while a `Counted` block runs; an `itertools.count` per direction (its
`next` is atomic under the GIL), so counting costs well under a microsecond per packet.
"""

from __future__ import annotations

import itertools
from typing import Any


class Counted:
    """`with Counted() as c:` ... `c.received`, `c.sent` (after the block)."""

    def __init__(self) -> None:
        self.received = self.sent = 0

    def __enter__(self) -> Counted:
        from paramiko.packet import Packetizer  # noqa: PLC0415

        self._class = Packetizer
        self._read, self._send = Packetizer.read_message, Packetizer.send_message
        received, sent = itertools.count(), itertools.count()
        self._counters = (received, sent)
        read, send = self._read, self._send

        def read_message(packetizer: Any) -> Any:
            next(received)
            return read(packetizer)

        def send_message(packetizer: Any, data: Any) -> Any:
            next(sent)
            return send(packetizer, data)

        Packetizer.read_message, Packetizer.send_message = read_message, send_message
        return self

    def __exit__(self, *exc: object) -> None:
        self._class.read_message, self._class.send_message = self._read, self._send
        # an itertools.count's repr is `count(N)`: N calls of next() so far
        self.received, self.sent = (int(repr(c)[6:-1]) for c in self._counters)
