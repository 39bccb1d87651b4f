"""A further origin's certificate: a leaf for its name (originK.pqbench.test) issued by the CA of the chain the
page's own site sends, the CA the browser trusts, as pqbench.algorithms.certs issues one."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pqbench.algorithms import catalog, certs


def leaf_for(root: certs.Chain, sig: str, out: Path, name: str) -> certs.Chain:
    """A root → leaf chain for name whose root is root's (its key beside its certificate)."""
    out.mkdir(parents=True, exist_ok=True)
    ext = out / "extensions.cnf"
    ext.write_text(certs.EXTENSIONS.format(server_name=name))
    certs._new_key(catalog.find(sig, "sig"), out / "leaf.key")
    csr = certs._openssl(["req", "-new", "-key", str(out / "leaf.key"), "-subj", f"/O=pqbench/CN={name}",
                          "-config", str(ext)], f"make {name}'s request")
    ca = root.directory
    certs._openssl(["x509", "-req", "-CA", str(ca / "root.crt"), "-CAkey", str(ca / "root.key"),
                    "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", str(certs.VALID_DAYS),
                    "-extfile", str(ext), "-extensions", "leaf", "-out", str(out / "leaf.crt")],
                   f"sign {name}'s certificate", input=csr)
    (out / "intermediates.pem").write_text("")
    (out / "chain.pem").write_text((out / "leaf.crt").read_text())
    sizes = {"root": root.der_sizes["root"], "leaf": certs.der_size(out / "leaf.crt")}
    chain = certs.Chain(out, root.sig, root.ca_sig, 0, name, root.root_cert, out / "chain.pem", out / "leaf.crt",
                        out / "intermediates.pem", out / "leaf.key", sizes)
    (out / "chain.json").write_text(json.dumps(chain.to_json(), indent=2) + "\n")
    return chain
