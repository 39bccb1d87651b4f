"""The report's scan table: the newest `pqbench scan` of each target in the store, one row each."""

from __future__ import annotations

from pqbench import protocol as proto
from pqbench import store
from pqbench.report.tables import Table
from pqbench.report.sections import Section, register


def _tls(r: dict) -> list[str]:
    groups = r.get("groups") or {}
    ready = r.get("readiness") or {}
    pref = r.get("preference") or {}
    tiers = pref.get("tiers") or []
    order = " > ".join(" = ".join(t) for t in tiers) if pref.get("method") or len(tiers) == 1 else "unknown"
    cert = r.get("certificate") or {}
    pq_groups = ", ".join(ready.get("post_quantum_accepted") or []) or "none"
    chain = f"{cert['sigalg']} ({'post-quantum' if cert.get('post_quantum') else 'classical'}; verify: {cert.get('verify')})" \
        if cert else "–"
    sizes = f"{' + '.join(str(c['der_bytes']) for c in cert['chain'])} = {cert['total_bytes']} B" if cert else "–"
    return [f"{pq_groups} (of {len(groups.get('accepted') or [])} accepted)", order if groups.get("accepted") else "–",
            chain, sizes]


def _ssh(r: dict) -> list[str]:
    if "kex" not in r:
        return ["–", "–", "–", "–"]
    return [", ".join(r.get("kex_post_quantum") or []) or "none", " > ".join(r["kex"]),
            "host keys: " + ", ".join(r.get("host_key") or []), "–"]


# Each scanned protocol's columns (a protocol pqbench scans has its entry).
CELLS = {"tls": _tls, "ssh": _ssh}


def table(con) -> Table | None:
    rows = store.scan_rows(con)
    if not rows:
        return None
    body = []
    for row in rows:
        r = row["result"]
        body.append([row["target"], proto.get(row["protocol"]).label, *CELLS[row["protocol"]](r), row["summary"]])
    return Table("scans", "Scans: post-quantum readiness",
                 ["target", "protocol", "post-quantum groups accepted", "server's order (key exchange)",
                  "chain / host keys", "chain sizes (DER, leaf first)", "summary"], body,
                 note="The newest `pqbench scan` of each target in this store. Order: '>' the server's preference "
                      "(from HelloRetryRequests to a rejected key share), '=' groups it ranks alike (the client's "
                      "order decides).")


register(Section("scans", 80, lambda con, run_id, a: [table(con)]))
