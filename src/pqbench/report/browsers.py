"""The report's section on browsers as clients (issue 38, docs/browsers.md): Chromium and Firefox load pages
beside the timing clients.

  page load       per browser, protocol (HTTP/2 over TCP, HTTP/3 over QUIC), chain, RTT and loss: the page's load
                  event with post-quantum key exchange on (X25519MLKEM768) and off (X25519), medians with 95 %
                  bootstrap CIs, and on − off with its CI; the figure draws them against the RTT
  TLS library     the handshake per client stack's TLS library (BoringSSL via Chromium, NSS via Firefox, OpenSSL
                  via pqtimer, s2n-tls, rustls, Go crypto/tls), timed on the wire (SYN to the client's Finished,
                  one clock for every client) and by the library's own client
  critical path   per browser cell: connections, TLS handshakes, and those on the load's critical path (one after
                  another), the load event and the last resource

Samples come from the store (pqbench.store.browser_samples); cells and their parameters from the analysis.
"""

from __future__ import annotations

import json
import math

from matplotlib.figure import Figure

from pqbench import stats, transport
from pqbench.algorithms.sized_chain_axis import label as sized_label
from pqbench.endpoints.browsers import timing
from pqbench.report.tables import Table, ms, with_ci
from pqbench.store import browser_samples
from pqbench.report.sections import Section, register

BROWSERS = ("chromium", "firefox")
# a client stack -> the TLS library its handshakes are
LIBRARIES = {"chromium": "BoringSSL (Chromium)", "firefox": "NSS (Firefox)", "openssl": "OpenSSL (pqtimer)",
             "s2n": "s2n-tls", "rustls": "rustls", "gotls": "Go crypto/tls"}
ON, OFF = "on", "off"


def _pq(kex: str) -> str:
    return ON if "mlkem" in (kex or "").lower() else OFF


def _over_quic(row: dict) -> bool:
    return transport.get(row.get("transport")).datagram


def _protocol(row: dict) -> str:
    if _over_quic(row):
        return "HTTP/3 (QUIC)"
    return f"HTTP/{row.get('http') or '1.1'} (TCP)"


def _chain(row: dict) -> str:
    return (sized_label(row.get("sized_as")) or f"{row.get('sig')} root → leaf").removeprefix("chain ")


# A warm cell's connection (the resumption axis): its rows stand apart from the cold loads of the same page
WARM = {"resume_page": "resumed", "early": "0-RTT"}


def _warm(row: dict) -> str:
    return f", {WARM[row.get('mode')]}" if row.get("mode") in WARM else ""


def _page(row: dict) -> str:
    """The page a cell loaded: a multi-origin page (the webpage axis), or the single resource of its size; a warm
    load's says how it connected."""
    return (row.get("webpage") or f"single {row.get('page') or '1k'}") + _warm(row)


def _loss(row: dict) -> str:
    return f"{100 * (row.get('loss') or 0):g} %"


