"""A run's page loads as the report's browser section reads them: per sample, the page's load (load event, last
resource), its connections and TLS handshakes, and each client's handshake time, from the samples' raw JSON
(what a browser records of a load lives there, pqbench.endpoints.browsers.timing)."""

from __future__ import annotations

_FIELDS = {  # name -> JSON path in a sample's raw record
    "load_event_ms": "$.browser.load_event_ms", "last_byte_ms": "$.browser.last_byte_ms",
    "connections": "$.browser.connections", "handshakes": "$.browser.handshakes",
    "critical_handshakes": "$.browser.critical_handshakes",
}


def page_loads(con, run_id: str) -> list[dict]:
    """Every sample of the run: cell_id, ok, stack, transport, handshake_done_ms, duration_ms, the emulator's
    record of its connection (wire, JSON text), each connection of a browser's load joined to its flow
    (connections_wire, JSON text) and the browser's fields above (None for a client that is not a
    browser)."""
    extracted = ", ".join(f"TRY_CAST(json_extract(raw, '{path}') AS DOUBLE) AS {name}" for name, path in _FIELDS.items())
    cur = con.execute(f"SELECT cell_id, ok, stack, transport, handshake_done_ms, duration_ms, "
                      f"CAST(json_extract(raw, '$.wire') AS VARCHAR) AS wire, "
                      f"CAST(json_extract(raw, '$.browser.connections_wire') AS VARCHAR) AS connections_wire, {extracted} "
                      "FROM samples WHERE run_id = ? ORDER BY cell_id, seq", [run_id])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]
