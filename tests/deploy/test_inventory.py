"""Inventory validation (errors name file, key path and fix) and host selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.deploy.inventory import InventoryError, default_inventory, load, parse

REPO = Path(__file__).resolve().parents[2]

GOOD = """
vars: {user: deploy, timeouts: {connect: 5}}
hosts:
  web1: {host: web1.example.invalid}
  web2: {host: web2.example.invalid, port: 2222, user: admin}
  db: {host: db.invalid, gateway: {manager: systemd, options: {unit: gw.service}}}
  laptop: {connection: local, state_dir: state/laptop}
groups:
  web: {hosts: [web1, web2], vars: {python: python3.11}}
  backend: {hosts: [db], groups: [web]}
  everything: {groups: [backend], hosts: [laptop]}
"""


def inv(text: str, tmp_path: Path):
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    return load(path)


def error(text: str, tmp_path: Path) -> str:
    with pytest.raises(InventoryError) as info:
        inv(text, tmp_path)
    return str(info.value)


def test_vars_precedence_and_paths(tmp_path):
    inventory = inv(GOOD, tmp_path)
    web1, web2, db, laptop = (inventory.hosts[n] for n in ("web1", "web2", "db", "laptop"))
    assert (web1.user, web1.port, web1.python) == ("deploy", 22, "python3.11")
    assert (web2.user, web2.port) == ("admin", 2222)
    assert db.python == "python3" and db.manager == "systemd"
    assert db.manager_options == {"unit": "gw.service"}
    assert web1.timeouts.connect == 5 and web1.timeouts.command > 0
    assert laptop.is_local and laptop.state_dir == str(tmp_path / "state" / "laptop")
    assert db.state_dir == "~/.openclaw"  # remote paths are expanded on the host


def test_selection_of_hosts_groups_nested_groups_and_all(tmp_path):
    inventory = inv(GOOD, tmp_path)
    names = lambda spec: [h.name for h in inventory.select(spec)]  # noqa: E731
    assert names("web") == ["web1", "web2"]
    assert names("backend") == ["db", "web1", "web2"]
    assert names("everything,web1") == ["laptop", "db", "web1", "web2"]
    assert names("all") == ["web1", "web2", "db", "laptop"]
    assert names("db, web2") == ["db", "web2"]


def test_unknown_selection_lists_known_names(tmp_path):
    inventory = inv(GOOD, tmp_path)
    with pytest.raises(InventoryError) as info:
        inventory.select("laptob")
    message = str(info.value)
    assert "laptob" in message and "did you mean 'laptop'" in message
    assert "db, laptop, web1, web2" in message and "backend, everything, web" in message


def test_unknown_key_names_file_path_and_suggestion(tmp_path):
    message = error("hosts:\n  web1: {host: a, prot: 22}\n", tmp_path)
    assert str(tmp_path / "inv.yaml") in message
    assert "hosts.web1.prot" in message and "did you mean 'port'" in message


def test_site_is_inherited_like_any_var_and_a_bad_one_is_named(tmp_path):
    inventory = inv("hosts: {a: {}, b: {site: home}}\ngroups:\n  g: {hosts: [a], vars: "
                    "{site: cloud-1}}\n", tmp_path)
    assert (inventory.hosts["a"].site, inventory.hosts["b"].site) == ("cloud-1", "home")
    assert inv("hosts: {a: {}}\n", tmp_path).hosts["a"].site == "default"
    message = error("hosts:\n  pi: {site: 'home lan'}\n", tmp_path)
    assert "hosts.pi.site" in message and "'home lan' is not a site name" in message


def test_group_naming_unknown_host(tmp_path):
    message = error("hosts: {web1: {}}\ngroups:\n  web: {hosts: [web1, web9]}\n", tmp_path)
    assert "groups.web.hosts.1" in message and "unknown host 'web9'" in message
    assert "define it under `hosts:`" in message


def test_group_cycle_is_reported(tmp_path):
    text = ("hosts: {h: {}}\ngroups:\n  a: {groups: [b]}\n  b: {groups: [c]}\n"
            "  c: {groups: [a], hosts: [h]}\n")
    message = error(text, tmp_path)
    assert "cycle" in message and "a -> b -> c -> a" in message


@pytest.mark.parametrize("text, where, what", [
    ("hosts: {h: {port: '22'}}", "hosts.h.port", "expected int"),
    ("hosts: {h: {port: 70000}}", "hosts.h.port", "not a TCP port"),
    ("hosts: {h: {connection: telnet}}", "hosts.h.connection", "ssh, local"),
    ("hosts: {h: {host_key_policy: yolo}}", "hosts.h.host_key_policy", "accept-new"),
    ("hosts: {h: {gateway: {manager: pkill}}}", "hosts.h.gateway.manager", "systemd"),
    ("hosts: {h: {timeouts: {connect: -1}}}", "hosts.h.timeouts.connect", ">= 0"),
    ("hosts: {h: {timeouts: {conect: 1}}}", "hosts.h.timeouts.conect", "connect"),
    ("vars: [1]\nhosts: {h: {}}", "vars", "expected a mapping"),
    ("hosts: {}", "hosts", "no hosts"),
    ("hosts: {h: {}}\ngroups: {h: {hosts: [h]}}", "groups.h", "rename the group"),
    ("hosts: {h: {}}\ngroups: {g: {hosts: h}}", "groups.g.hosts", "list of names"),
    ("hosts: {h: {}}\nhostz: {}", "hostz", "allowed keys: vars, hosts, groups"),
    ("hosts: [", "", "not valid YAML"),
])
def test_bad_values_are_named(tmp_path, text, where, what):
    message = error(text, tmp_path)
    assert where in message and what in message, message


def test_as_shipped_no_selection_reaches_beyond_the_checkouts_dot_fleet():
    """`deploy -H all --yes` with the shipped file once installed into the operator's own
    ~/.openclaw (the Mac, a local host): every host a selection reaches is now a placeholder
    or a local host whose state dir lies under .fleet/."""
    inventory = load(REPO / "inventory.yaml")
    selections = ["all", *inventory.groups, *inventory.hosts]
    for name in selections:
        for host in inventory.select(name):
            if host.is_local:
                assert Path(host.state_dir).is_relative_to(REPO / ".fleet"), (name, host)
            else:
                assert host.host.endswith(".invalid"), (name, host)


def test_missing_file_says_how_to_fix(tmp_path):
    with pytest.raises(InventoryError, match="pass --inventory"):
        load(tmp_path / "nope.yaml")


def test_shipped_inventory_has_production_and_sandbox():
    inventory = load(REPO / "inventory.yaml")
    prod = {h.name: h for h in inventory.select("production")}
    assert (prod["cloud"].user, prod["pi"].user) == ("opc", "administrator")
    assert all(h.host.endswith(".invalid") for h in prod.values() if not h.is_local)
    sandbox = inventory.select("sandbox")
    assert len(sandbox) == 3 and all(h.is_local and h.manager == "fleet" for h in sandbox)
    assert all(Path(h.state_dir).is_relative_to(REPO / ".fleet" / "sandbox") for h in sandbox)
    assert len({h.state_dir for h in sandbox}) == 3
    assert all(h.host_key_policy == "strict" for h in inventory.hosts.values())


def test_no_inventory_file_is_refused_naming_where_it_looked(tmp_path):
    with pytest.raises(InventoryError) as info:
        default_inventory(tmp_path, env={})
    message = str(info.value)
    assert str(tmp_path / "inventory.yaml") in message and "FLEET_INVENTORY" in message
    assert "--inventory" in message
    assert not (tmp_path / ".fleet").exists()  # nothing invented in that directory


def test_inventory_from_environment_and_from_the_working_directory(tmp_path):
    other = tmp_path / "elsewhere.yaml"
    other.write_text("hosts: {envhost: {}}\n")
    assert list(default_inventory(tmp_path, env={"FLEET_INVENTORY": str(other)}).hosts) == [
        "envhost"]
    (tmp_path / "inventory.yaml").write_text("hosts: {cwdhost: {}}\n")
    assert list(default_inventory(tmp_path, env={}).hosts) == ["cwdhost"]


SANDBOXED = """
hosts:
  s1: {connection: local, state_dir: .fleet/sandbox/s1}
  s2: {connection: local, state_dir: .fleet/sandbox/s2}
  mine: {connection: local, state_dir: ~/.openclaw}
  sneaky: {connection: local, state_dir: .fleet/../state}
  web: {host: web.invalid}
