"""`pqbench handshake`: one measurement point — a testbed with a LinkSpec, nginx serving the chain
for the signature algorithm, P pqtimer workers making n connections in total — and its summary.
"""

import dataclasses
import datetime
import json
import os
from pathlib import Path

from pqbench import catalog, certs, concurrency, paths, stats, units
from pqbench.endpoints import pqtimer
from pqbench.endpoints.pqtimer import END_PHASE
from pqbench.endpoints.nginx import DEFAULT_PAGES, DEFAULT_WORKERS, FIRST_PORT, NginxConfig, NginxServer, Site, tcp_probe
from pqbench.errors import BadInput, MissingCapability
from pqbench.testbed import EmulatorOptions, LinkSpec, TcpKnobs, Testbed


@dataclasses.dataclass
class HandshakeConfig:
    kex: str
    sig: str
    spec: LinkSpec = dataclasses.field(default_factory=LinkSpec)
    tcp: TcpKnobs = dataclasses.field(default_factory=TcpKnobs)
    n: int = 100
    parallel: int | str = 1  # or "auto" (pqbench.concurrency.Auto within max_bias, up to max_parallel)
    max_bias: float = 0.02
    max_parallel: int = 128
    mode: str = "handshake"
    page: str | None = None  # page name served by nginx (1k, 10k, …) for page/requests modes
    requests: int = 1
    pad: int = 0
    warmup: int = 0
    timeout_ms: int = 10_000
    backend: str = "auto"
    emulator: EmulatorOptions = dataclasses.field(default_factory=EmulatorOptions)
    workers: int = DEFAULT_WORKERS  # nginx worker processes

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["spec"] = self.spec.to_dict()
        d["tcp"] = self.tcp.to_dict()
        d["emulator"] = dataclasses.asdict(self.emulator)
        return d


def page_name(size_bytes: int) -> str:
    """nginx page names: 1000 -> 1k, 1000000 -> 1000k, others in bytes."""
    return f"{size_bytes // 1000}k" if size_bytes % 1000 == 0 else str(size_bytes)


def resolve_tls(name: str, kind: str, field: str) -> catalog.Algorithm:
    alg = catalog.find(name, kind, field=field)
    avail = catalog.availability(alg)
    if not avail.tls:
        raise MissingCapability(f"{field} {alg.name} cannot be used in TLS 1.3 here: "
                                f"{avail.reason or 'no TLS code point'}",
                                "see `pqbench algorithms` for what this build offers")
    return alg


def new_run_dir(prefix: str = "handshake") -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    d = paths.BUILD / "runs" / f"{prefix}-{stamp}-{os.getpid()}"
    d.mkdir(parents=True, exist_ok=False)
    return d


