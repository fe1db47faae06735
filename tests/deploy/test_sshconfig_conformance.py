"""fleet reads ssh_config as OpenSSH does: case by case against `ssh -G` (no connection is made;
`ssh -G` only prints the configuration it would use).

Each case runs `ssh -G -F <file> [-l user] [-p port] host` and compares what ssh prints for
the keywords fleet uses with fleet.deploy.sshconfig's answer for the same host, printed the
same way. Without an `ssh` client these are skipped, unless FLEET_REQUIRE_SSH is set (CI).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from fleet.deploy.inventory import parse_jump
from fleet.deploy.sshconfig import (
    DEFAULT_IDENTITIES,
    DEFAULT_KNOWN_HOSTS,
    SshConfig,
    expand_path,
    known_hosts_files,
    resolved_hostname,
)

SSH = shutil.which("ssh")
pytestmark = pytest.mark.skipif(SSH is None and not os.environ.get("FLEET_REQUIRE_SSH"),
                                reason="no ssh client (set FLEET_REQUIRE_SSH=1 to make this "
                                       "an error)")
LOCAL_USER = pwd.getpwuid(os.getuid()).pw_name
KEYS = ("hostname", "port", "user", "identityfile", "userknownhostsfile",
        "stricthostkeychecking", "proxyjump", "proxycommand")
PRINTED_POLICY = {"yes": "true", "true": "true", "no": "false", "off": "false",
                  "false": "false", "ask": "ask", "accept-new": "accept-new"}

MAIN = """\
# keywords before any Host line apply to every host
Include {d}/conf.d/*.conf
Host web1 web2
  HostName %h.internal.example
  User deploy
  IdentityFile ~/.ssh/web_key
Host web*
  Port 2200
  IdentityFile ~/.ssh/shared_key
  IdentityFile ~/.ssh/web_key
Host db-? !db-9
  User dba
  ProxyJump bastion
Host db-9
  ProxyJump ops@bastion:2222,inner
Host bastion
  HostName 192.0.2.10
  User jumper
Host two
  HostName = "two.example" # a comment after the value
  Port=2022
Host first-wins
  User one
Host first-wins
  User two
  Port 2001
Host nojump
  ProxyJump none
Host nojump
  ProxyJump late
Host pcmd
  ProxyCommand ssh -W %h:%p gw
  ProxyJump ignored
Host cond
  Include {d}/cond.conf
Host renamed
  HostName Target.Example
Host target.example
  Port 2100
Match host target.example
  User via-match-host
Match originalhost ALIAS-Upper
  Port 2300
Match user bob
  Port 2400
Match localuser {local} host lu-*
  StrictHostKeyChecking accept-new
Match !host lu-* originalhost neg-*
  StrictHostKeyChecking no
Host known
  UserKnownHostsFile ~/.ssh/kh_%h_%p {d}/kh2
Host quoted
  UserKnownHostsFile "{d}/with space/known_hosts" {d}/kh3
Host service
  Port ssh
Host urijump
  ProxyJump ssh://ops@bastion:2222
Host bracketjump
  ProxyJump ops@[::1]:2222
Host CaseSensitive
  Port 2700
Host *
  User fallback
"""
INCLUDED = {
    "conf.d/10-alpha.conf": "Host alpha\n  HostName alpha.example\n  Include {d}/nested.conf\n",
    "conf.d/20-beta.conf": "Host beta\n  User beta-user\n",
    "conf.d/notes.txt": "Host beta\n  Port 9999\n",  # not *.conf: never read
    "nested.conf": "  Port 2500\nHost alpha-nested\n  User nested\n",
    "cond.conf": "User cond-user\nHost cond-inner\n  Port 2600\n",
}
FINAL = """\
Host fin
  HostName fin.example
Match final host fin.example
  User final-user
Host fin.example
  IdentityFile ~/.ssh/final_key
  Port 2800
Match canonical
  StrictHostKeyChecking accept-new
Host other
  Port 2900
"""

CASES = [  # (config, host, -l user, -p port)
    ("main", "web1", None, None),            # %h in HostName, two blocks, IdentityFile adds up
    ("main", "web3", None, None),            # wildcard, first User is the last block's
    ("main", "web1", "root", 9),             # -l and -p win over the file
    ("main", "db-1", None, None),            # ? wildcard with a negated pattern beside it
    ("main", "db-9", None, None),            # negated: only its own block; a two-hop jump
    ("main", "bastion", None, None),
    ("main", "two", None, None),             # `=`, quotes, a comment after the value
    ("main", "first-wins", None, None),      # the first value of a keyword wins
    ("main", "nojump", None, None),          # ProxyJump none blocks a later one
    ("main", "pcmd", None, None),            # ProxyCommand first: ProxyJump ignored
    ("main", "cond", None, None),            # Include inside a matching Host block
    ("main", "cond-inner", None, None),      # ... and inside one that does not match
    ("main", "renamed", None, None),         # Match host sees the HostName; Host does not
    ("main", "ALIAS-Upper", None, None),     # Match originalhost
    ("main", "alias-upper", None, None),     # ... without regard to case
    ("main", "x", "bob", None),              # Match user sees -l
    ("main", "lu-1", None, None),            # Match localuser host
    ("main", "neg-1", None, None),           # Match with a negated criterion
    ("main", "lu-neg", None, None),
    ("main", "known", None, None),           # UserKnownHostsFile with ~ and tokens
    ("main", "quoted", None, None),          # ... a quoted path with a space, kept whole
    ("main", "service", None, None),         # Port by service name
    ("main", "urijump", None, None),         # ProxyJump as an ssh:// URI
    ("main", "bracketjump", None, None),     # ... and with a bracketed IPv6 hop
    ("main", "alpha", None, None),           # glob Include, nested Include inside a block
    ("main", "alpha-nested", None, None),
    ("main", "beta", None, None),            # a file the glob does not match is not read
    ("main", "CaseSensitive", None, None),   # Host patterns keep case
    ("main", "casesensitive", None, None),
    ("main", "plain", None, None),           # nothing but Host *: ssh's defaults
    ("final", "fin", None, None),            # Match final: a second pass on the HostName
    ("final", "other", None, None),          # Match canonical holds in that pass
    ("empty", "nothing", None, None),
]


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    d = tmp_path_factory.mktemp("sshcfg")
    for name, text in INCLUDED.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text.format(d=d))
    (d / "main").write_text(MAIN.format(d=d, local=LOCAL_USER))
    (d / "final").write_text(FINAL)
    (d / "empty").write_text("")
    return d


def ssh_g(path: Path, host: str, user: str | None, port: int | None) -> dict:
    argv = [SSH or "ssh", "-G", "-F", str(path)]
    argv += ["-l", user] if user else []
    argv += ["-p", str(port)] if port else []
    proc = subprocess.run(argv + [host], capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    out: dict = {"identityfile": []}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key == "identityfile":
            out[key].append(value)
        elif key in KEYS:
            out[key] = value
    return out


def fleets(path: Path, host: str, user: str | None, port: int | None) -> dict:
    """fleet's answer printed as `ssh -G` prints it."""
    opts = SshConfig([(path, False)]).options(host, user, port)
    hostname = resolved_hostname(opts, host)
    port_s = opts.values.get("port", "22")
    login = opts.values.get("user", LOCAL_USER)
    tokens = {"%": "%", "h": hostname, "p": port_s, "r": login, "n": host, "u": LOCAL_USER,
              "d": os.path.expanduser("~")}
    known = known_hosts_files(opts) or list(DEFAULT_KNOWN_HOSTS)
    out = {"hostname": hostname, "port": port_s, "user": login,
           "identityfile": opts.identity_files or list(DEFAULT_IDENTITIES),
           "userknownhostsfile": " ".join(expand_path(f, tokens) for f in known),
           "stricthostkeychecking": PRINTED_POLICY[
               opts.values.get("stricthostkeychecking", "ask").lower()]}
    if opts.proxy is not None and opts.proxy[1].lower() != "none":
        kind, value = opts.proxy
        out[kind] = ",".join(hop(h) for h in value.split(",")) if kind == "proxyjump" else value
    return out


def hop(spec: str) -> str:
    """One ProxyJump hop as fleet reads it, printed as `ssh -G` prints a hop."""
    user, host, port = parse_jump(spec)
    return (f"{user}@" if user else "") + (f"[{host}]" if ":" in host else host) + (
        f":{port}" if port else "")


@pytest.fixture(autouse=True)
def _home_as_ssh_sees_it(monkeypatch):
    # ssh expands ~ to the account's home directory; fleet to $HOME: make them one
    monkeypatch.setenv("HOME", pwd.getpwuid(os.getuid()).pw_dir)


@pytest.mark.parametrize("config, host, user, port", CASES,
                         ids=[f"{c[0]}:{c[1]}{'-l' if c[2] else ''}{'-p' if c[3] else ''}"
                              for c in CASES])
def test_fleet_reads_ssh_config_as_ssh_G_does(configs, config, host, user, port):
    assert fleets(configs / config, host, user, port) == ssh_g(configs / config, host, user, port)


def test_the_cases_cover_what_they_say(configs):
    """The comparisons above could pass on two wrong answers that agree; a few anchors."""
    main = configs / "main"
    assert fleets(main, "web1", None, None)["identityfile"] == ["~/.ssh/web_key",
                                                                 "~/.ssh/shared_key"]
    assert fleets(main, "db-9", None, None)["proxyjump"] == "ops@bastion:2222,inner"
    assert fleets(main, "cond", None, None)["user"] == "cond-user"
    assert fleets(main, "cond-inner", None, None)["port"] == "22"
    assert fleets(main, "alpha", None, None)["port"] == "2500"
    assert fleets(main, "renamed", None, None)["user"] == "via-match-host"
    assert fleets(configs / "final", "fin", None, None)["user"] == "final-user"