def _ci(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return (math.nan, math.nan, math.nan)
    lo, hi = stats.bootstrap_ci(values, 50)
    return (stats.percentile(sorted(values), 50), lo, hi)


def _wire_handshake(sample: dict) -> float | None:
    """A TCP connection's handshake on the wire: the SYN to the client's Finished (the first packet of its second
    flight), at the client's side of the link; None over QUIC, whose flights interleave acknowledgements."""
    if _over_quic(sample) or not sample.get("wire"):
        return None
    return timing.wire_milestones(json.loads(sample["wire"])).get("handshake_done")


class Loads:
    """The run's samples by cell, joined to the analysis's cells."""

    def __init__(self, con, run_id: str, a):
        self.by_cell: dict[str, list[dict]] = {}
        for s in browser_samples.page_loads(con, run_id):
            s["wire_handshake_ms"] = _wire_handshake(s)
            self.by_cell.setdefault(s["cell_id"], []).append(s)
        self.cells = [c for c in a.cells if c.row.get("cell_id") in self.by_cell]

    def per_connection(self, cell, field: str) -> list[float]:
        """field (bytes_s2c, packets_c2s …) of every connection of the cell's successful loads."""
        out = []
        for s in self.by_cell.get(cell.row["cell_id"], []):
            if s["ok"] and s.get("connections_wire"):
                out += [c[field] for c in json.loads(s["connections_wire"]) if c.get(field) is not None]
        return out

    def values(self, cell, field: str) -> list[float]:
        return [s[field] for s in self.by_cell.get(cell.row["cell_id"], []) if s["ok"] and s[field] is not None]

    def browser_cells(self) -> list:
        return [c for c in self.cells if c.row.get("client") in BROWSERS and self.values(c, "load_event_ms")]


def _pairs(loads: Loads) -> dict:
    """(browser, page, protocol, chain, rtt, loss) -> {"on": cell, "off": cell}."""
    out: dict[tuple, dict] = {}
    for c in loads.browser_cells():
        r = c.row
        key = (r["client"], _page(r), _protocol(r), _chain(r), r.get("rtt_ms") or 0.0, r.get("loss") or 0.0)
        out.setdefault(key, {})[_pq(r.get("kex"))] = c
    return dict(sorted(out.items(), key=lambda kv: kv[0]))


def page_load_table(loads: Loads) -> Table | None:
    rows = []
    for (browser, page, proto, chain, rtt, loss), pair in _pairs(loads).items():
        on = loads.values(pair[ON], "load_event_ms") if ON in pair else []
        off = loads.values(pair[OFF], "load_event_ms") if OFF in pair else []
        diff = stats.bootstrap_diff(off, on) if on and off else (math.nan,) * 3
        rows.append([browser, page, proto, chain, f"{rtt:g}", f"{100 * loss:g} %", with_ci(_ci(off)), with_ci(_ci(on)),
                     with_ci(diff), f"{len(off)} / {len(on)}"])
    if not rows:
        return None
    return Table("browser-page-load", "Browsers: page-load time, post-quantum on vs off (ms)",
                 ["browser", "page", "protocol", "chain", "RTT ms", "loss", "PQ off p50 [95 % CI]", "PQ on p50 [95 % CI]",
                  "on − off [95 % CI]", "n off / on"], rows,
                 "The page's load event (Chromium's Page.loadEventFired, Firefox's window stop), from the start of "
                 "the load's first connection, per sample in a new browser context (cold connections; a resumed or "
                 "0-RTT page: the load after an untimed priming load in that context, its connections closed). PQ on: "
                 "X25519MLKEM768; off: X25519 (Chromium: the server accepts only X25519 while the browser still "
                 "sends its ML-KEM share; Firefox: its own prefs, no ML-KEM share leaves). CIs: percentile "
                 "bootstrap of the median; the difference resamples both cells independently. A chain 'sized as' "
                 "a post-quantum one is size-only: the cell's classical chain padded to that chain's bytes.")


def page_load_figure(loads: Loads) -> Figure | None:
    pairs = _pairs(loads)
    if not pairs:
        return None
    panels: dict[tuple, dict] = {}
    for (browser, page, proto, chain, rtt, loss), pair in pairs.items():
        panels.setdefault((browser, page, proto, loss), {}).setdefault(chain, {})[rtt] = pair
    cols = min(4, len(panels))
    nrows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(max(6.4, 4.4 * cols + 0.6), 3.4 * nrows + 1.0), layout="constrained")
    axes = fig.subplots(nrows, cols, squeeze=False).ravel()
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    chains = sorted({ch for p in panels.values() for ch in p})
    for ax, ((browser, page, proto, loss), by_chain) in zip(axes, sorted(panels.items())):
        for k, chain in enumerate(chains):
            for pq, style, marker in ((OFF, "--", "o"), (ON, "-", "s")):
                pts = [(rtt, _ci(loads.values(pair[pq], "load_event_ms")))
                       for rtt, pair in sorted(by_chain.get(chain, {}).items()) if pq in pair]
                pts = [(x, e) for x, e in pts if not math.isnan(e[0])]
                if not pts:
                    continue
                dodge = 1 + 0.012 * (2 * k + (pq == ON) - len(chains))  # side by side, so the CIs stay apart
                xs = [x * dodge for x, _ in pts]
                ys = [e[0] for _, e in pts]
                err = [[e[0] - e[1] for _, e in pts], [e[2] - e[0] for _, e in pts]]
                ax.errorbar(xs, ys, yerr=err, color=f"C{k}", ls=style, marker=marker, ms=4, capsize=3,
                            label=f"{chain}, PQ {pq}")
        ax.set_title(f"{browser}, {page}, {proto}, loss {100 * loss:g} %", fontsize=8)
        ax.set_xlabel("RTT (ms)")
        ax.set_ylabel("page load (ms)")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="outside lower center", ncols=min(4, len(labels) or 1))
    return fig


