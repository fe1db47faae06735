"""Host certificates on harness hosts: sshd presents its host key signed by a test's CA.

Companies sign their hosts' keys with a CA and give clients one `@cert-authority` line instead
of a key line per host; this makes a harness host one of those. The CA stays on the control
side: the host's public key is signed here (`cryptography`), only the certificate goes to the
host, and sshd is restarted to present it (`HostCertificate` is read when sshd starts).
"""

from __future__ import annotations

import shlex

from cryptography.hazmat.primitives import serialization

from lab.harness import faults, hosts

CERT_PATH = hosts.HOST_KEY_PATH.removesuffix(".pub") + "-cert.pub"
DROP_IN = "/etc/ssh/sshd_config.d/fleet-host-certificate.conf"


def sign(host_key: str, ca, principals: list[str], valid_after: int, valid_before: int,
         key_id: str = "harness") -> str:
    """The OpenSSH host certificate (a `-cert.pub` line) of `host_key` (`type base64`, as
    `Host.host_key` holds it) signed by the private key `ca`, valid for `principals` from
    `valid_after` to `valid_before` (seconds since 1970)."""
    builder = (serialization.SSHCertificateBuilder()
               .public_key(serialization.load_ssh_public_key(host_key.encode()))
               .serial(1).type(serialization.SSHCertificateType.HOST).key_id(key_id.encode())
               .valid_principals([p.encode() for p in principals])
               .valid_after(valid_after).valid_before(valid_before))
    return builder.sign(ca).public_bytes().decode()


def present(host: hosts.Host, certificate: str) -> None:
    """Make the host's sshd present `certificate` beside its key, and wait until it does. Only
    hosts whose sshd runs under docker's init (`tini`) can restart it this way."""
    if host.spec.init != "tini":
        raise hosts.HostError(f"{host.name}: host certificates need a tini host, not "
                              f"{host.spec.init}")
    host.exec_ok(f"printf '%s\\n' {shlex.quote(certificate.strip())} > {CERT_PATH} && "
                 f"printf 'HostCertificate {CERT_PATH}\\n' > {DROP_IN}", timeout=10)
    faults.restart_sshd(host)
