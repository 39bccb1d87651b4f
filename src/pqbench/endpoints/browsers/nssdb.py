"""Our CA trusted the way a user trusts one: an NSS database holding it as a trusted authority.

Chromium on Linux reads $HOME/.pki/nssdb, Firefox its profile folder; both verify the server's chain
against it normally, so a chain that should fail still fails (no certificate error is ignored)."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

from pqbench.algorithms import catalog
from pqbench.errors import MissingCapability

FIX = "apt-get install libnss3-tools (or run `scripts/build.sh chromium`)"


def make(directory: Path, ca_pem: str, nickname: str = "pqbench-ca") -> Path:
    """An NSS database (sql:) in directory that trusts ca_pem to issue server certificates."""
    certutil = shutil.which("certutil")
    if certutil is None:
        raise MissingCapability("certutil (NSS's tools) is missing: a browser profile cannot trust our CA", FIX)
    directory.mkdir(parents=True, exist_ok=True)
    run = lambda *argv: subprocess.run([certutil, "-d", f"sql:{directory}", *argv],  # noqa: E731
                                       capture_output=True, text=True)
    done = run("-N", "--empty-password")
    if done.returncode != 0:
        raise MissingCapability(f"certutil -N failed in {directory}: {done.stderr.strip()[-300:]}", FIX)
    done = run("-A", "-t", "C,,", "-n", nickname, "-i", ca_pem)
    if done.returncode != 0:  # NSS cannot hold this certificate (an ML-DSA root): the browser cannot trust it
        raise Untrusted(f"NSS could not add the CA to the profile's database: {done.stderr.strip()[-200:]}")
    return directory


CLASSICAL = ("RSA", "elliptic curve")  # catalog families whose roots every browser cell's database holds


@functools.lru_cache(maxsize=None)
def refuses(sig: str) -> str | None:
    """Why an NSS database made here cannot hold a root that signs with sig, found by adding a real one to a new
    database (None: it holds it)."""
    alg = catalog.find(sig, "sig")
    if alg.family in CLASSICAL:
        return None
    from pqbench.algorithms import certs
    with tempfile.TemporaryDirectory() as d:
        chain = certs.make_chain(alg.name, Path(d) / "chain")
        try:
            make(Path(d) / "db", str(chain.root_cert))
        except Untrusted as e:
            return str(e)
    return None


class Untrusted(Exception):
    """The browser's certificate database refused our CA (what a user trusting it would meet too)."""
