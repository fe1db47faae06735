"""The SSH transport against its alternatives: the same exchange, on the same hosts, side by side.

What is left of the control side's CPU per host is mostly the SSH transport itself (docs/bench/
log.md, "A thousand hosts"), so this measures what another transport would cost for the exchange
a deploy makes with each host: connect (strict host-key check against the run's known_hosts,
public-key auth with the run's key), one short command, the ~0.9 MB artifact through stdin into a
file, one more command reading it back (`sha256sum`, checked), close; all hosts in parallel.

Contenders, alternated in one run (A B C D A B C D ...), each in a fresh process pinned to the
control core (the racks run on the other core, as in lab.bench.thousand):

- `fleet`: fleet.deploy.connection as the deploy uses it (`connect`, `run`, `send_and_run`), a
  thread per host;
- `paramiko`: plain paramiko (SSHClient, exec_command), a thread per host: fleet's own overhead
  (or saving) on top of the library;
- `openssh`: the OpenSSH client (/usr/bin/ssh) with one ControlMaster per host (ControlPersist),
  every command a `ssh -S path` client through it, the upload `ssh host 'cat > f' < artifact`;
- `asyncssh`: asyncssh (the bench extra's venv, .fleet/bench-venv), every host a task of one
  asyncio loop.

The control side's CPU is every process's user + system time: the probe's own from `go` to its
report and its waited-for children's (the ssh clients), and the ControlMasters', which detach from
the client that started them: this process is a child subreaper (prctl PR_SET_CHILD_SUBREAPER),
so they become its children and, after `ssh -O exit`, are reaped here with wait4, their whole
life's rusage. The probe's interpreter start and exit (its imports, its teardown: a fixed cost per
process, not per host) are left out; the wait4 total with them is kept in the JSON.

Memory is the peak of the summed RSS (and PSS: shared pages split between the processes sharing
them) of every process under this one, sampled every 0.1 s, minus the probe's once it has
imported its library.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab.bench.sampler import PeriodicSampler

CONTENDERS = ("fleet", "paramiko", "openssh", "openssh-x25519", "asyncssh")
# OpenSSH 9.x's default key exchange is the hybrid post-quantum sntrup761x25519, whose client side
# costs ~65 ms of CPU here (docs/bench/log.md); the Python contenders negotiate curve25519-sha256.
# `openssh-x25519` is OpenSSH with that key exchange, to tell the process model from the kex.
X25519 = "curve25519-sha256"
SIZES = (16, 64)
SSH = "/usr/bin/ssh"
TIMEOUT_S = 120.0  # every connect, command and transfer (a ceiling, not a wait)
RUN_TIMEOUT_S = 900.0  # one contender's whole run
PR_SET_CHILD_SUBREAPER = 36


# pure parts ------------------------------------------------------------------------------
def sizes_for(count: int) -> tuple[int, ...]:
    """The host counts to measure for `invoke bench --count N`: 16 (the quick mode) unless N
    asks for more, then 16 and 64."""
    return tuple(s for s in SIZES if s <= max(count, SIZES[0]))


def remote_paths(name: str) -> tuple[str, str]:
    """(directory, file) of a host's upload, under the rack user's home (relative paths: every
    contender's commands start there)."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"host name {name!r}: expected a rack host name such as r00-h001")
    return f"hosts/{name}/transport", f"hosts/{name}/transport/artifact.pyz"


def exchange(name: str) -> tuple[str, str, str]:
    """The three commands of one host's exchange: the short one, the upload (stdin into a
    file), the read-back."""
    directory, path = remote_paths(name)
    return (f"mkdir -p {directory} && echo ok", f"cat > {path}", f"sha256sum {path}")


def checked_sum(name: str, output: str, sha256: str) -> None:
    """Raise unless `sha256sum`'s output says the host has the artifact whole."""
    got = output.split()[0] if output.split() else ""
    if got != sha256:
        raise RuntimeError(f"{name}: the uploaded file's SHA-256 is {got[:16] or 'missing'}, "
                           f"expected {sha256[:16]}")


def ssh_options(key: str, known_hosts: str, port: int, user: str, timeout: float,
                kex: str | None = None) -> list[str]:
    """The OpenSSH client's options for one rack host: no config file, the run's key only,
    strict host keys from the run's known_hosts, never a prompt; `kex`: the key exchange
    (None: OpenSSH's default order)."""
    return (["-o", f"KexAlgorithms={kex}"] if kex else []) + [
        "-F", "/dev/null", "-p", str(port), "-l", user, "-i", key,
        "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known_hosts}",
        "-o", "GlobalKnownHostsFile=/dev/null", "-o", f"ConnectTimeout={int(timeout)}",
        "-o", "ServerAliveInterval=0"]


def ssh_negotiated(verbose_stderr: str) -> str:
    """`kex / cipher` an `ssh -v` session negotiated (cipher: server to client), from its debug
    lines."""
    kex = cipher = "unknown"
    for line in verbose_stderr.splitlines():
        if "kex: algorithm:" in line:
            kex = line.split("algorithm:", 1)[1].split()[0]
        elif "kex: server->client cipher:" in line:
            cipher = line.split("cipher:", 1)[1].split()[0]
    return f"{kex} / {cipher}"


def tree_of(parents: dict[int, int], root: int) -> set[int]:
    """Every process under `root` (not `root` itself), from {pid: parent pid}."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, ())
    return found


def figures(rows: dict[str, list[dict]], hosts: int) -> dict[str, dict]:
    """Per contender: medians of CPU ms per host, memory MB per host, wall s, and the ratios of
    CPU and wall against fleet's (rows of one host count)."""
    import statistics  # noqa: PLC0415

    out: dict[str, dict] = {}
    for name, runs in rows.items():
        if not runs:
            continue
        out[name] = {
            "cpu_ms_per_host": statistics.median(1000 * r["cpu_s"] / hosts for r in runs),
            "rss_mb_per_host": statistics.median(r["rss_mb"] / hosts for r in runs),
            "pss_mb_per_host": statistics.median(r["pss_mb"] / hosts for r in runs),
            "wall_s": statistics.median(r["wall_s"] for r in runs),
            "runs": len(runs)}
    base = out.get("fleet")
    for m in out.values():
        m["cpu_vs_fleet"] = m["cpu_ms_per_host"] / base["cpu_ms_per_host"] if base else None
        m["wall_vs_fleet"] = m["wall_s"] / base["wall_s"] if base else None
    return out


def table(med: dict[str, dict], ciphers: dict[str, str]) -> list[str]:
    """The side-by-side lines of one host count."""
    lines = [f"{'contender':<14} {'CPU ms/host':>11} {'x fleet':>7} {'wall s':>7} "
             f"{'x fleet':>7} {'RSS MB/host':>11} {'PSS MB/host':>11}  kex / cipher"]
    for name, m in med.items():
        cpu_x = f"{m['cpu_vs_fleet']:.2f}" if m["cpu_vs_fleet"] is not None else "-"
        wall_x = f"{m['wall_vs_fleet']:.2f}" if m["wall_vs_fleet"] is not None else "-"
        lines.append(f"{name:<14} {m['cpu_ms_per_host']:>11.1f} {cpu_x:>7} {m['wall_s']:>7.2f} "
                     f"{wall_x:>7} {m['rss_mb_per_host']:>11.2f} {m['pss_mb_per_host']:>11.2f}"
                     f"  {ciphers.get(name, '?')}")
    return lines


# the contenders (each runs in a probe process) ---------------------------------------------
def _fleet(spec: dict) -> tuple:
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    import paramiko  # noqa: F401, PLC0415  (imported before the baseline, as a deploy has it)

    from fleet.deploy import connection, sshconfig  # noqa: PLC0415
    from fleet.deploy.inventory import load  # noqa: PLC0415

    hosts = load(spec["inventory"]).select("all")[:len(spec["hosts"])]
    config = sshconfig.default_config()
    art = Path(spec["artifact"])
    ciphers = []

    def one(host) -> None:
        first, upload, check = exchange(host.name)
        conn = connection.connect(host, config)
        try:
            ciphers.append(paramiko_negotiated(conn.conn.client.get_transport()))
            res = conn.run(first, TIMEOUT_S)
            if res.exit_code != 0:
                raise RuntimeError(f"{host.name}: {first} exited {res.exit_code}")
            res = conn.send_and_run(art, upload, TIMEOUT_S, TIMEOUT_S)
            if res.exit_code != 0:
                raise RuntimeError(f"{host.name}: upload exited {res.exit_code}: {res.stderr}")
            checked_sum(host.name, conn.run(check, TIMEOUT_S).stdout, spec["sha256"])
        finally:
            conn.close()

    def go():
        with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
            list(pool.map(one, hosts))
        return ciphers[0] if ciphers else "unknown", []

    return go


def _paramiko(spec: dict) -> tuple:
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    import paramiko  # noqa: PLC0415

    art = Path(spec["artifact"])
    ciphers = []

    def command(client, cmd: str, name: str, data: Path | None = None) -> str:
        stdin, stdout, stderr = client.exec_command(cmd, timeout=TIMEOUT_S)
        if data is not None:
            with open(data, "rb") as fh:
                while chunk := fh.read(1 << 18):
                    stdin.write(chunk)
        stdin.channel.shutdown_write()
        out = stdout.read().decode()
        if not stdout.channel.status_event.wait(TIMEOUT_S):
            raise TimeoutError(f"{name}: no exit status from {cmd}")
        if stdout.channel.exit_status != 0:
            raise RuntimeError(f"{name}: {cmd} exited {stdout.channel.exit_status}: "
                               f"{stderr.read().decode()[-300:]}")
        return out

    def one(item) -> None:
        name, port = item
        first, upload, check = exchange(name)
        client = paramiko.SSHClient()
        client.load_host_keys(spec["known_hosts"])
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect("127.0.0.1", port=port, username=spec["user"],
                           key_filename=spec["key"], look_for_keys=False, allow_agent=False,
                           timeout=TIMEOUT_S, banner_timeout=TIMEOUT_S, auth_timeout=TIMEOUT_S,
                           channel_timeout=TIMEOUT_S)
            ciphers.append(paramiko_negotiated(client.get_transport()))
            command(client, first, name)
            command(client, upload, name, art)
            checked_sum(name, command(client, check, name), spec["sha256"])
        finally:
            client.close()

    def go():
        with ThreadPoolExecutor(max_workers=len(spec["hosts"])) as pool:
            list(pool.map(one, spec["hosts"]))
        return ciphers[0] if ciphers else "unknown", []

    return go


def _openssh(spec: dict, kex: str | None = None) -> tuple:
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    control = Path(tempfile.mkdtemp(prefix="fleet-tb-", dir="/tmp"))
    art = spec["artifact"]

    def ssh(name: str, port: int, extra: list[str], cmd: str | None = None,
            stdin=subprocess.DEVNULL) -> str:
        args = [SSH, *ssh_options(spec["key"], spec["known_hosts"], port, spec["user"],
                                  TIMEOUT_S, kex), *extra, "127.0.0.1"] + ([cmd] if cmd else [])
        proc = subprocess.run(args, stdin=stdin, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"{name}: ssh {' '.join(extra)} {cmd or ''} exited "
                               f"{proc.returncode}: {proc.stderr.strip()[-300:]}")
        return proc.stdout

    def one(item) -> None:
        name, port = item
        first, upload, check = exchange(name)
        sock = str(control / str(port))
        mux = ["-S", sock]
        # the master: authenticates, then goes to the background (-f) and persists; this
        # process is not its parent any more (the subreaper above adopts it)
        ssh(name, port, ["-M", *mux, "-o", "ControlPersist=300", "-f", "-N"])
        try:
            ssh(name, port, mux, first)
            with open(art, "rb") as fh:
                ssh(name, port, mux, upload, stdin=fh)
            checked_sum(name, ssh(name, port, mux, check), spec["sha256"])
        finally:
            ssh(name, port, [*mux, "-O", "exit"])

    def go():
        try:
            with ThreadPoolExecutor(max_workers=len(spec["hosts"])) as pool:
                list(pool.map(one, spec["hosts"]))
            deadline = time.monotonic() + 30
            while any(control.iterdir()) and time.monotonic() < deadline:
                time.sleep(0.02)  # the masters remove their sockets as they exit
        finally:
            left = [p.name for p in control.iterdir()]
            for p in control.iterdir():
                p.unlink(missing_ok=True)
            control.rmdir()
        return "", left

    return go


def _asyncssh(spec: dict) -> tuple:
    import asyncio  # noqa: PLC0415

    import asyncssh  # noqa: PLC0415
    import asyncssh.kex  # noqa: PLC0415

    ciphers = []

    async def command(conn, cmd: str, name: str, stdin=None) -> str:
        kwargs = {"stdin": stdin} if stdin is not None else {}  # a file name: streamed
        res = await conn.run(cmd, timeout=TIMEOUT_S, encoding=None, **kwargs)  # bytes
        if res.exit_status != 0:
            raise RuntimeError(f"{name}: {cmd} exited {res.exit_status}: "
                               f"{res.stderr.decode(errors='replace')[-300:]}")
        return res.stdout.decode()

    async def one(name: str, port: int) -> None:
        first, upload, check = exchange(name)
        conn = await asyncio.wait_for(asyncssh.connect(
            "127.0.0.1", port=port, username=spec["user"], client_keys=[spec["key"]],
            known_hosts=spec["known_hosts"], agent_path=None, config=[],
            connect_timeout=TIMEOUT_S, login_timeout=TIMEOUT_S), TIMEOUT_S)
        try:
            ciphers.append(f"kex? / {conn.get_extra_info('send_cipher')}")  # kex: as paramiko
            await command(conn, first, name)
            await command(conn, upload, name, stdin=spec["artifact"])
            checked_sum(name, await command(conn, check, name), spec["sha256"])
        finally:
            conn.close()
            await asyncio.wait_for(conn.wait_closed(), TIMEOUT_S)

    async def main():
        await asyncio.gather(*(one(n, p) for n, p in spec["hosts"]))

    def go():
        asyncio.run(asyncio.wait_for(main(), RUN_TIMEOUT_S))
        return ciphers[0] if ciphers else "unknown", []

    go.kex_order = [a.decode() for a in asyncssh.kex.get_default_kex_algs()
                    if not a.startswith(b"gss-")]  # no GSS credentials here

    return go


def probe(contender: str, spec_path: str) -> None:
    """In a fresh process: import the contender's library, say `ready` and the CPU that took
    (the interpreter's start is not the exchange's), wait for `go` on stdin,
    run the exchange with every host, print one JSON line (wall, cipher)."""
    spec = json.loads(Path(spec_path).read_text())
    go = {"fleet": _fleet, "paramiko": _paramiko, "openssh": _openssh,
          "openssh-x25519": lambda s: _openssh(s, X25519),
          "asyncssh": _asyncssh}[contender](spec)
    import resource  # noqa: PLC0415

    # the interpreter's start and imports, and what they ran (asyncssh looks for optional C
    # libraries with ctypes.util.find_library, which runs ldconfig)
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(f"ready {own.ru_utime + own.ru_stime} {kids.ru_utime + kids.ru_stime}", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("transport probe: no `go` on stdin")
    t0 = time.perf_counter()
    cipher, left = go()
    wall = time.perf_counter() - t0
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(json.dumps({"wall_s": wall, "cipher": cipher, "masters_left": left,
                      "kex_order": getattr(go, "kex_order", None),
                      "self_cpu_s": own.ru_utime + own.ru_stime,  # the Python side, start incl.
                      "children_cpu_s": kids.ru_utime + kids.ru_stime}), flush=True)


# the measuring side ------------------------------------------------------------------------
def _become_subreaper() -> None:
    """Adopt the processes that detach from the probes (OpenSSH's ControlMasters)."""
    import ctypes  # noqa: PLC0415

    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "transport: prctl(PR_SET_CHILD_SUBREAPER) failed; "
                      "the benchmark needs Linux")


def _parents() -> dict[int, int]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    out[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    return out


def _memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in kB; (0, 0) once it is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return rss, pss


class TreeMemory(PeriodicSampler):
    """The peak summed RSS and PSS of every process under this one, sampled on a thread."""

    def __init__(self, every_s: float = 0.1):
        super().__init__(every_s)
        self.peak = (0, 0)

    def sample(self) -> tuple[int, int]:
        mine = tree_of(_parents(), os.getpid())
        pairs = [_memory_kb(pid) for pid in mine]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)

    def tick(self) -> None:
        rss, pss = self.sample()
        self.peak = (max(self.peak[0], rss), max(self.peak[1], pss))


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise TimeoutError(f"transport probe said nothing within {timeout:.0f} s")
    return proc.stdout.readline()


def _reap_adopted(expected: int, timeout: float = 60.0) -> tuple[float, int]:
    """(CPU s, count) of the detached processes this subreaper adopted: wait4 on each as it
    exits, until `expected` are reaped and no other child is left, within `timeout`."""
    cpu, count = 0.0, 0
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return cpu, count
        if pid:
            cpu += ru.ru_utime + ru.ru_stime
            count += 1
            continue
        if count >= expected:
            return cpu, count
        if time.monotonic() > deadline:
            raise TimeoutError(f"transport: {expected - count} ControlMaster(s) still run "
                               f"{timeout:.0f} s after `ssh -O exit`")
        time.sleep(0.02)


def _reap_stray() -> None:
    """After a failed probe: reap what this subreaper adopted and has exited (a ControlMaster
    whose host's connection ended), so no zombie is left behind; never waits."""
    try:
        while os.wait4(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def run_probe(contender: str, spec_path: Path, python: str, cpus: list[int]) -> dict:
    """One contender's exchange with the spec's hosts in a fresh process on `cpus`: its wall,
    the CPU of it and of everything it started (adopted detached processes included), and the
    peak memory of all of them above the probe's own after its imports."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    cmd = [python, "-m", "lab.bench.transport", "probe", contender, str(spec_path)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=root,
                            preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    try:
        with TreeMemory() as mem:
            line = _readline(proc, 120)
            if line.split()[:1] != ["ready"]:
                raise RuntimeError(f"{contender} probe: {line!r} {proc.stderr.read()[-800:]}")
            start_cpu, start_kids = map(float, line.split()[1:3])  # not the exchange's
            base = mem.sample()
            mem.peak = base
            proc.stdin.write("go\n")
            proc.stdin.flush()
            result = _readline(proc, RUN_TIMEOUT_S)
            _, status, ru = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            adopted_cpu, adopted = _reap_adopted(len(json.loads(spec_path.read_text())["hosts"])
                                                 if contender == "openssh" else 0)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            proc.wait(10)
        _reap_stray()
        raise
    if proc.returncode != 0 or not result.strip():
        raise RuntimeError(f"{contender} probe exited {proc.returncode}: "
                           f"{proc.stderr.read()[-800:]}")
    row = json.loads(result)
    # the exchange's CPU: the probe's own from `go` to its report, its waited-for children
    # (ssh clients), the adopted ControlMasters; wait4's figure adds the interpreter's start and
    # exit (a fixed ~0.1-0.3 s per process, not per host), kept as `process_cpu_s`
    exchange_cpu = (row["self_cpu_s"] - start_cpu + row["children_cpu_s"] - start_kids
                    + adopted_cpu)
    row.update(cpu_s=exchange_cpu, process_cpu_s=ru.ru_utime + ru.ru_stime + adopted_cpu,
               start_cpu_s=start_cpu + start_kids, adopted_cpu_s=adopted_cpu, adopted=adopted,
               rss_mb=(mem.peak[0] - base[0]) / 1024, pss_mb=(mem.peak[1] - base[1]) / 1024)
    return row


def paramiko_negotiated(transport) -> str:
    """`kex / cipher` of a paramiko transport; paramiko (as asyncssh) forgets the kex it agreed
    once the keys are in use, so `kex?` stands for it here and `agreed_kex` fills it in."""
    return f"kex? / {transport.local_cipher}"


def server_kex(verbose_stderr: str) -> list[str]:
    """The key exchanges the server offers, from `ssh -vv`'s `peer server KEXINIT proposal`."""
    lines = verbose_stderr.splitlines()
    for i, line in enumerate(lines):
        if "peer server KEXINIT proposal" in line:
            for after in lines[i + 1:i + 3]:
                if "KEX algorithms:" in after:
                    return after.split("KEX algorithms:", 1)[1].strip().split(",")
    return []


def agreed_kex(client_order: list[str] | tuple[str, ...], server: list[str]) -> str:
    """The key exchange an SSH client agrees on: its first that the server offers."""
    return next((k for k in client_order if k in server), "unknown")


def openssh_negotiated(spec: dict, kex: str | None = None) -> tuple[str, list[str]]:
    """What the OpenSSH client negotiates with the first host, and the key exchanges that host
    offers (`ssh -vv`, not timed)."""
    port = spec["hosts"][0][1]
    proc = subprocess.run([SSH, "-vv", *ssh_options(spec["key"], spec["known_hosts"], port,
                                                   spec["user"], TIMEOUT_S, kex), "127.0.0.1",
                           "true"], capture_output=True, text=True, timeout=TIMEOUT_S)
    return ssh_negotiated(proc.stderr), server_kex(proc.stderr)


def bench(base, workdir: Path, reps: int, sizes=SIZES, log=print):
    import paramiko  # noqa: PLC0415

    from lab.bench import tools  # noqa: PLC0415
    from lab.bench.report import Section  # noqa: PLC0415
    from lab.bench.scale import split_cores  # noqa: PLC0415
    from lab.bench.stats import alternation  # noqa: PLC0415
    from lab.bench.thousand import settle  # noqa: PLC0415
    from lab.harness import rack  # noqa: PLC0415
    from lab.harness.run import docker_client  # noqa: PLC0415

    sizes = sorted(sizes)
    sec = Section("transport", f"the SSH transport against its alternatives: "
                               f"{', '.join(map(str, sizes))} light hosts in racks")
    _become_subreaper()
    python = {c: sys.executable for c in CONTENDERS}
    python["asyncssh"] = str(tools.python(log=log))
    control, host_cores = split_cores(os.cpu_count() or 1)
    load0 = os.getloadavg()
    racks = rack.start(docker_client(), workdir / "racks-transport", sizes[-1],
                       cpuset=",".join(map(str, host_cores)), log=log)
    try:
        sha = hashlib.sha256(base.path.read_bytes()).hexdigest()
        ciphers: dict[str, str] = {}
        for n in sizes:
            spec = {"inventory": str(racks.inventory_path), "artifact": str(base.path),
                    "sha256": sha, "key": str(racks.key.path), "user": rack.USER,
                    "known_hosts": str(racks.known_hosts_path),
                    "hosts": [[h.name, h.port] for h in racks.hosts[:n]]}
            spec_path = workdir / f"transport-{n}.json"
            spec_path.write_text(json.dumps(spec))
            ciphers["openssh"], offered = openssh_negotiated(spec)
            ciphers["openssh-x25519"] = openssh_negotiated(spec, X25519)[0]
            rows: dict[str, list[dict]] = {c: [] for c in CONTENDERS}
            for rep, name in alternation(CONTENDERS, reps):
                settle(racks)
                row = run_probe(name, spec_path, python[name], control)
                rows[name].append(row)
                if row.get("cipher"):  # kex / cipher
                    ciphers[name] = row["cipher"].replace("kex?", agreed_kex(
                        row.get("kex_order") or paramiko.Transport._preferred_kex, offered))
                sec.add(f"{name}, {n} hosts", row["wall_s"])
                log(f"  transport rep {rep + 1}: {name} {n} hosts {row['wall_s']:.2f} s, CPU "
                    f"{1000 * row['cpu_s'] / n:.1f} ms/host (adopted {row['adopted']}: "
                    f"{row['adopted_cpu_s']:.2f} s), RSS {row['rss_mb'] / n:.2f} MB/host, "
                    f"PSS {row['pss_mb'] / n:.2f} MB/host")
            med = figures(rows, n)
            for line in table(med, ciphers):
                log(f"  {n:>3} hosts | {line}")
            sec.figures[f"{n} hosts"] = "\n    " + "\n    ".join(table(med, ciphers))
            sec.details[f"{n} hosts"] = {"rows": rows, "medians": med}
        sec.details["ciphers"] = ciphers
    finally:
        racks.close()
        _reap_stray()
    sec.figures["load average at start (1/5/15 min)"] = " / ".join(f"{x:.1f}" for x in load0)
    sec.figures["load average at end (1 min)"] = f"{os.getloadavg()[0]:.1f}"
    sec.notes.append("CPU: user+sys of every control-side process (ControlMasters included); "
                     "memory: peak summed over them, above the probe's after its imports")
    return sec


if __name__ == "__main__" and len(sys.argv) >= 4 and sys.argv[1] == "probe":
    probe(sys.argv[2], sys.argv[3])
