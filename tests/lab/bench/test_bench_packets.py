"""The SSH packet count the thousand-host and pace benchmarks report (lab.bench.packets)."""

from __future__ import annotations

import socket

from paramiko.message import Message
from paramiko.packet import Packetizer

from lab.bench.packets import Counted


def test_the_packets_of_a_block_are_counted_and_only_those():
    ends = socket.socketpair()
    left, right = Packetizer(ends[0]), Packetizer(ends[1])
    msg = Message()
    msg.add_byte(bytes([2]))  # SSH_MSG_IGNORE
    msg.add_string("padding")
    try:
        left.send_message(msg)
        right.read_message()
        with Counted() as counted:
            for _ in range(3):
                left.send_message(msg)
            right.read_message()
            right.send_message(msg)
        left.send_message(msg)
        right.read_message()
    finally:
        for end in ends:
            end.close()
    assert (counted.received, counted.sent) == (1, 4)
    assert Packetizer.read_message is not None and "Counted" not in repr(Packetizer.send_message)
