"""One readable description of a cell (its algorithms, link and workload) from its parameters, as the
store's cells row holds them: for progress lines, report tables and figure labels alike."""

from __future__ import annotations

from pqbench import axis
from pqbench.endpoints import DEFAULT_STACK
from pqbench.experiment import axes as registry  # noqa: F401  (the labels of every registered axis)


def condition(row: dict, *, short: bool = False) -> str:
    """The link and workload: "RTT 31.1 ms, loss 1 %, 10 Mbit/s, initcwnd 20, page 10k" (short:
    "31.1 ms, 1 %, 10 Mbit/s, cwnd 20, page 10k", loss left out at 0). The registered axes' parts
    (pqbench.axis: their labels) stand among the link's (order 10) and the workload's (order 70)."""
    parts = [(10, p) for p in _link(row, short)] + [(70, p) for p in _workload(row, short)]
    parts += axis.labels(row, short)
    return ", ".join(text for _, text in sorted(parts, key=lambda p: p[0]))


def _link(row: dict, short: bool) -> list[str]:
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
    return parts


def _workload(row: dict, short: bool) -> list[str]:
    mode = row.get("mode")
    if mode == "page":
        return [f"page {row.get('page')}"]
    if mode in ("resume_page", "early"):
        return [f"{'resumed' if mode == 'resume_page' else '0-RTT'} page {row.get('page')}"]
    if mode == "requests":
        return [f"{row.get('requests')} req" if short else f"{row.get('requests')} × {row.get('page') or '1k'}"]
    if mode == "resume":
        return ["resume" if short else "resumption"]
    return []


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