groups:
  sandbox: {hosts: [s1, s2]}
  production: {hosts: [web, mine]}
"""


def test_all_never_reaches_the_sandbox_and_the_sandbox_is_only_in_dot_fleet(tmp_path):
    inventory = inv(SANDBOXED, tmp_path)
    assert {n for n, h in inventory.hosts.items() if h.sandbox} == {"s1", "s2"}
    assert [h.name for h in inventory.select("all")] == ["mine", "sneaky", "web"]
    assert [h.name for h in inventory.select("sandbox")] == ["s1", "s2"]
    assert [h.name for h in inventory.select("all,s1")] == ["mine", "sneaky", "web", "s1"]
    only_sandbox = inv("hosts: {s1: {connection: local, state_dir: .fleet/s1}}\n", tmp_path)
    with pytest.raises(InventoryError, match="outside the sandbox"):
        only_sandbox.select("all")


@pytest.mark.parametrize("spec", ["", " ", ",", [], None])
def test_empty_selection_is_an_error_not_everything(tmp_path, spec):
    with pytest.raises(InventoryError, match="no hosts selected"):
        inv(GOOD, tmp_path).select(spec)


def test_duplicated_key_is_an_error_naming_file_and_lines(tmp_path):
    message = error("hosts:\n  web1: {host: a}\n  web1: {host: b}\n", tmp_path)
    assert str(tmp_path / "inv.yaml") in message and "duplicate key 'web1'" in message
    assert "line 2" in message and "line 3" in message


def test_a_yaml_error_quotes_the_line_it_is_on(tmp_path):
    message = error("hosts:\n  web1: {host: a}\n  web2: : b\n", tmp_path)
    assert "line 3" in message and "web2: : b" in message and "^" in message, message


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    text = ("vars: {prot: 1}\nhosts:\n  a: {port: x}\n  b: {connection: telnet}\n"
            "  all: {}\ngroups:\n  g: {hostz: [a]}\n")
    message = error(text, tmp_path)
    assert message.startswith("5 problems"), message
    for where in ("vars.prot", "hosts.a.port", "hosts.b.connection", "hosts.all", "groups.g.hostz"):
        assert where in message, (where, message)


@pytest.mark.parametrize("text, what", [
    ("hosts: {all: {}}", "'all' is reserved"),
    ("hosts: {h: {}}\ngroups: {all: {hosts: [h]}}", "'all' is reserved"),
    ("hosts: {'a,b': {}}", "no commas or spaces"),
    ("hosts: {'a b': {}}", "no commas or spaces"),
])
def test_reserved_and_unselectable_names_are_refused(tmp_path, text, what):
    assert what in error(text, tmp_path)


@pytest.mark.parametrize("jump, what", [
    ("bastion:notaport", "not a TCP port"), ("bastion:70000", "not a TCP port"),
    ("user@", "not a jump host"), ("a,,b", "not a jump host"), ("bastion/22", "not a jump host"),
    ("a,b:0", "not a TCP port"), ("ssh://ops@[::1]:2222", "no IPv6 address in an ssh://"),
])
def test_jump_is_validated_at_load(tmp_path, jump, what):
    message = error(f"hosts: {{h: {{jump: '{jump}'}}}}", tmp_path)
    assert "hosts.h.jump" in message and what in message


def test_valid_jump_forms_load(tmp_path):
    inventory = inv("hosts:\n  a: {jump: bastion}\n  b: {jump: 'ops@bastion:2222'}\n"
                    "  c: {jump: 'outer,ops@inner:2200'}\n  d: {jump: none}\n", tmp_path)
    assert inventory.hosts["b"].jump == "ops@bastion:2222"
    assert inventory.hosts["c"].jump == "outer,ops@inner:2200"


@pytest.mark.parametrize("spec, parsed", [
    ("bastion:", (None, "bastion", None)),               # an empty port: none, as ssh -J
    ("ops@[::1]:2222", ("ops", "::1", 2222)),
    ("a@b@bastion", ("a@b", "bastion", None)),           # the user ends at the last @
    ("ssh://o%41;x=y@bastion.:ssh/", ("oA", "bastion", 22)),
    ("bastion:+022", (None, "bastion", 22)),
])
def test_jump_forms_read_as_ssh_reads_them(spec, parsed):
    from fleet.deploy.inventory import parse_jump

    assert parse_jump(spec) == parsed


def test_yaml_syntax_error_names_the_file_and_line(tmp_path):
    message = error("hosts:\n  a: {host: x\n", tmp_path)
    assert message.startswith(str(tmp_path / "inv.yaml")) and "line" in message


def test_parse_reports_the_given_path(tmp_path):
    with pytest.raises(InventoryError, match="somewhere.yaml: hosts.x.user"):
        parse("hosts: {x: {user: 3}}", tmp_path / "somewhere.yaml")


def test_two_hosts_on_one_state_dir_are_refused(tmp_path):
    text = ("hosts:\n  a: {connection: local, state_dir: s}\n"
            "  b: {connection: local, state_dir: s}\n")
    message = error(text, tmp_path)
    assert "hosts.b.state_dir" in message and "'b' and 'a'" in message


def _diamond(levels: int) -> str:
    """Each level's two groups both contain both groups of the next level: 2**levels paths."""
    lines = ["hosts:", "  h1: {connection: local, state_dir: s1}", "groups:"]
    for i in range(levels):
        nxt = f"[a{i + 1}, b{i + 1}]" if i + 1 < levels else "[]"
        for side in "ab":
            lines.append(f"  {side}{i}: {{hosts: [h1], groups: {nxt}}}")
    return "\n".join(lines) + "\n"


