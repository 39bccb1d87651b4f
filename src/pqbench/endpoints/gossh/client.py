"""sshtimer (native/sshgo/cmd/sshtimer): the SSH timing client, shared by the SSH stacks.

A job's `groups[0]` is the key exchange; its `cafile` is the host public key of an SSH key set
(pqbench.endpoints.sshkeys), whose directory also names the host key algorithm and holds the user key.
For a size-only key set `cafile` is the run's CA, and the host certificate must name the key set's
server_name (--principal).

On the wire, handshake_done is the client's NEWKEYS. Which client flight carries it depends on
whether the server's identification and KEXINIT reached the client in one flight or two (a race of
microseconds), so sshtimer reports the flight it saw per sample (`wire_milestone`);
pqbench.sample.SSH_MILESTONES is the common case.
"""

from __future__ import annotations

from pathlib import Path

from pqbench.sample import SSH_MILESTONES
from pqbench.endpoints import sshkeys
from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.gossh import build


class SshTimer:
    name = "sshtimer"
    milestones = SSH_MILESTONES

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        b = build.require("sshtimer")
        common = ["--count", str(count), "--warmup", str(job.warmup), "--timeout-ms", str(job.timeout_ms),
                  "--worker", str(worker), "--mode", job.mode] + (["--pause-ms", str(job.pause_ms)] if job.pause_ms else [])
        if job.target:  # no account there: the sample ends at NEWKEYS; the host key checked if it was given
            return [str(b), "--host", job.host, "--port", str(job.port), "--kex", job.groups[0], "--kex-only",
                    *(["--known-host-key", job.cafile] if job.cafile else []), *common,
                    *(["--claim", str(claims)] if claims else [])]
        keys = sshkeys.keys_of(job.cafile)
        hostkey = getattr(job, "hostkey", None) or keys.sig
        identity = getattr(job, "identity", None) or keys.user_key
        argv = [str(b), "--host", job.host, "--port", str(job.port), "--kex", job.groups[0], "--hostkey", hostkey,
                "--user", sshkeys.USER, "--identity", str(identity), "--known-host-key", job.cafile, *common]
        if keys.size_only:
            argv += ["--principal", keys.server_name]
        return argv + (["--claim", str(claims)] if claims else [])

    def env(self) -> dict:
        return {}


PROBE_TIMEOUT_S = 15.0


def probe(place, addr: str, port: int, keys, kex: str) -> tuple[str | None, dict | None]:
    """One real SSH connection (key exchange, authentication, command) by sshtimer from place:
    (None, sample) when it succeeds, else (why not, sample or None)."""
    import json
    import subprocess
    client = SshTimer()
    job = ClientJob(host=addr, port=port, groups=[kex], cafile=str(keys.root_cert), servername=keys.server_name,
                    timeout_ms=5000)
    proc = place.popen(client.argv(job, 1, 0, claims=None), env=client.env(), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return f"no answer within {PROBE_TIMEOUT_S:g} s", None
    for line in out.decode(errors="replace").splitlines():
        try:
            sample = json.loads(line)
        except ValueError:
            continue
        return (None if sample.get("ok") else f"{sample.get('error_class')}: {sample.get('error')}"), sample
    return f"sshtimer printed no sample (exit {proc.returncode}): {err.decode(errors='replace').strip()[-300:]}", None
