"""`pqbench handshake`: one measurement point as a one-cell run — a rig with a LinkSpec, the stack's
server serving the chain for the signature algorithm, its client making n connections in total —
summarised by the same cell statistics as a run's cells.
"""

import dataclasses
import datetime
import json
import os
from pathlib import Path

import numpy as np

from pqbench import endpoints, paths, units
from pqbench.algorithms import catalog
from pqbench.measure import concurrency
from pqbench.endpoints import sshkeys
from pqbench.analysis import cells as cellstats
from pqbench.analysis.load import cell_data
from pqbench.endpoints.base import DEFAULT_PAGES, DEFAULT_WORKERS, Serving, Site
from pqbench.errors import BadInput, MissingCapability
from pqbench.experiment.spec import Samples
from pqbench.measure import cell as cellmeasure
from pqbench.measure.rig import Rig, credentials
from pqbench.sample import END_PHASE, PHASES, SSH_PHASES
from pqbench.testbed import EmulatorOptions, LinkSpec, TcpKnobs

PORT = 4433


@dataclasses.dataclass
class HandshakeConfig:
    kex: str
    sig: str
    spec: LinkSpec = dataclasses.field(default_factory=LinkSpec)
    tcp: TcpKnobs = dataclasses.field(default_factory=TcpKnobs)
    n: int = 100
    parallel: int | str = 1  # or "auto" (pqbench.measure.concurrency.Auto within max_bias, up to max_parallel)
    max_bias: float = 0.02
    max_parallel: int = 128
    mode: str = "handshake"
    page: str | None = None  # page name served (1k, 10k, …) for page/requests modes
    requests: int = 1
    pad: int = 0
    warmup: int = 0
    timeout_ms: int = 10_000
    backend: str = "auto"
    emulator: EmulatorOptions = dataclasses.field(default_factory=EmulatorOptions)
    workers: int = DEFAULT_WORKERS  # server worker processes
    server: str = endpoints.DEFAULT_STACK  # server stack (pqbench.endpoints)
    client: str = endpoints.DEFAULT_STACK  # client stack
    protocol: str = "tls"  # or "ssh" (`pqbench ssh`: kex and sig take SSH names, sig is the host key)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["stack"] = self.server if self.server == self.client else f"{self.server}/{self.client}"
        d["spec"] = self.spec.to_dict()
        d["tcp"] = self.tcp.to_dict()
        d["emulator"] = dataclasses.asdict(self.emulator)
        return d


def new_run_dir(prefix: str = "handshake") -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    d = paths.BUILD / "runs" / f"{prefix}-{stamp}-{os.getpid()}"
    d.mkdir(parents=True, exist_ok=False)
    return d


def _names(cfg: HandshakeConfig) -> tuple[str, str]:
    """The key exchange and signature (SSH: host key) by their canonical names, checked."""
    if cfg.protocol == "ssh":
        return sshkeys.check_kex(cfg.kex, "--kex"), sshkeys.check_hostkey(cfg.sig, "--hostkey")
    return (catalog.find(cfg.kex, "kem", field="--kex", protocol="tls").name,
            catalog.find(cfg.sig, "sig", field="--sig", protocol="tls").name)


