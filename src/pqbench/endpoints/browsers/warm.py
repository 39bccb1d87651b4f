"""A browser's warm loads (the resumption axis: resumed, 0-RTT), checked from the server's side.

A warm sample is a priming load (untimed: it gets the session ticket), the browser's connections closed, then
the timed load in the same context, which should resume with that ticket (and, in mode `early`, send its GET
as 0-RTT early data). The browser does not say reliably whether it resumed (Chromium's DevTools do not say at
all), so the server's access log does: nginx logs $ssl_session_reused (r) and $ssl_early_data (1) per request
(pqbench.endpoints.openssl.nginx_config). A warm sample that did not resume is a failure (`not_resumed`, as
pqtimer's); one the server's log does not name is kept but flagged (`resumed` None, `resumption_check`)."""

from __future__ import annotations

from pathlib import Path

MODES = ("resume_page", "early")  # the job modes of a warm load (pqbench.experiment.spec.RESUMPTIONS)


def is_warm(mode: str) -> bool:
    return mode in MODES


def server_log(paths: list[Path]) -> dict[str, tuple[bool, bool]]:
    """"client address:port" -> (session resumed, a request came as early data), over every request of a
    connection in nginx's access logs (its format: pqbench.endpoints.openssl.nginx_config)."""
    out: dict[str, tuple[bool, bool]] = {}
    for p in paths:
        try:
            lines = Path(p).read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 3 or fields[-2] not in ("r", "."):
                continue  # a line from before the log named resumption
            reused, early = fields[-2] == "r", fields[-1] == "1"
            was = out.get(fields[0], (False, False))
            out[fields[0]] = (was[0] or reused, was[1] or early)
    return out


def candidate_ports(sample: dict) -> list[int]:
    """The local ports of the sockets the load opened to its document's server, where the browser did not say
    which carried the document (Chromium opens a second socket when a connect is slow): the server's log names
    the one a request came over."""
    doc = next((r for r in (sample.get("browser") or {}).get("requests_detail") or []
                if r.get("document") and r.get("connection")), None)
    return list((doc or {}).get("connection", {}).get("candidate_ports") or [])


def check(samples: list[dict], logs: list[Path], client_addr: str) -> None:
    """Sets each warm sample's `resumed` (and, for 0-RTT, `early_data`) from the server's log, by its document
    connection's local port; a sample that did not resume fails as `not_resumed`."""
    warm = [s for s in samples if is_warm(s.get("mode") or "") and s.get("ok") and "browser" in s]
    if not warm:
        return
    seen = server_log(logs)
    for s in warm:
        ports = [s["local_port"]] if s.get("local_port") is not None else candidate_ports(s)
        named = [seen[f"{client_addr}:{p}"] for p in ports if f"{client_addr}:{p}" in seen]
        got = named[0] if len(named) == 1 else None
        if got is None:
            s.update(resumed=None, resumption_check=f"the server's log names {len(named)} connections from the "
                                                    f"load's ports {ports}, not one: resumption unverified")
            continue
        s["resumed"] = got[0]
        if s["mode"] == "early":
            # nginx marks a request that came before the handshake completed; it cannot tell a browser that sent
            # none from one whose early data it refused (it accepts every early data its tickets allow)
            s["early_data"] = "accepted" if got[1] else "not_accepted"
        if not got[0]:
            s.update(ok=False, error_class="not_resumed",
                     error="the server did not resume the session (a full handshake after the priming load)")
