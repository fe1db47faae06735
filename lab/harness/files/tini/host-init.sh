#!/bin/sh
# fleet harness host init (PID 2 under tini): per-container host key, client key from the run,
# then keep sshd in the foreground. sshd is restarted unless /run/fleet-harness/sshd.stop exists,
# so the "stop sshd" and "changed host key" faults can act without killing the container.
set -eu
if [ ! -s /etc/ssh/ssh_host_ed25519_key ]; then
  ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
fi
mkdir -p -m 0755 /run/sshd /run/fleet-harness
if [ -n "${FLEET_AUTHORIZED_KEY:-}" ]; then
  for user in opc administrator; do
    home=$(getent passwd "$user" | cut -d: -f6)
    install -d -m 0700 -o "$user" -g "$user" "$home/.ssh"
    printf '%s\n' "$FLEET_AUTHORIZED_KEY" > "$home/.ssh/authorized_keys"
    chown "$user:$user" "$home/.ssh/authorized_keys"
    chmod 0600 "$home/.ssh/authorized_keys"
  done
fi
echo "host-init: ready to start sshd"
while :; do
  if [ ! -e /run/fleet-harness/sshd.stop ]; then
    /usr/sbin/sshd -D -e || echo "host-init: sshd exited with $?"
  fi
  sleep 0.2
done