def library_table(loads: Loads) -> Table | None:
    if not loads.browser_cells():  # the browser section: runs without browsers report as they did
        return None
    rows = []
    cells = [c for c in loads.cells if c.row.get("client") in LIBRARIES and loads.values(c, "handshake_done_ms")]
    key = lambda c: (c.row.get("rtt_ms") or 0, c.row.get("loss") or 0, _protocol(c.row), _chain(c.row),  # noqa: E731
                     c.row.get("kex"), _warm(c.row), LIBRARIES[c.row["client"]])
    for c in sorted(cells, key=key):
        r = c.row
        rows.append([LIBRARIES[r["client"]], r.get("kex") + _warm(r), "HTTP/3 (QUIC)" if _over_quic(r) else "TCP",
                     _chain(r), f"{r.get('rtt_ms') or 0:g}", _loss(r), with_ci(_ci(loads.values(c, "wire_handshake_ms"))),
                     with_ci(_ci(loads.values(c, "handshake_done_ms"))), str(len(loads.values(c, "handshake_done_ms")))])
    if not rows:
        return None
    return Table("browser-libraries", "Handshake time per TLS library (ms)",
                 ["TLS library (client)", "key exchange", "transport", "chain", "RTT ms", "loss",
                  "on the wire p50 [95 % CI]", "library's own clock p50 [95 % CI]", "n"], rows,
                 "On the wire (TCP): pqlink's record of the connection, from the SYN to the client's Finished (the "
                 "first packet of its second flight) at the client's side of the link, one clock for every client; "
                 "over QUIC, whose flights interleave acknowledgements, only the library's own time. The library's "
                 "own: its client's handshake end from its own connect start (Chromium starts that clock a few ms "
                 "after the SYN: docs/browsers.md). Every client against the same nginx (OpenSSL) on the same link.")


def critical_path_table(loads: Loads) -> Table | None:
    rows = []
    for (browser, page, proto, chain, rtt, loss), pair in _pairs(loads).items():
        for pq in (OFF, ON):
            c = pair.get(pq)
            if c is None:
                continue
            med = lambda f: _ci(loads.values(c, f))[0]  # noqa: E731
            conn = lambda f: _ci(loads.per_connection(c, f))[0]  # noqa: E731
            each = lambda f: "–" if math.isnan(conn(f + "_c2s")) else f"{conn(f + '_c2s'):,.0f} / {conn(f + '_s2c'):,.0f}"  # noqa: E731
            rows.append([browser, page, proto, chain, f"{rtt:g}", f"{100 * loss:g} %", pq, f"{med('connections'):g}",
                         f"{med('handshakes'):g}", f"{med('critical_handshakes'):g}", ms(med("load_event_ms")),
                         ms(med("last_byte_ms")), each("bytes"), each("packets")])
    if not rows:
        return None
    return Table("browser-critical-path", "Browsers: connections and TLS handshakes on the critical path (medians)",
                 ["browser", "page", "protocol", "chain", "RTT ms", "loss", "PQ", "connections", "TLS handshakes",
                  "on the critical path", "load event ms", "last resource ms", "bytes per connection c→s / s→c",
                  "packets per connection c→s / s→c"], rows,
                 "On the critical path: the longest chain of the load's connections each started after the previous "
                 "one's handshake ended, to the connection whose last byte came last (a page whose resources come "
                 "from other origins waits for the document's handshake, then for theirs). Last resource: the last "
                 "byte of the load's last response, from the start of its first connection. Bytes and packets: "
                 "medians over every connection of the cell's loads, each joined to its own flow in the emulator's "
                 "record (IP packets at the client's side of the link, each way).")


def tables(con, run_id: str, a) -> list[Table]:
    loads = Loads(con, run_id, a)
    return [t for t in (page_load_table(loads), library_table(loads), critical_path_table(loads)) if t is not None]


def figures(con, run_id: str):
    """The section's figures as plots.render_all takes them: (id, title, function of the analysis)."""
    return (("browser-page-load", "Browsers: page-load time, post-quantum on vs off",
             lambda a: page_load_figure(Loads(con, run_id, a))),)


CAPTIONS = {
    "browser-page-load": "One panel per browser, page, protocol and loss rate: the page's load event (median, 95 % bootstrap "
                         "CI) against the RTT, post-quantum key exchange on (X25519MLKEM768, solid) and off (X25519, "
                         "dashed), one colour per chain (size-only: a classical chain padded to a post-quantum "
                         "chain's bytes).",
}


register(Section("browsers", 22, tables, figures, figure_order=70, captions=CAPTIONS))
