"""A browser run end to end (real Chromium and Firefox, real nginx, pqlink): a small spec in the shape of
experiments/browsers.toml is measured and its report carries the browser section - page-load time with
post-quantum on and off per browser with CIs, the handshake per TLS library, the handshakes on the critical
path - and the size-only chain sends the ML-DSA-65 chain's bytes."""

import json

import pytest

from pqbench.experiment import spec as specmod
from pqbench.report import browsers as browser_report

SPEC = """
name = "browsers-small"
seed = 38
parallel = 1
lanes = 1
workers = 2
timeout = "20s"
samples = 3
[axes]
kex = ["X25519MLKEM768", "X25519"]
server_groups = ["X25519MLKEM768", "X25519"]
sig = ["ecdsap256"]
sized_as = ["mldsa65"]  # the size-only chain only: the plain one adds 4 cells and nothing to check
client = ["chromium", "firefox"]
page = ["10k"]
http = ["2"]
rtt = ["10ms"]
loss = ["0%"]
"""


@pytest.mark.root
@pytest.mark.slow
def test_a_browser_run_reports_page_load_pq_on_vs_off_per_browser(built_stack, tmp_path):
    from pqbench import report, store
    from pqbench.measure import runner
    db = tmp_path / "r.duckdb"
    run_id = runner.run(specmod.parse(SPEC, "browsers-small.toml"), db, quiet=True, keep_files=False)
    con = store.connect(db, read_only=True)
    rows = con.execute("""SELECT c.client, c.kex, c.sized_as, count(*) FILTER (WHERE s.ok), any_value(s.raw),
                          any_value(c.chain_parts) FROM cells c JOIN samples s USING (run_id, cell_id)
                          WHERE c.run_id = ? GROUP BY ALL ORDER BY ALL""", [run_id]).fetchall()
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (client, kex, sized, 3) for client in ("chromium", "firefox") for kex in ("X25519", "X25519MLKEM768")
        for sized in ("mldsa65",)], rows
    for client, kex, sized, _, raw, parts in rows:
        s = json.loads(raw)
        # HTTP/2 by ALPN, the cell's group, one connection whose handshake is the load's critical path
        assert {r["protocol"] for r in s["browser"]["requests_detail"] if r["document"]} == {"h2"}, s
        assert s["group"].lower() == kex.lower() and s["browser"]["critical_handshakes"] == 1
        if sized:  # the server sent the bytes of a real ML-DSA-65 root → leaf chain, as a padded ECDSA one
            p = json.loads(parts)
            assert p["size_only"] and p["stand_in"]["sized_as"] == "mldsa65" and p["sent"] == p["stand_in"]["bytes"]
            assert p["sent"] > 5000
    out = report.build(con, run_id, tmp_path / "report", resamples=100)
    md = (tmp_path / "report" / "summary.md").read_text()
    assert "browser-page-load" in out["figures"]
    section = md.split("## Browsers: page-load time, post-quantum on vs off (ms)")[1].split("\n## ")[0]
    table = [line for line in section.splitlines() if line.startswith(("| chromium", "| firefox"))]
    assert len(table) == 2, section  # 2 browsers, each with PQ off and on side by side
    for line in table:
        cols = [c.strip() for c in line.strip("|").split("|")]
        assert cols[1] == "single 10k" and cols[2] == "HTTP/2 (TCP)" and cols[9] == "3 / 3", cols
        assert all("[" in cols[i] and "–" not in cols[i] for i in (6, 7, 8)), cols  # medians with their CIs
    assert "sized as mldsa65 (size-only)" in section
    libs = md.split("## Handshake time per TLS library (ms)")[1].split("\n## ")[0]
    assert "BoringSSL (Chromium)" in libs and "NSS (Firefox)" in libs
    assert "Browsers: connections and TLS handshakes on the critical path" in md


def test_warm_loads_stand_apart_from_cold_ones_in_the_browser_tables():
    class Loads:  # three cells of one browser, page, protocol, chain, RTT and loss: cold, resumed, 0-RTT
        def __init__(self):
            rows = [{"client": "firefox", "page": "1k", "kex": "X25519MLKEM768", "mode": m, "cell_id": m}
                    for m in ("page", "resume_page", "early")]
            self.cells = [type("Cell", (), {"row": r})() for r in rows]

        def browser_cells(self):
            return self.cells
    pairs = browser_report._pairs(Loads())
    assert sorted(k[1] for k in pairs) == ["single 1k", "single 1k, 0-RTT", "single 1k, resumed"]
    assert all(list(p) == ["on"] for p in pairs.values())
