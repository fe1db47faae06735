"""Host patterns after --hosts, as Ansible's --limit: `!` exclusion, `&` intersection,
wildcards and `~regex`, through Inventory.select and the `fleet` script."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fleet.deploy.inventory import InventoryError, load

FLEET = """
hosts:
  web1: {host: web1.example.invalid}
  web2: {host: web2.example.invalid}
  web3: {host: web3.example.invalid}
  db1: {host: db1.example.invalid}
  "odd!name": {host: odd.example.invalid}
  "a:b": {host: ab.example.invalid}
  sb1: {connection: local, state_dir: .fleet/sandbox/sb1}
  sb2: {connection: local, state_dir: .fleet/sandbox/sb2}
groups:
  web: {hosts: [web1, web2, web3]}
  staging: {hosts: [web2, db1]}
  sandbox: {hosts: [sb1, sb2]}
"""


@pytest.fixture
def inventory(tmp_path):
    path = tmp_path / "inventory.yaml"
    path.write_text(FLEET)
    return load(path)


def names(inventory, spec) -> list[str]:
    return [h.name for h in inventory.select(spec)]


@pytest.mark.parametrize("spec, want", [
    ("web:!web3", ["web1", "web2"]),
    ("web,!web3", ["web1", "web2"]),
    ("!web3,web", ["web1", "web2"]),  # the order of the terms does not matter (as Ansible)
    ("web:&staging", ["web2"]),
    ("web:db1:&staging", ["web2", "db1"]),
    ("web:db1:&staging:!web2", ["db1"]),
    ("web*", ["web1", "web2", "web3"]),  # group `web` and hosts web1..3, once each
    ("web[12]", ["web1", "web2"]),
    ("~(db|web)1$", ["web1", "db1"]),
    ("!web*", ["db1", "odd!name", "a:b"]),  # only exclusions: from `all`
    ("&staging", ["web2", "db1"]),
    ("odd!name", ["odd!name"]),  # an exact name is that name, whatever it holds
    ("a:b", ["a:b"]),
    ("sandbox:!sb2", ["sb1"]),
    ("sandbox:&sb*", ["sb1", "sb2"]),  # `&`/`!` wildcards narrow, so they reach the sandbox
])
def test_patterns_select_as_ansible_limit_does(inventory, spec, want):
    assert names(inventory, spec) == want


def test_a_wildcard_never_widens_a_selection_into_the_sandbox(inventory):
    assert "sb1" not in names(inventory, "*")
    with pytest.raises(InventoryError, match="only sandbox hosts.*name them or their group"):
        inventory.select("sb*")


@pytest.mark.parametrize("spec, says", [
    ("web:!web9", "unknown host or group '!web9' (did you mean '!web"),
    ("web:&stagng", "unknown host or group '&stagng' (did you mean '&staging'?)"),
    ("mail*", "term 'mail*' matches no host or group"),
    ("~web(", "is not a valid regular expression"),
    ("web:!web", "--hosts 'web:!web' selects no host"),
])
def test_a_term_that_selects_nothing_is_an_error_naming_it(inventory, spec, says):
    with pytest.raises(InventoryError) as info:
        inventory.select(spec)
    assert says in str(info.value)
    assert str(inventory.path) in str(info.value)


def test_the_fleet_script_takes_a_pattern(tmp_path):
    """`fleet status -H 'sandbox:!sb2'` reads sb1 only; a bad term is one JSON error, exit 2."""
    (tmp_path / "inventory.yaml").write_text(FLEET)

    def fleet(*args: str) -> tuple[int, dict]:
        proc = subprocess.run([sys.executable, "-c", FLEET_MAIN, *args, "--json"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        return proc.returncode, json.loads(proc.stdout)

    code, doc = fleet("status", "-H", "sandbox:!sb2")
    assert [h["host"] for h in doc["hosts"]] == ["sb1"], doc
    code, doc = fleet("status", "-H", "sandbox:!sb9")
    assert code == 2 and "'!sb9'" in doc["error"], doc


FLEET_MAIN = "import sys; sys.argv[0] = 'fleet'; from fleet.cli.program import main; main()"
