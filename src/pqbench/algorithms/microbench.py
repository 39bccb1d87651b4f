"""Crypto microbenchmarks: drives native/cryptobench (OpenSSL EVP) for catalog algorithms.

Key exchange: keygen (client share), encaps (server: encapsulate, or DH keygen + derive), decaps
(client). Signatures: keygen, sign, verify of a CertificateVerify-sized message. Sizes are the
ones the implementation produced, so they double as a check of the catalog.
"""

import json
import re
import subprocess

from pqbench import paths, units
from pqbench.algorithms import catalog, openssl_build
from pqbench.errors import BadInput, MeasurementFailed, MissingCapability
from pqbench.testbed import sched

OPS = {"kem": ("keygen", "encaps", "decaps"), "sig": ("keygen", "sign", "verify")}


def cryptobench_args(alg: catalog.Algorithm) -> list[str]:
    """How cryptobench reaches an algorithm: by TLS group, bare KEM name, or key type + options."""
    if alg.kind == "kem":
        return ["group", alg.name] if alg.tls else ["kem", alg.name]
    args = ["sig", alg.keytype or alg.name]
    for opt in alg.keyopt:
        args += ["--keyopt", opt]
    m = re.search(r"_(sha\d+)$", alg.sigalg or "")
    if m:  # the digest the TLS 1.3 signature scheme prescribes (ECDSA, RSA-PSS)
        args += ["--digest", m.group(1)]
    if (alg.sigalg or "").startswith("rsa_pss"):
        args.append("--pss")
    return args


def check_seconds(seconds) -> float:
    """--seconds: a bare number of seconds, or any duration (500ms, 2m) within 0.01 s..10 min."""
    s = units.duration_ms("--seconds", seconds, bare="s") / 1000
    if not 0.01 <= s <= 600:
        raise BadInput("--seconds", f"{seconds!r} is outside the allowed 0.01..600 s (10ms..10m)")
    return s


def measure(alg: catalog.Algorithm, seconds: float = 0.5) -> dict:
    """One algorithm's operation timings (µs) and wire sizes, as a JSON-ready dict."""
    binary = paths.native_binary("cryptobench")
    if not binary.exists():
        raise MissingCapability(f"{binary} is missing", "run `make` in the project root")
    # at the priority measured servers and clients run with: an operation's time is the algorithm's, not the
    # wait for a CPU other work holds (beside the test suite a 2.6 ms synthetic verify took a median 2.96 ms)
    with sched.measured():
        proc = subprocess.Popen([str(binary), *cryptobench_args(alg), "--seconds", str(seconds)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=openssl_build.openssl_env())
    try:
        out, err = proc.communicate(timeout=120 + 10 * seconds)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    proc = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if proc.returncode:
        raise MeasurementFailed(f"cryptobench failed for {alg.name}: {proc.stderr.decode().strip()}")
    raw = json.loads(proc.stdout)
    result = {"name": alg.name, "kind": alg.kind, "family": alg.family, "level": alg.level,
              "source": alg.source, "sizes": raw["sizes"], "ops": raw["ops"],
              "catalog_sizes": expected_sizes(alg)}
    result["sizes_match_catalog"] = sizes_match(alg, raw["sizes"])
    return result


def expected_sizes(alg: catalog.Algorithm) -> dict:
    if alg.kind == "kem":
        return {"pk": alg.pk, "ct": alg.ct, "ss": alg.ss}
    return {"pk": alg.pk, "sig": alg.sig}


def sizes_match(alg: catalog.Algorithm, measured: dict) -> bool:
    """Catalog sizes are exact; a signature's catalog size is its maximum (ECDSA, Falcon vary)."""
    if alg.kind == "kem":
        return all(measured[k] == v for k, v in expected_sizes(alg).items())
    return measured["pk"] == alg.pk and measured["sig_max"] == alg.sig and measured["sig"] <= alg.sig


def select(names: list[str] | None) -> list[catalog.Algorithm]:
    """The named algorithms (all must be available), or every available one."""
    if names:
        algs = [catalog.find(n, field="--alg") for n in names]
        for alg in algs:
            avail = catalog.availability(alg)
            if not avail.available:
                raise MissingCapability(f"--alg {alg.name} is not available here: {avail.reason}",
                                        "see `pqbench algorithms` for what this build offers")
        return algs
    return [a for a in catalog.algorithms() if catalog.availability(a).available]


def run(algs: list[catalog.Algorithm], seconds: float = 0.5, progress=None) -> list[dict]:
    """Each algorithm measured for `seconds`; progress(k, n, name) before each, when given."""
    seconds = check_seconds(seconds)
    out = []
    for k, alg in enumerate(algs):
        if progress:
            progress(k, len(algs), alg.name)
        out.append(measure(alg, seconds))
    return out


def rounds(algs: list[catalog.Algorithm], count: int, seconds: float) -> list[list[dict]]:
    """Every algorithm measured count times, round by round, so that each algorithm's rounds lie
    seconds apart: on a machine whose CPU speed drifts, one short window can catch a slow spell."""
    return [run(algs, seconds) for _ in range(count)]


def format_table(results: list[dict]) -> str:
    """The classic "size and runtime" table: bytes and median ms per operation."""
    head = f"{'algorithm':<24} {'kind':<4} {'pk B':>7} {'ct/sig B':>9} {'keygen ms':>10} " \
           f"{'encaps/sign':>12} {'decaps/verify':>14}  note"
    lines = [head, "-" * len(head)]
    for r in results:
        ops = [r["ops"][op]["median_us"] / 1000 for op in OPS[r["kind"]]]
        second = r["sizes"]["ct"] if r["kind"] == "kem" else r["sizes"]["sig"]
        note = "" if r["sizes_match_catalog"] else f"sizes differ from catalog {r['catalog_sizes']}"
        lines.append(f"{r['name']:<24} {r['kind']:<4} {r['sizes']['pk']:>7} {second:>9} "
                     f"{ops[0]:>10.4f} {ops[1]:>12.4f} {ops[2]:>14.4f}  {note}")
    return "\n".join(lines)
