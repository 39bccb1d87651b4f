"""The `gossh` stack's load generator: sshload (native/sshgo/cmd/sshload), open-loop SSH key exchanges to
NEWKEYS both ways, without an account (as sshtimer --kex-only), on golang.org/x/crypto/ssh."""

from __future__ import annotations

from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.gossh import build


class SshLoad:
    name = "sshload"

    def argv(self, job: ClientJob, rate: float, duration_ms: int, *, max_inflight: int, seed: int) -> list[str]:
        return [str(build.require("sshload")), "--host", job.host, "--port", str(job.port), "--kex", job.groups[0],
                "--rate", f"{rate:g}", "--duration-ms", str(duration_ms), "--timeout-ms", str(job.timeout_ms),
                "--max-inflight", str(max_inflight), "--seed", str(seed)]

    def env(self) -> dict:
        return {}
