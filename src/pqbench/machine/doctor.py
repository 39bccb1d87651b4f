"""`pqbench doctor`: what this machine can do, and what is missing with how to fix it."""

import dataclasses

from pqbench import __version__, endpoints, paths
from pqbench.endpoints import ondemand
from pqbench.algorithms import catalog, liboqs, openssl_build
from pqbench.machine import host

NATIVE_COMPONENTS = ("pqlink", "cryptobench", "pqtimer", "pqload")


def _plain(items) -> dict:
    """Capabilities as JSON: the unsupported() function is left out."""
    return {k: v for k, v in items if not callable(v)}


def report() -> dict:
    netns, netem, netem_detail = host.netns_and_netem()
    openssl_built = paths.OPENSSL_BIN.exists()
    rep = {
        "pqbench": __version__,
        "host": host.facts(),
        "root": host.is_root(),
        "netns": netns,
        "tun": host.has_tun(),
        "netem": netem,
        "netem_detail": netem_detail,
        "congestion_control": host.congestion_control(),
        "openssl": {
            "built": openssl_built,
            "version": openssl_build.openssl_version(),
            "path": str(paths.OPENSSL_BIN),
            "provenance": openssl_build.openssl_provenance(),
            "tls_groups": list(openssl_build.tls_groups()) if openssl_built else [],
            "tls_sigalgs": list(openssl_build.tls_sigalgs()) if openssl_built else [],
            "pqprov": openssl_build.pqprov_path().exists(),
        },
        "liboqs": {
            "built": liboqs.available(),
            "version": liboqs.version(),
            "provenance": openssl_build.liboqs_provenance(),
            "kems": liboqs.kem_names(),
            "sigs": liboqs.sig_names(),
            "demo_only": bool(liboqs.lacks(n for a in catalog.algorithms() if (n := a.liboqs))),
        },
        "stacks": {name: {**dataclasses.asdict(endpoints.get(name).capabilities(), dict_factory=_plain),
                          "build": dict(zip(("status", "detail"), ondemand.status(name)))}
                   for name in endpoints.names()},
        "build": {name: paths.native_binary(name).exists() for name in NATIVE_COMPONENTS},
    }
    versions = rep["stacks"]["openssl"]["versions"]  # the key doctor --json had before stacks
    rep["nginx"] = {"version": versions.get("nginx"), "running_with_openssl": versions.get("nginx_running_with_openssl")}
    rep["problems"] = problems(rep)
    rep["ok"] = not rep["problems"]
    return rep


def problems(rep: dict) -> list[str]:
    """Each missing capability, with its fix."""
    out = []
    if not rep["root"]:
        out.append("not root: namespaces and TUN devices need root (fix: run pqbench with sudo)")
    elif not rep["netns"]:
        out.append(f"cannot create network namespaces: {rep['netem_detail']} (fix: a kernel with CONFIG_NET_NS)")
    if not rep["tun"]:
        out.append("no usable /dev/net/tun (fix: load the tun module, or run with --device /dev/net/tun in containers)")
    if not rep["openssl"]["built"]:
        out.append("our OpenSSL is not built (fix: make)")
    if not rep["liboqs"]["built"]:
        out.append("liboqs is not built (fix: make)")
    if not rep["nginx"]["version"]:
        out.append("nginx is not installed (fix: make, which installs Debian's nginx-light)")
    elif rep["openssl"]["built"] and not rep["nginx"]["running_with_openssl"]:
        out.append("nginx does not run on our OpenSSL (fix: make; check LD_LIBRARY_PATH)")
    for name, built in rep["build"].items():
        if not built and (paths.PROJECT_ROOT / "native" / name).exists():
            out.append(f"{name} is not built (fix: make)")
    return out


def _yes(flag: bool) -> str:
    return "yes" if flag else "NO"


def _stack_line(st: dict) -> str:
    """"tls: built (rustls 0.23.46, ...)", or buildable/unavailable with what and why."""
    status, detail = st["build"]["status"], st["build"]["detail"]
    if status != "built":
        return f"{st['protocol']}: {status.upper() if status == 'unavailable' else status} — {detail}"
    versions = ", ".join(f"{k} {str(v).split()[0]}" for k, v in st["versions"].items() if v and "/" not in k)
    return f"{st['protocol']}: built" + (f" ({versions})" if versions else "")


def format_report(rep: dict) -> str:
    o, q, cc = rep["openssl"], rep["liboqs"], rep["congestion_control"]
    rows = [
        ("pqbench", rep["pqbench"]),
        ("host", f"{rep['host']['hostname']}: {rep['host']['cpus']} × {rep['host']['cpu']}, "
                 f"kernel {rep['host']['kernel']}"),
        ("root", _yes(rep["root"])),
        ("network namespaces", _yes(rep["netns"])),
        ("TUN devices", _yes(rep["tun"])),
        ("netem qdisc", "yes (backend netem available)" if rep["netem"]
         else f"no — pqbench uses its own emulator pqlink ({rep['netem_detail']})"),
        ("congestion control", f"allowed: {' '.join(cc['allowed'])}; default {cc['default']}"),
        ("OpenSSL", f"{o['version']} at {o['path']}" if o["built"] else "NOT BUILT"),
        ("  TLS 1.3 groups", f"{len(o['tls_groups'])}: {' '.join(o['tls_groups'])}"),
        ("  TLS 1.3 sigalgs", f"{len(o['tls_sigalgs'])}: {' '.join(o['tls_sigalgs'])}"),
        ("  pqprov provider", "loaded" if o["pqprov"] else "not built yet"),
        ("liboqs", f"{q['version']}: {len(q['kems'])} KEMs, {len(q['sigs'])} signatures"
         + (" (the demo's: the catalog's are built on first use)" if q["demo_only"] else "") if q["built"] else "NOT BUILT"),
        ("nginx", f"{rep['nginx']['version']}, runs with OpenSSL {rep['nginx']['running_with_openssl']}"
         if rep["nginx"]["version"] else "NOT INSTALLED"),
        ("native programs", ", ".join(f"{k} {'built' if v else 'missing'}" for k, v in rep["build"].items())),
        *((f"stack {name}", _stack_line(st)) for name, st in rep["stacks"].items()),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines.append("")
    lines += ["problems:", *(f"  - {p}" for p in rep["problems"])] if rep["problems"] else ["everything pqbench needs is here"]
    return "\n".join(lines)
