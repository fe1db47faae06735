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
    proc = run_ssh_g(path, host, user, port)
    assert proc.returncode == 0, proc.stderr
    return printed(proc.stdout)


def run_ssh_g(path: Path, host: str, user: str | None = None,
              port: int | None = None) -> subprocess.CompletedProcess:
    argv = [SSH or "ssh", "-G", "-F", str(path)]
    argv += ["-l", user] if user else []
    argv += ["-p", str(port)] if port else []
    return subprocess.run(argv + [host], capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)


def printed(stdout: str) -> dict:
    """The keywords fleet uses, from `ssh -G`'s output."""
    out: dict = {"identityfile": []}
    for line in stdout.splitlines():
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


# --- what ssh refuses, fleet refuses: accept/reject compared with `ssh -G`, not expected --------
# Each config is evaluated for host `x` with these variables set (and FLEET_CONF_UNSET unset);
# both accept it and print the same, or both refuse it.
CONF_ENV = {"FLEET_CONF_SET": "abc", "FLEET_CONF_EMPTY": "", "FLEET_CONF_PCT": "p%hq",
            "FLEET_CONF_TILDE": "~/t"}
ACCEPT_REJECT = {
    # ${VAR} in UserKnownHostsFile (the path `ssh -G` prints expanded)
    "var-set": "Host x\n  UserKnownHostsFile /tmp/${FLEET_CONF_SET}/kh ~/${FLEET_CONF_SET}\n",
    "var-twice-and-dollar": "Host x\n  UserKnownHostsFile /k/$${FLEET_CONF_SET}${FLEET_CONF_SET}\n",
    "var-empty": "Host x\n  UserKnownHostsFile ${FLEET_CONF_EMPTY}\n",
    "var-once-only": "Host x\n  UserKnownHostsFile /k/${FLEET_CONF_PCT}/%h\n",
    "var-tilde-kept": "Host x\n  UserKnownHostsFile ${FLEET_CONF_TILDE}\n",
    "var-unset": "Host x\n  UserKnownHostsFile /tmp/${FLEET_CONF_UNSET}/kh\n",
    "var-unset-second-file": "Host x\n  UserKnownHostsFile /tmp/kh /tmp/${FLEET_CONF_UNSET}\n",
    "var-unset-not-matching": "Host other\n  UserKnownHostsFile /tmp/${FLEET_CONF_UNSET}/kh\n",
    "var-unset-not-first": "Host x\n  UserKnownHostsFile /tmp/kh\n"
                           "Host *\n  UserKnownHostsFile /tmp/${FLEET_CONF_UNSET}\n",
    "var-empty-name": "Host x\n  UserKnownHostsFile /tmp/${}\n",
    "var-not-closed": "Host x\n  UserKnownHostsFile /tmp/${FLEET_CONF_SET\n",
    "var-odd-name-unset": "Host x\n  UserKnownHostsFile /tmp/${1A}\n",
    "var-no-braces": "Host x\n  UserKnownHostsFile /tmp/$FLEET_CONF_SET\n",
    "percent-at-end": "Host x\n  UserKnownHostsFile /tmp/kh%\n",
    "unknown-token": "Host x\n  UserKnownHostsFile /tmp/%Z\n",
    # Port
    "port-service": "Host x\n  Port ssh\n",
    "port-signed": "Host x\n  Port +022\n",
    "port-unknown-service": "Host other\n  Port nosuchservice\n",
    "port-0": "Host other\n  Port 0\n",
    "port-70000": "Host other\n  Port 70000\n",
    "port-negative": "Host x\n  Port -1\n",
    # ProxyJump forms
    **{f"jump {spec}": f"Host x\n  ProxyJump {spec}\n" for spec in (
        "ssh://ops@[::1]:2222", "ssh://[::1]", "ssh://ops@::1", "ssh://ops@[h]:22", "::1",
        "ops@[::1]:2222", "[::1]", "[::1]x", "[::1", "[h]]", "[h/x]:22", "h/22", "h:", "h:0",
        "h:65536", "h:+22", "h:ssh", "a,,b", "a,", "@h", "a@b@h", "ssh://@h", "ssh://h/",
        "ssh://h/x", "ssh://h:22/x", "SSH://h", "ssh://a@b@h", "ssh://h..x", "ssh://-h",
        "ssh://h.", "ssh://h_x", "ssh://ops;x=y@h:2222", "ssh://o%41@h", "ssh://o%4@h",
        "ssh://h%41", "ssh://h:22:33", "h:22:33", "none,a", "a extra words")},
    "jump-not-matching": "Host other\n  ProxyJump ssh://ops@[::1]:2222\n",
    # a keyword with no value, or more values than it takes, in a block that does not apply
    **{f"no value {kw}": f"Host other\n  {kw}\n" for kw in (
        "Port", "User", "HostName", "IdentityFile", "UserKnownHostsFile", "ProxyJump",
        "StrictHostKeyChecking", "Include", "Host")},
    **{f"extra {kw}": f"Host other\n  {kw} a b\n" for kw in (
        "Port", "User", "HostName", "IdentityFile", "StrictHostKeyChecking")},
    "strict-maybe": "Host other\n  StrictHostKeyChecking maybe\n",
    "strict-upper": "Host x\n  StrictHostKeyChecking Accept-New\n",
}


def fleet_verdict(path: Path) -> tuple:
    try:
        return True, fleets(path, "x", None, None)
    except ValueError as exc:  # SshConfigError, or a hop fleet cannot read
        return False, str(exc)


@pytest.mark.parametrize("name", list(ACCEPT_REJECT))
def test_fleet_accepts_and_refuses_what_ssh_G_does(tmp_path, monkeypatch, name):
    for var, value in CONF_ENV.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("FLEET_CONF_UNSET", raising=False)
    monkeypatch.delenv("1A", raising=False)
    path = tmp_path / "config"
    path.write_text(ACCEPT_REJECT[name])
    proc = run_ssh_g(path, "x")
    accepted, answer = fleet_verdict(path)
    assert accepted == (proc.returncode == 0), (proc.stderr, answer)
    if accepted:
        assert answer == printed(proc.stdout)


def test_the_accept_reject_cases_go_both_ways(tmp_path, monkeypatch):
    """Comparisons that always agreed on `accept` (or `refuse`) would prove little."""
    for var, value in CONF_ENV.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("FLEET_CONF_UNSET", raising=False)
    verdicts = {}
    for name in ("var-unset", "var-unset-not-matching", "jump ssh://ops@[::1]:2222",
                 "jump ops@[::1]:2222", "port-0", "port-signed", "var-once-only"):
        path = tmp_path / f"config{len(verdicts)}"
        path.write_text(ACCEPT_REJECT[name])
        verdicts[name] = fleet_verdict(path)
    assert [ok for ok, _ in verdicts.values()] == [False, True, False, True, False, True, True]
    assert "environment variable ${FLEET_CONF_UNSET} is not set" in verdicts["var-unset"][1]
    assert "no IPv6 address in an ssh:// jump host" in verdicts["jump ssh://ops@[::1]:2222"][1]
    assert verdicts["var-once-only"][1]["userknownhostsfile"] == "/k/p%hq/x"