def test_a_diamond_of_groups_loads_in_linear_time(tmp_path):
    """26 levels is 2**26 paths: exponential resolution never finishes within the timeout."""
    import threading

    from fleet.deploy.inventory import parse

    out = {}
    worker = threading.Thread(
        target=lambda: out.setdefault("inv", parse(_diamond(26), tmp_path / "inv.yaml")),
        daemon=True)
    worker.start()
    worker.join(60)
    assert "inv" in out, "inventory with a 26-level diamond did not load"
    assert out["inv"].select("a0")[0].name == "h1"


def test_groups_nested_too_deep_are_a_clear_error(tmp_path):
    from fleet.deploy.inventory import InventoryError, parse

    lines = ["hosts:", "  h1: {connection: local, state_dir: s1}", "groups:"]
    for i in range(2000):
        lines.append(f"  g{i}: {{groups: [g{i + 1}]}}" if i < 1999 else f"  g{i}: {{hosts: [h1]}}")
    with pytest.raises(InventoryError, match="nested more than"):
        parse("\n".join(lines) + "\n", tmp_path / "inv.yaml")


def test_timeouts_are_typed_with_defaults_and_zero_means_the_default(tmp_path):
    hosts = inv("vars: {timeouts: {ready: 0, lock: 0, transfer: 7}}\nhosts: {h: {}}",
                tmp_path).hosts
    t = hosts["h"].timeouts
    assert (t.connect, t.command, t.transfer, t.ready, t.lock) == (10.0, 180.0, 7.0, 60.0, 0.0)


@pytest.mark.parametrize("timeouts, what", [
    ({"ready": "soon"}, "timeouts.ready: expected a number of seconds >= 0"),
    ({"connect": -3}, "timeouts.connect: expected a number of seconds >= 0"),
    ({"redy": 5}, "timeouts.redy: unknown key; use one of connect, command"),
    ([("ready", 5)], "timeouts: expected a mapping of seconds"),
])
def test_a_host_built_in_python_with_bad_timeouts_names_host_and_key(timeouts, what):
    from fleet.deploy.inventory import Host

    with pytest.raises(InventoryError) as info:
        Host("edge-1", timeouts=timeouts)
    assert "host edge-1" in str(info.value) and what in str(info.value)
