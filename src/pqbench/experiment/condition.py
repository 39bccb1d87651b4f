"""One readable description of a cell (its algorithms, link and workload) from its parameters, as the
store's cells row holds them: for progress lines, report tables and figure labels alike."""

from __future__ import annotations

from pqbench.endpoints import DEFAULT_STACK
from pqbench.transport import DEFAULT as DEFAULT_TRANSPORT, TRANSPORTS


def condition(row: dict, *, short: bool = False) -> str:
    """The link and workload: "RTT 31.1 ms, loss 1 %, 10 Mbit/s, initcwnd 20, page 10k" (short:
    "31.1 ms, 1 %, 10 Mbit/s, cwnd 20, page 10k", loss left out at 0)."""
    loss = 100 * (row.get("loss") or 0)
    if row.get("scenario"):
        parts = [row["scenario"]]
    elif short:
        parts = [f"{row.get('rtt_ms') or 0:g} ms"] + ([f"{loss:g} %"] if loss else [])
    else:
        parts = [f"RTT {row.get('rtt_ms') or 0:g} ms", f"loss {loss:g} %"]
    if row.get("rate_mbit") and not row.get("scenario"):
        parts.append(f"{row['rate_mbit']:g} Mbit/s")
    if row.get("trace"):
        parts.append(f"trace {row['trace']}")
    if row.get("queue"):
        parts.append(row["queue"] if short else f"queue {row['queue']}")
    if row.get("cross"):
        flows = row["cross"].split()
        parts.append(f"+{row['cross']}" if short else
                     f"{flows[0]} competing {flows[1] if len(flows) > 1 else ''} flow{'s' if flows[0] != '1' else ''}")
    if row.get("mtu") and row["mtu"] != 1500:
        parts.append(f"MTU {row['mtu']}")
    if row.get("initcwnd"):
        parts.append(f"{'cwnd' if short else 'initcwnd'} {row['initcwnd']}")
    if row.get("congctl"):
        parts.append(row["congctl"])
    parts += transport(row)
    if row.get("offer"):
        parts.append(f"offer {row['offer']}")
    if row.get("server_groups"):
        parts.append(f"server prefers {row['server_groups']}")
    if row.get("compress"):
        parts.append(f"certs {row['compress']}")
    mode = row.get("mode")
    if mode == "page":
        parts.append(f"page {row.get('page')}")
    elif mode in ("resume_page", "early"):
        parts.append(f"{'resumed' if mode == 'resume_page' else '0-RTT'} page {row.get('page')}")
    elif mode == "requests":
        parts.append(f"{row.get('requests')} req" if short else f"{row.get('requests')} × {row.get('page') or '1k'}")
    elif mode == "resume":
        parts.append("resume" if short else "resumption")
    if row.get("pad"):
        parts.append(f"pad {row['pad']}")
    return ", ".join(parts)


def transport(row: dict) -> list[str]:
    """["QUIC", "Retry", "Initial 1400"] for a QUIC cell (TCP, the default, says nothing)."""
    if (row.get("transport") or DEFAULT_TRANSPORT) == DEFAULT_TRANSPORT:
        return []
    return [TRANSPORTS[row["transport"]].label] + (["Retry"] if row.get("quic_retry") else []) + \
        ([f"Initial {row['initial_size']}"] if row.get("initial_size") else [])


def stacks(row: dict) -> str | None:
    """"server rustls, client gotls" (or "stack rustls" for one stack in both roles), None for the default."""
    server = row.get("server") or row.get("stack") or DEFAULT_STACK
    client = row.get("client") or row.get("stack") or DEFAULT_STACK
    if server == client:
        return None if server == DEFAULT_STACK else f"stack {server}"
    return f"server {server}, client {client}"


def describe(row: dict) -> str:
    """The whole cell: "X25519 + ecdsap256, RTT 31.1 ms, loss 1 %" (", server rustls, client openssl"
    where the stacks are not the default)."""
    pair = stacks(row)
    return f"{row.get('kex')} + {row.get('sig')}, {condition(row)}" + (f", {pair}" if pair else "")
