"""ansible-core doing the same work as a fleet deploy: copy, unpack, link, restart, wait.

ansible-core comes from the `bench` extra in its own venv (lab.bench.tools), installed on demand
and only for benchmarks: never a dependency of the project or its tests. Each host gets its own
state dir (`~/.openclaw-ansible`, `~/.openclaw-ansible-tuned`) so the contenders never touch each
other's files. The playbook is
what a careful Ansible user would write for this layout (no fleet installer): `copy` (checksum
skips an identical file), unpack with python3's zipfile (the host image has no `unzip`), `file`
links for `current` and each plugin, the gateway's own `restart`, then `health` until the new
version answers. Ansible's defaults stay as they are (ssh ControlPersist, no pipelining, forks 5)
except for the forks=8 contender; the *tuned* contender (`tuned=True`) runs the same playbook as a
careful Ansible user configures it (`TUNED_CFG`: pipelining, forks 8, ControlPersist, no facts).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from fleet.deploy.api import ArtifactRef
from fleet.deploy.inventory import Host
from lab.bench import tools

STATE = ".openclaw-ansible"
TUNED_STATE = ".openclaw-ansible-tuned"
# What a careful Ansible user sets for a fleet of small hosts (ansible.cfg): pipelining (one ssh
# exec per task instead of put + exec + rm of a module file), 8 forks (every host at once),
# ControlPersist (one ssh connection per host for the whole play), no fact gathering.
TUNED_CFG = """\
[defaults]
forks = 8
gathering = explicit
host_key_checking = True
retry_files_enabled = False

[ssh_connection]
pipelining = True
ssh_args = -C -o ControlMaster=auto -o ControlPersist=60s
"""

PLAYBOOK = """\
- hosts: all
  gather_facts: false
  vars:
    state: "/home/{{ ansible_user }}/{{ state_name | default('.openclaw-ansible') }}"
    release: "{{ state }}/fleet/releases/{{ version }}-{{ sha256[:12] }}"
  tasks:
    - name: directories
      file:
        path: "{{ item }}"
        state: directory
      loop:
        - "{{ state }}/fleet/artifacts"
        - "{{ state }}/fleet/releases"
        - "{{ state }}/extensions"
    - name: config
      copy:
        content: '{"agents": {"list": [{"id": "main", "default": true}]}}'
        dest: "{{ state }}/openclaw.json"
        force: false
    - name: copy the artifact
      copy:
        src: "{{ artifact }}"
        dest: "{{ state }}/fleet/artifacts/{{ sha256 }}.pyz"
        mode: "0644"
    - name: unpack
      command: python3 -m zipfile -e {{ state }}/fleet/artifacts/{{ sha256 }}.pyz {{ release }}
      args:
        creates: "{{ release }}/fleet_manifest.json"
    - name: link current
      file:
        src: "{{ release }}"
        dest: "{{ state }}/fleet/current"
        state: link
        force: true
    - name: link plugins
      file:
        src: "{{ state }}/fleet/current/fleet/plugins/{{ item.pkg }}"
        dest: "{{ state }}/extensions/{{ item.id }}"
        state: link
        force: true
      loop:
        - {id: memory-continuity, pkg: memory_continuity}
        - {id: mc, pkg: mc}
    - name: restart the gateway
      command: python3 -m fleet.gateway --state-dir {{ state }} restart --timeout 120
      args:
        chdir: /
      environment:
        PYTHONPATH: "{{ state }}/fleet/current"
    - name: wait for the new version
      command: python3 -m fleet.gateway --state-dir {{ state }} call health
      args:
        chdir: /
      environment:
        PYTHONPATH: "{{ state }}/fleet/current"
      register: health
      changed_when: false
      until: >-
        health.rc == 0 and
        (health.stdout | from_json).result.versions['memory-continuity'] == version and
        (health.stdout | from_json).result.releaseRoot == release
      retries: 120
      delay: 1
"""


def ensure_ansible(log=print) -> Path:
    """`ansible-playbook` from the bench venv (installed with the bench extra if needed)."""
    return tools.executable("ansible-playbook", log=log)


class AnsibleDeploy:
    def __init__(self, workdir: Path, hosts: list[Host], key: Path, known_hosts: Path,
                 log=print, tuned: bool = False):
        self.exe = ensure_ansible(log=log)
        self.tuned = tuned
        self.workdir = workdir.absolute()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.playbook = self.workdir / "deploy.yml"
        self.playbook.write_text(PLAYBOOK)
        self.inventory = self.workdir / "hosts.ini"
        ssh_args = (f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes "
                    "-o BatchMode=yes")
        lines = ["[all]"]
        for h in hosts:
            lines.append(f"{h.name} ansible_host={h.host} ansible_port={h.port} "
                         f"ansible_user={h.user}")
        lines += ["", "[all:vars]", f"ansible_ssh_private_key_file={key}",
                  f"ansible_ssh_common_args='{ssh_args}'",
                  "ansible_python_interpreter=/usr/bin/python3"]
        self.inventory.write_text("\n".join(lines) + "\n")

    def env(self) -> dict:
        env = dict(os.environ)
        config = self.workdir / "none.cfg"
        if self.tuned:
            config = self.workdir / "tuned.cfg"
            config.write_text(TUNED_CFG)
        env.update({"ANSIBLE_CONFIG": str(config),
                    "ANSIBLE_LOCAL_TEMP": str(self.workdir / "tmp"),
                    "ANSIBLE_SSH_CONTROL_PATH_DIR": str(
                        self.workdir / ("cp-tuned" if self.tuned else "cp")),
                    "ANSIBLE_RETRY_FILES_ENABLED": "False", "ANSIBLE_NOCOLOR": "1",
                    "ANSIBLE_HOST_KEY_CHECKING": "True", "ANSIBLE_DEPRECATION_WARNINGS": "False",
                    "PYTHONWARNINGS": "ignore"})
        return env

    def deploy(self, artifact: ArtifactRef, forks: int | None) -> float:
        cmd = [str(self.exe), "-i", str(self.inventory), str(self.playbook),
               "-e", f"artifact={artifact.path} sha256={artifact.sha256} "
                     f"version={artifact.components.get('memory-continuity', artifact.version)} "
                     f"state_name={TUNED_STATE if self.tuned else STATE}"]
        if forks:
            cmd += ["--forks", str(forks)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env(), timeout=900,
                              stdin=subprocess.DEVNULL)
        elapsed = time.perf_counter() - t0
        if proc.returncode != 0:
            tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
            raise RuntimeError(f"ansible-playbook exited {proc.returncode}:\n{tail}\n"
                               f"{proc.stderr.strip()[-500:]}")
        return elapsed
