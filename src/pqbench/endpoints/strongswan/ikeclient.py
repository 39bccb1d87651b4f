"""The `strongswan` stack's timing client: a worker process in the client namespace that, per sample it claims,
starts a charon of its own (a fresh UDP port, so the emulator's record has a flow per sample), gives it the
connection over vici, asks it to initiate, and reads the handshake from its log (ikelog): one JSON sample per
line, pqtimer's command line.

The sample starts as the initiation is asked of charon; a charon's start, its configuration and the SA's deletion
are outside every timed span. A handshake that fails or times out is a failed sample with charon's reason.

    python -m pqbench.endpoints.strongswan.ikeclient --host A --port P --groups KEX --cafile ROOT
        --servername NAME --count N [--worker W] [--claim FILE] [--timeout-ms T] [--pause-ms T]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pqbench.endpoints.base import ClientJob, Place, Site, probe as probe_client
from pqbench.endpoints.claims import Claims
from pqbench.endpoints.strongswan import ikelog, proposals
from pqbench.endpoints.strongswan.charon import Charon
from pqbench.endpoints.strongswan.conns import CONN, client_conn, psk, shared

STACK = "strongswan"
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}  # the worker's own: unshare, mount and sh are found there
# Why a handshake failed, from charon's log: the first pattern found names the error class
_FAILURES = (("timeout", re.compile(r"giving up after \d+ retransmits|timed out|not established after \d+ ?ms")),
             ("no_proposal", re.compile(r"NO_PROPOSAL_CHOSEN|no acceptable proposal|INVALID_KE_PAYLOAD.*no")),
             ("cert_verify", re.compile(r"no trusted \S+ public key found|constraint check failed|verification of .* "
                                        r"failed|certificate .* (?:not trusted|expired)")),
             ("auth_failed", re.compile(r"AUTHENTICATION_FAILED|authentication of .* failed")))


def failure_class(text: str) -> str:
    """The error class of a failed handshake, from charon's log and the initiation's answer."""
    return next((cls for cls, pattern in _FAILURES if pattern.search(text)), "ike_failed")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="pqbench.endpoints.strongswan.ikeclient")
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--groups", required=True, help="one key exchange, as the catalog names it")
    ap.add_argument("--cafile", required=True)
    ap.add_argument("--servername", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--worker", type=int, default=0)
    ap.add_argument("--claim")
    ap.add_argument("--timeout-ms", type=int, default=10_000)
    ap.add_argument("--pause-ms", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=0, help="ignored: every sample has a charon of its own")
    ap.add_argument("--mode", default="handshake", choices=["handshake"])
    ap.add_argument("--transport", default="udp", choices=["udp"])
    ap.add_argument("--fragment-size", type=int, help="charon's fragment_size (IKE fragmentation, RFC 7383)")
    ap.add_argument("--additional-ke", help="ML-KEMs joined by +: further additional key exchanges (RFC 9370)")
    ap.add_argument("--retransmit-timeout", type=float, help="seconds before charon's first retransmission")
    a = ap.parse_args(argv)
    if ":" in a.groups or proposals.key_exchanges(a.groups) is None:
        ap.error(f"--groups: {a.groups!r} is not one key exchange IKEv2 has (those: {', '.join(proposals.KEYWORDS)} "
                 "and their ML-KEM hybrids)")
    return a


def sample(a: argparse.Namespace, root: bytes, i: int, home: Path) -> dict:
    charon = Charon(home / f"sample-{i}", port=0, fragment_size=a.fragment_size,
                    retransmit_timeout_s=a.retransmit_timeout)
    charon.start()
    out = {"worker": a.worker, "i": i, "mode": a.mode, "ok": False, "error_class": None, "error": None,
           "stack": STACK, "protocol": "ike", "transport": "udp"}
    try:
        with charon.session() as vici:
            try:
                vici.load_shared(shared(psk(a.cafile)))
                vici.load_conn(client_conn(a.host, a.port, a.groups, a.servername, root, a.additional_ke))
            except Exception as e:  # noqa: BLE001  (a key file not there, charon refusing the connection)
                raise RuntimeError(f"charon did not take the connection: {e}") from None
            start_ns, out["start_mono_ns"] = time.time_ns(), time.monotonic_ns()
            try:
                vici.request("initiate", {"ike": CONN, "timeout": str(a.timeout_ms)})
                failed = None
            except Exception as e:  # noqa: BLE001  (vici's CommandException: charon's own words)
                failed = str(e)
            # the SA is deleted (its DELETE sent, not waited for): the server keeps no SA per sample
            with contextlib.suppress(Exception):
                vici.request("terminate", {"ike": CONN, "timeout": "-1"})
        log = charon.log_path.read_text(errors="replace")
    except RuntimeError as e:  # charon did not start, listen or take the connection
        out.update(error_class="client_start", error=str(e), t_ns={"start": 0})
        return out
    finally:
        charon.stop()
        shutil.rmtree(charon.directory, ignore_errors=True)
    h = ikelog.parse(log.splitlines())
    out["t_ns"] = {"start": 0, **h.phases_ns(start_ns)}
    out.update(local_port=h.local_port, group=proposals.negotiated(h.proposal), sigalg=h.auth,
               wire_milestone=h.wire_milestone(),
               ike={"proposal": h.proposal, "exchanges": [e.to_json() for e in h.exchanges],
                    "datagrams_sent": sum(len(e.sent_ns) for e in h.exchanges),
                    "datagrams_received": sum(len(e.received_ns) for e in h.exchanges) + h.unassigned_received,
                    "retransmits": sum(e.retransmits for e in h.exchanges),
                    "intermediate_exchanges": len(h.exchange("IKE_INTERMEDIATE"))})
    if failed is None and h.established_ns is not None:
        out["ok"] = True
    else:
        out.update(error_class=failure_class(f"{log}\n{failed}"), error=failed or "charon did not establish the IKE SA")
    return out


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    root = Path(a.cafile).read_bytes()
    claims = Claims(a.claim, a.count)
    home = Path(tempfile.mkdtemp(prefix=f"ikeclient-{a.worker}-"))
    try:
        while (i := claims.next()) is not None:
            print(json.dumps(sample(a, root, i, home)), flush=True)
            if a.pause_ms:
                time.sleep(a.pause_ms / 1000)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


def argv(job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
    return [sys.executable, "-m", "pqbench.endpoints.strongswan.ikeclient",
            *job.tls_client_options(job.groups, count, worker, claims)]


def probe(place: Place, addr: str, site: Site, group: str, timeout_ms: int = 5000) -> str | None:
    """None when one IKEv2 handshake with `group` against site succeeds from place, else why not."""
    job = ClientJob(host=addr, port=site.port, groups=[group], cafile=str(site.chain.root_cert),
                    servername=site.chain.server_name, timeout_ms=timeout_ms, transport="udp",
                    axes=dict(site.options))
    return probe_client(place, argv(job, 1, 0, None), env=ENV)


if __name__ == "__main__":
    sys.exit(main())
