"""`fleet exec`: one ad-hoc shell command on every selected host, as Ansible's ad-hoc `shell`
module and Kamal's `app exec` run one.

The command runs through the same connection as a deploy (ssh with verified host keys, or a
local subprocess), in the login user's shell, in parallel, each bounded by a timeout; a host's
result is its exit code and what it printed. An ad-hoc command can change anything, so it
follows the rules of a restart: it runs under the fleet lease (fleet.deploy.lease), refused
as a whole where a maintenance lock (`fleet lock.acquire`) or another run holds a host. What a
host prints is data: kept whole up to OUTPUT_LIMIT per stream, then cut with a mark.
"""

from __future__ import annotations

import time

from fleet.deploy import api
from fleet.deploy.connection import ConnectionError_, Connections, close_quietly, connect
from fleet.deploy.inventory import Host
from fleet.deploy.runner import HostResult, Progress, RunOptions

OUTPUT_LIMIT = 1 << 20  # characters of stdout, and of stderr, kept per host
CUT_MARK = "\n[... cut: longer than 1 MiB]\n"


def _kept(text: str) -> str:
    return text if len(text) <= OUTPUT_LIMIT else text[:OUTPUT_LIMIT] + CUT_MARK


def exec_host(host: Host, command: str, progress: Progress, timeout: float,
              conns: Connections | None = None) -> HostResult:
    """`command` on `host`: ok when it exits 0; `data` holds exit_code, stdout and stderr.
    `conns`: the run's shared connections (the lease's), else one of its own."""
    t0 = time.monotonic()
    conn = None
    try:
        progress("connect", "")
        conn = conns.get(host) if conns is not None else connect(host)
        progress("exec", "")
        res = conn.run(command, timeout)
    except ConnectionError_ as exc:
        if conns is not None:
            conns.drop(host)
        return HostResult(host.name, exc.kind, False, note=str(exc),
                          duration_s=time.monotonic() - t0)
    finally:
        if conns is None:
            close_quietly(conn)
    ok = res.exit_code == 0
    return HostResult(host.name, "ok" if ok else "failed", ok,
                      duration_s=time.monotonic() - t0, note=f"exit {res.exit_code}",
                      data={"exit_code": res.exit_code, "stdout": _kept(res.stdout),
                            "stderr": _kept(res.stderr)})


def exec_command(hosts: list[Host], command: str, sink, options: RunOptions | None = None,
                 timeout: float | None = None, owner: str | None = None) -> list[HostResult]:
    """`command` on every host under the fleet lease, `options.parallel` at once; results in
    inventory order, every host `refused` (nothing ran anywhere) where a lock holds one.
    `timeout`: seconds the command may run (default: each host's `timeouts.command`)."""

    def limit(host: Host) -> float:
        return timeout if timeout is not None else host.timeouts.command

    return api.leased(hosts, owner or api.default_owner(), options,
                      lambda h, p, conns, _held: exec_host(h, command, p, limit(h), conns),
                      sink, deadline=lambda host: host.timeouts.connect + limit(host) + 30)