def run(cfg: HandshakeConfig, run_dir: Path | None = None, progress=None) -> dict:
    if cfg.mode not in END_PHASE:
        raise BadInput("mode", f"{cfg.mode!r} is not one of {', '.join(END_PHASE)}")
    units.integer("-n", cfg.n, minimum=1)
    if cfg.parallel != "auto":
        units.integer("--parallel", cfg.parallel, minimum=1, maximum=256)
    kex = resolve_tls(cfg.kex, "kem", "--kex")
    sig = resolve_tls(cfg.sig, "sig", "--sig")
    run_dir = run_dir or new_run_dir()
    say = progress or (lambda msg: None)
    say(f"certificates: {sig.name} chain")
    chain = certs.make_chain(sig.name, run_dir / "certs")
    pages = {cfg.page: units.size_bytes("--page", cfg.page, minimum=1)} if cfg.page else {}
    with Testbed(cfg.spec, tcp=cfg.tcp, backend=cfg.backend, emulator=cfg.emulator) as tb:
        say(f"testbed {tb.name} up ({tb.backend_name}): {cfg.spec.describe()}")
        server = NginxServer(NginxConfig(run_dir / "nginx", tb.server_addr, [Site(FIRST_PORT, chain)],
                                         groups=[kex.name], workers=cfg.workers,
                                         pages={**DEFAULT_PAGES, **pages}))
        with server:
            server.start(lambda argv, **kw: _noted(tb, tb.popen("server", argv, **kw)),
                         lambda port: tcp_probe(lambda: tb.socket("client"), tb.server_addr, port))
            job = pqtimer.TimerJob(host=tb.server_addr, port=FIRST_PORT, groups=[kex.name],
                                   cafile=str(chain.root_cert), servername=chain.server_name, mode=cfg.mode,
                                   path=f"/{cfg.page}" if cfg.page else "/1k", requests=cfg.requests,
                                   warmup=cfg.warmup, timeout_ms=cfg.timeout_ms, pad=cfg.pad)
            control = concurrency.policy(cfg.parallel, max_bias=cfg.max_bias, maximum=cfg.max_parallel,
                                         rtt_ms=cfg.spec.rtt_ms, mode=cfg.mode, requests=cfg.requests)
            say(f"measuring {cfg.n} × {cfg.mode} with {cfg.parallel} pqtimer worker(s)")
            tb.reset_counters()
            samples = pqtimer.run(job, cfg.n, control,
                                  lambda argv, **kw: _noted(tb, tb.popen("client", argv, **kw)), run_dir)
            link = tb.counters()
            backend = tb.backend_name
    (run_dir / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    result = summarise(cfg, samples, link)
    result["config"]["backend"] = backend
    result["concurrency"] = control.summary()
    result["chain"] = {"sig": chain.sig, "bytes_sent_by_server": chain.sent_bytes, "der_sizes": chain.der_sizes}
    result["run_dir"] = str(run_dir)
    (run_dir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def _noted(tb: Testbed, proc):
    tb.note_process(proc.pid)  # so `pqbench net clean` can stop it after a crash
    return proc


def _median(values):
    values = [v for v in values if v is not None]
    return stats.median(values) if values else None


def summarise(cfg: HandshakeConfig, samples: list[dict], link: dict | None = None) -> dict:
    """The DESIGN.md `handshake --json` object from raw samples."""
    ok = [s for s in samples if s.get("ok")]
    end = END_PHASE[cfg.mode]
    times = [s["t_ns"][end] / 1e6 for s in ok if s["t_ns"].get(end) is not None]
    tcp = [s.get("tcp_handshake") or {} for s in ok]
    groups = {s.get("group") for s in ok}
    sigalgs = {s.get("sigalg") for s in ok}
    result = {
        "config": cfg.to_json(),
        "summary": {"n": len(samples), "ok": len(ok), "failures": len(samples) - len(ok),
                    "failure_classes": pqtimer.failure_classes(samples), "metric": end, **stats.summary_ms(times)},
        # Per handshake, per direction, from the client socket's TCP_INFO when the handshake completed.
        "packets": {"client_to_server": _median(t.get("segs_out") for t in tcp),
                    "server_to_client": _median(t.get("segs_in") for t in tcp)},
        "bytes": {"client_to_server": _median(t.get("bytes_sent") for t in tcp),
                  "server_to_client": _median(t.get("bytes_received") for t in tcp)},
        "negotiated": {"group": groups.pop() if len(groups) == 1 else sorted(map(str, groups)) or None,
                       "sigalg": sigalgs.pop() if len(sigalgs) == 1 else sorted(map(str, sigalgs)) or None},
        "phases_ms": _phase_medians(ok),
    }
    if link:
        result["link"] = link
    return result


def _phase_medians(ok: list[dict]) -> dict:
    """Median time of each phase since the start (Sosnowski-style split follows from these)."""
    names = ["tcp_connected", "client_hello_sent", "server_hello_received", "server_finished_received",
             "handshake_done", "first_byte", "last_byte"]
    out = {}
    for name in names:
        m = _median(s["t_ns"].get(name) for s in ok)
        out[name] = round(m / 1e6, 3) if m is not None else None
    return out


def format_summary(result: dict) -> str:
    s, c = result["summary"], result["config"]
    lines = [f"{c['kex']} + {c['sig']} over {result['config']['backend']}: {s['n']} samples, "
             f"{s['failures']} failed" + (f" {s['failure_classes']}" if s["failures"] else ""),
             f"  {s['metric']} ms: mean {s['mean_ms']}  p5 {s['p5_ms']}  p25 {s['p25_ms']}  p50 {s['p50_ms']}  "
             f"p75 {s['p75_ms']}  p95 {s['p95_ms']}  p99 {s['p99_ms']}",
             f"  per handshake (median): packets c→s {result['packets']['client_to_server']} "
             f"s→c {result['packets']['server_to_client']}; bytes c→s {result['bytes']['client_to_server']} "
             f"s→c {result['bytes']['server_to_client']}",
             f"  negotiated: group {result['negotiated']['group']}, signature {result['negotiated']['sigalg']}",
             f"  raw samples: {result['run_dir']}/samples.jsonl"]
    return "\n".join(lines)
