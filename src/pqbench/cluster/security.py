"""Dask's TLS options for `pqbench worker` and `pqbench run --cluster`. The engine runs pqbench's code as
root on every worker: run it on a private network, and with TLS (tls:// addresses, a CA every node trusts,
a certificate and key per node) wherever that network is shared."""

from __future__ import annotations

from pathlib import Path

from pqbench.errors import BadInput, MissingCapability

OPTIONS = ("tls_ca_file", "tls_cert", "tls_key")


def add_arguments(parser) -> None:
    parser.add_argument("--tls-ca-file", type=Path, metavar="PEM", help="the CA that signed the cluster's "
                                                                         "certificates (tls:// scheduler addresses)")
    parser.add_argument("--tls-cert", type=Path, metavar="PEM", help="this node's certificate for the cluster")
    parser.add_argument("--tls-key", type=Path, metavar="PEM", help="this node's private key for the cluster")


def from_arguments(args, role: str = "client"):
    """A distributed.Security for role ("client": the driver, "worker"), or None without TLS options."""
    given = {k: getattr(args, k, None) for k in OPTIONS}
    if not any(given.values()):
        return None
    for k, v in given.items():
        flag = "--" + k.replace("_", "-")
        if v is None:
            raise BadInput(flag, "TLS needs all three of --tls-ca-file, --tls-cert and --tls-key")
        if not v.is_file():
            raise BadInput(flag, f"{v} is not a file")
    Security = engine().Security
    return Security(require_encryption=True, tls_ca_file=str(given["tls_ca_file"]),
                    **{f"tls_{role}_cert": str(given["tls_cert"]), f"tls_{role}_key": str(given["tls_key"])})


def engine():
    """The distributed package, or what to install when it is missing (exit 3)."""
    try:
        import distributed
    except ImportError:
        raise MissingCapability("the Python package distributed (Dask) is missing: clusters need it",
                                "run `make` (it installs pqbench[cluster]) or pip install 'pqbench[cluster]'") from None
    return distributed
