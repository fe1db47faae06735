#!/bin/sh
# fleet harness host init under systemd (a oneshot before ssh.service): a host key of this
# container's own, and the run's client key for each login user. systemd does not pass the
# container's environment to services, so the key is read from PID 1's environment. Each user
# gets XDG_RUNTIME_DIR in ~/.ssh/environment (sshd: PermitUserEnvironment), so `systemctl --user`
# over SSH finds the user's manager (lingering, started at boot) without PAM.
set -eu
if [ ! -s /etc/ssh/ssh_host_ed25519_key ]; then
  ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
fi
key=$(tr '\0' '\n' < /proc/1/environ | sed -n 's/^FLEET_AUTHORIZED_KEY=//p')
for user in opc administrator; do
  home=$(getent passwd "$user" | cut -d: -f6)
  uid=$(id -u "$user")
  install -d -m 0700 -o "$user" -g "$user" "$home/.ssh"
  if [ -n "$key" ]; then
    printf '%s\n' "$key" > "$home/.ssh/authorized_keys"
  fi
  printf 'XDG_RUNTIME_DIR=/run/user/%s\n' "$uid" > "$home/.ssh/environment"
  chown "$user:$user" "$home/.ssh/authorized_keys" "$home/.ssh/environment" 2>/dev/null || true
  chmod 0600 "$home/.ssh/authorized_keys" "$home/.ssh/environment" 2>/dev/null || true
done
