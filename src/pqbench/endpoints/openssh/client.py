"""The `openssh` stack's client: OpenSSH's own ssh (build/openssh), timed by sshtimer --openssh.

sshtimer starts ssh per sample with a ProxyCommand relay (sshtimer --relay) that takes the sample's
zero just before its TCP connect, so ssh's start-up is outside the timing, and traces the
unencrypted start of the connection like the Go client (userauth_done is not observable: null).
The relay adds a pipe hop per flight (tens of microseconds); the wire record times the connection
itself. This is the only client here for sntrup761x25519-sha512 and diffie-hellman-group18-sha512.
"""

from __future__ import annotations

from pathlib import Path

from pqbench.endpoints import sshkeys
from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.gossh.client import SshTimer
from pqbench.errors import MissingCapability
from pqbench.sample import SSH_MILESTONES


def ssh_binary() -> Path:
    return sshkeys.openssh_root() / "usr" / "bin" / "ssh"


class OpenSshClient:
    name = "openssh-ssh"
    milestones = SSH_MILESTONES

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        if not ssh_binary().exists():
            from pqbench.endpoints.openssh.sshd import FIX
            raise MissingCapability(f"{ssh_binary()} is missing", FIX)
        if job.target:
            raise MissingCapability("OpenSSH's ssh authenticates, and a target gives it no account",
                                    "measure an SSH target with the gossh client (sshtimer --kex-only)")
        return SshTimer().argv(job, count, worker, claims) + ["--openssh", str(ssh_binary())]

    def env(self) -> dict:
        return {**sshkeys.openssh_env(), "HOME": "/nonexistent"}
