"""Pure parts of the transport benchmark (lab.bench.transport): what each host's exchange sends,
how the OpenSSH client is told to trust only the run's keys, and the side-by-side table (no
Docker, no timing)."""

from __future__ import annotations

import pytest

from lab.bench import transport
from lab.bench.run import parse_selection


def test_transport_is_opt_in_and_selectable():
    assert parse_selection("transport") == ["transport"]
    assert "transport" not in parse_selection("all")  # it starts racks of 64 hosts


def test_quick_mode_is_sixteen_hosts_and_count_64_adds_64():
    assert transport.sizes_for(8) == (16,)
    assert transport.sizes_for(16) == (16,)
    assert transport.sizes_for(64) == (16, 64)


def test_every_host_writes_its_own_file_and_reads_it_back():
    first, upload, check = transport.exchange("r00-h003")
    assert first == "mkdir -p hosts/r00-h003/transport && echo ok"
    assert upload == "cat > hosts/r00-h003/transport/artifact.pyz"
    assert check == "sha256sum hosts/r00-h003/transport/artifact.pyz"
    with pytest.raises(ValueError, match="r00-h001"):
        transport.exchange("../etc")


def test_a_wrong_or_missing_sum_names_the_host():
    transport.checked_sum("r00-h001", "ab12  hosts/x\n", "ab12")
    with pytest.raises(RuntimeError, match="r00-h001.*expected ab12"):
        transport.checked_sum("r00-h001", "ffff  hosts/x\n", "ab12")
    with pytest.raises(RuntimeError, match="missing"):
        transport.checked_sum("r00-h001", "", "ab12")


def test_openssh_trusts_only_the_runs_key_and_known_hosts():
    opts = transport.ssh_options("/k/id", "/k/known_hosts", 2201, "opc", 60)
    joined = " ".join(opts)
    assert opts[:2] == ["-F", "/dev/null"]  # no user or system config changes the contender
    for wanted in ("-p 2201", "-l opc", "-i /k/id", "IdentitiesOnly=yes", "BatchMode=yes",
                   "StrictHostKeyChecking=yes", "UserKnownHostsFile=/k/known_hosts",
                   "GlobalKnownHostsFile=/dev/null", "ConnectTimeout=60"):
        assert wanted in joined


def test_the_negotiated_kex_and_cipher_are_read_from_ssh_v():
    err = ("debug2: peer server KEXINIT proposal\n"
           "debug2: KEX algorithms: sntrup761x25519-sha512@openssh.com,curve25519-sha256,"
           "curve25519-sha256@libssh.org\n"
           "debug1: kex: algorithm: sntrup761x25519-sha512@openssh.com\n"
           "debug1: kex: server->client cipher: chacha20-poly1305@openssh.com MAC: <implicit> "
           "compression: none\n")
    assert transport.ssh_negotiated(err) == ("sntrup761x25519-sha512@openssh.com / "
                                             "chacha20-poly1305@openssh.com")
    assert transport.ssh_negotiated("nothing") == "unknown / unknown"
    offered = transport.server_kex(err)
    assert offered[-1] == "curve25519-sha256@libssh.org"
    # a client that prefers a kex this server lacks agrees on its next one the server offers
    assert transport.agreed_kex(("mlkem768x25519-sha256", "curve25519-sha256@libssh.org"),
                                offered) == "curve25519-sha256@libssh.org"
    assert transport.agreed_kex(("x",), offered) == "unknown"


def test_openssh_can_be_told_its_key_exchange():
    assert transport.ssh_options("k", "kh", 22, "u", 5, "curve25519-sha256")[:2] == [
        "-o", "KexAlgorithms=curve25519-sha256"]
    assert "KexAlgorithms" not in " ".join(transport.ssh_options("k", "kh", 22, "u", 5))


def test_the_process_tree_includes_adopted_grandchildren_but_not_the_root():
    parents = {10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 21: 20}
    assert transport.tree_of(parents, 10) == {11, 12, 13}
    assert transport.tree_of(parents, 99) == set()


def test_figures_are_per_host_medians_with_ratios_against_fleet():
    rows = {"fleet": [{"cpu_s": 0.64, "rss_mb": 32, "pss_mb": 16, "wall_s": 4.0},
                      {"cpu_s": 0.80, "rss_mb": 64, "pss_mb": 32, "wall_s": 6.0}],
            "openssh": [{"cpu_s": 3.2, "rss_mb": 640, "pss_mb": 128, "wall_s": 2.5}]}
    med = transport.figures(rows, 64)
    assert med["fleet"]["cpu_ms_per_host"] == pytest.approx(11.25)
    assert med["fleet"]["rss_mb_per_host"] == pytest.approx(0.75)
    assert med["openssh"]["cpu_vs_fleet"] == pytest.approx(50 / 11.25)
    assert med["openssh"]["wall_vs_fleet"] == pytest.approx(0.5)
    lines = transport.table(med, {"openssh": "chacha20-poly1305@openssh.com"})
    assert "x fleet" in lines[0]
    assert lines[2].split()[0] == "openssh" and lines[2].endswith("chacha20-poly1305@openssh.com")
    assert lines[1].split()[2] == "1.00"  # fleet against itself


def test_without_fleet_rows_there_is_no_ratio():
    med = transport.figures({"asyncssh": [{"cpu_s": 1.0, "rss_mb": 1, "pss_mb": 1,
                                           "wall_s": 1.0}]}, 16)
    assert med["asyncssh"]["cpu_vs_fleet"] is None
    assert transport.table(med, {})[1].split()[2] == "-"