def run(cfg: HandshakeConfig, run_dir: Path | None = None, progress=None) -> dict:
    if cfg.mode not in END_PHASE:
        raise BadInput("mode", f"{cfg.mode!r} is not one of {', '.join(END_PHASE)}")
    units.integer("-n", cfg.n, minimum=1)
    if cfg.parallel != "auto":
        units.integer("--parallel", cfg.parallel, minimum=1, maximum=256)
    server, client = endpoints.get(cfg.server, "--server"), endpoints.get(cfg.client, "--client")
    for role, st in (("--server", server), ("--client", client)):
        if st.protocol != cfg.protocol:
            raise BadInput(role, f"{st.name} speaks {st.protocol}, not {cfg.protocol} (stacks: "
                                 f"{', '.join(n for n in endpoints.names() if endpoints.get(n).protocol == cfg.protocol)})")
    kex, sig = _names(cfg)
    why = endpoints.unsupported(server.name, client.name, kex, sig, cfg.mode)
    if why:
        raise MissingCapability(f"cannot measure {kex} with {sig} here: {why}",
                                "pick other stacks or algorithms (`pqbench algorithms` shows what each stack offers)")
    run_dir = run_dir or new_run_dir()
    say = progress or (lambda msg: None)
    say(f"{'host key' if cfg.protocol == 'ssh' else 'certificates'}: {sig}")
    chain = credentials(cfg.protocol, sig, run_dir / ("keys" if cfg.protocol == "ssh" else "certs"))
    pages = {cfg.page: units.size_bytes("--page", cfg.page, minimum=1)} if cfg.page else {}
    serving = Serving(run_dir / "server", [Site(PORT, chain)], [kex], {**DEFAULT_PAGES, **pages}, cfg.workers)
    with Rig.pairs({server.name: serving}, [client.name], cfg.spec, cfg.tcp, backend=cfg.backend,
                   emulator=cfg.emulator) as rig:
        say(f"testbed {rig.tb.name} up ({rig.tb.backend_name}): {cfg.spec.describe()}")
        job = rig.job(PORT, kex, chain, mode=cfg.mode, path=f"/{cfg.page}" if cfg.page else "/1k",
                      requests=cfg.requests, warmup=cfg.warmup, timeout_ms=cfg.timeout_ms, pad=cfg.pad)
        control = concurrency.policy(cfg.parallel, max_bias=cfg.max_bias, maximum=cfg.max_parallel,
                                     rtt_ms=cfg.spec.rtt_ms, mode=cfg.mode, requests=cfg.requests)
        say(f"measuring {cfg.n} × {cfg.mode} with {cfg.parallel} {rig.client.name} worker(s)")
        plan = cellmeasure.Plan(cfg.spec, cfg.tcp, job, Samples(cfg.n, cfg.n, None), cfg.max_bias,
                                client=client.name, server=server.name)
        record, samples, _ = cellmeasure.measure(rig, plan, control, run_dir)
        backend = rig.tb.backend_name
    (run_dir / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    result = summarise(cfg, samples, record)
    result["config"]["backend"] = backend
    result["chain"] = {"sig": chain.sig, "bytes_sent_by_server": chain.sent_bytes,
                       **({"der_sizes": chain.der_sizes} if hasattr(chain, "der_sizes") else {}),
                       **({"size_only": chain.to_json()["size_only"]} if getattr(chain, "size_only", False) else {})}
    result["run_dir"] = str(run_dir)
    (run_dir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def _round(v, digits=3):
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else round(float(v), digits)


def _median_phase(samples: list[dict], phase: str) -> float | None:
    v = [s["t_ns"][phase] / 1e6 for s in samples if s.get("ok") and (s.get("t_ns") or {}).get(phase) is not None]
    return _round(np.median(v)) if v else None


def summarise(cfg: HandshakeConfig, samples: list[dict], record: dict | None = None) -> dict:
    """The DESIGN.md `handshake --json` object, from the same cell statistics a run's report uses."""
    record = record or {}
    metric = END_PHASE[cfg.mode]
    cd = cell_data({"kex": cfg.kex, "sig": cfg.sig, "mode": cfg.mode}, samples, metric)
    c = cellstats.analyse_cell(cd, {}, resamples=200)
    pct = {f"p{q}_ms": _round(c.pct[q][0]) if c.ok else None for q in cellstats.QS}
    groups, sigalgs = {s.get("group") for s in samples if s.get("ok")}, {s.get("sigalg") for s in samples if s.get("ok")}
    result = {
        "config": cfg.to_json(),
        "summary": {"n": c.n, "ok": c.ok, "failures": c.failures, "failure_classes": c.failure_classes,
                    "metric": metric, "mean_ms": _round(c.mean) if c.ok else None, **pct},
        # Per handshake, per direction, from the client socket's TCP_INFO when the handshake completed.
        "packets": {"client_to_server": c.wire["packets_c2s"], "server_to_client": c.wire["packets_s2c"]},
        "bytes": {"client_to_server": c.wire["bytes_c2s"], "server_to_client": c.wire["bytes_s2c"]},
        "negotiated": {"group": groups.pop() if len(groups) == 1 else sorted(map(str, groups)) or None,
                       "sigalg": sigalgs.pop() if len(sigalgs) == 1 else sorted(map(str, sigalgs)) or None},
        # Median time of each phase since the start (the Sosnowski-style split follows from these).
        "phases_ms": {p: _median_phase(samples, p) for p in (SSH_PHASES if cfg.protocol == "ssh" else PHASES)},
    }
    for key in ("concurrency", "detector", "wire"):
        if key in record:
            result[key] = record[key]
    if "link_counters" in record:
        result["link"] = record["link_counters"]
    if record.get("cc_client"):
        result["congestion_control"] = {"client": record["cc_client"], "server": record["cc_server"]}
    return result


def format_summary(result: dict) -> str:
    s, c = result["summary"], result["config"]
    lines = [f"{c['kex']} + {c['sig']} over {result['config']['backend']}: {s['n']} samples, "
             f"{s['failures']} failed" + (f" {s['failure_classes']}" if s["failures"] else ""),
             f"  {s['metric']} ms: mean {s['mean_ms']}  p5 {s['p5_ms']}  p25 {s['p25_ms']}  p50 {s['p50_ms']}  "
             f"p75 {s['p75_ms']}  p95 {s['p95_ms']}  p99 {s['p99_ms']}",
             f"  per handshake (median): packets c→s {result['packets']['client_to_server']} "
             f"s→c {result['packets']['server_to_client']}; bytes c→s {result['bytes']['client_to_server']} "
             f"s→c {result['bytes']['server_to_client']}",
             f"  negotiated: group {result['negotiated']['group']}, signature {result['negotiated']['sigalg']}"]
    cc = result.get("congestion_control")
    if cc:
        lines.append(f"  TCP congestion control: client {cc['client']}, server {cc['server']}")
    so = (result.get("chain") or {}).get("size_only")
    if so:
        lines.append(f"  size-only host key: {so['bytes']} bytes on the wire like {so['stands_for']}'s key + signature; "
                     "the computation is ed25519's")
    w = result.get("wire") or {}
    if w.get("n"):
        lines.append(f"  client vs wire time: median {w['median_diff_ms']:+.3f} ms "
                     f"(p5 {w['p5_diff_ms']:+.3f}, p95 {w['p95_diff_ms']:+.3f}; {w['disagree']} of {w['n']} "
                     f"beyond ±{w['tolerance_ms']} ms)")
    d = result.get("detector") or {}
    if d.get("late") is not None:
        lines.append(f"  late samples (no retransmission, beyond {d['threshold_ms']} ms): {d['late']} of {d['untouched']}")
    lines.append(f"  raw samples: {result['run_dir']}/samples.jsonl")
    return "\n".join(lines)
