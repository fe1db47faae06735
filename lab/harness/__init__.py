"""lab.harness: real SSH hosts in Docker, built offline, for end-to-end deploy and session tests.

- image.py    debootstrap rootfs (cached tar keyed by its inputs), docker import, sshd/users layer
- keys.py     the run's ed25519 client key (never in the image)
- hosts.py    one container per host, sshd on 127.0.0.1:<random port>, staged readiness
- run.py      a run: id, key, hosts, generated inventory.yaml + known_hosts + harness.json
- cleanup.py  labels, removal by run id, sweep of stale runs (dead owner or older than 2 h)
- faults.py   context managers that heal: pause, sshd stopped, host key changed, full disk,
              kill at an installer step, corrupted upload
- remote.py   the deployed gateway client on a host, over SSH as the host's user
- ssh.py      strict-host-key SSH with a deadline on every step
- siteworker.py  a site's Temporal worker on another machine (a container of its own)

Tasks: `invoke harness.up [--count N]`, `harness.status`, `harness.down`; then
`invoke deploy --inventory .fleet/harness/inventory.yaml -H all --yes`.
"""
