"""The `openssl` stack's readiness probe: one real TLS handshake by pqtimer against a site."""

from __future__ import annotations

import json
import subprocess

from pqbench.endpoints.base import ClientJob, Place, Site
from pqbench.endpoints.openssl.pqtimer import Pqtimer

PROBE_TIMEOUT_S = 15.0


def tls_handshake(place: Place, addr: str, site: Site, group: str) -> str | None:
    """None when one handshake with `group` against site succeeds from place, else why not."""
    client = Pqtimer()
    job = ClientJob(host=addr, port=site.port, groups=[group], cafile=str(site.chain.root_cert),
                    servername=site.chain.server_name, timeout_ms=5000)
    argv = client.argv(job, 1, 0, claims=None)
    proc = place.popen(argv, env=client.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return f"no answer within {PROBE_TIMEOUT_S:g} s"
    for line in out.decode(errors="replace").splitlines():
        try:
            sample = json.loads(line)
        except ValueError:
            continue
        return None if sample.get("ok") else f"{sample.get('error_class')}: {sample.get('error')}"
    return f"pqtimer printed no sample (exit {proc.returncode}): {err.decode(errors='replace').strip()[-300:]}"
