"""Shared by the TLS stack tests (test_stack_gotls, test_stack_rust): one testbed at 10 ms RTT with a
server per stack, each serving an ECDSA P-256 and an all-ML-DSA-44 chain, and every stack's client;
the check that a server × client pair negotiates what was asked."""

import contextlib
import os

import pytest

from conftest import processes_mentioning
from pqbench import endpoints
from pqbench.algorithms import catalog, certs
from pqbench.endpoints.base import STUDY_PAGES, ClientJob, Serving, Site
from pqbench.measure.rig import Rig
from pqbench.testbed import LinkSpec

SIGS = ["ecdsap256", "mldsa44"]
# Group names as pqtimer (OpenSSL) prints them, and every client: a sample keeps it as group_as_sent where the
# catalog spells it otherwise.
PRINTED = {"X25519": "x25519", "X25519MLKEM768": "X25519MLKEM768", "SecP256r1MLKEM768": "SecP256r1MLKEM768",
           "MLKEM1024": "MLKEM1024"}


def ports(stacks: list[str]) -> dict:
    """(stack, sig) -> port: the first stack's at 4433, each next stack's ten further on."""
    return {(name, sig): 4433 + 10 * k + i for k, name in enumerate(stacks) for i, sig in enumerate(SIGS)}


@contextlib.contextmanager
def bed(stacks: list[str], groups: list[str], run_dir):
    """The testbed of a module: servers of `stacks` side by side, their clients, nothing left after."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    where = ports(stacks)
    chains = {sig: certs.make_chain(sig, run_dir / "certs" / sig) for sig in SIGS}
    servings = {name: Serving(run_dir / name, [Site(where[name, sig], chains[sig]) for sig in SIGS], groups,
                              STUDY_PAGES, 32) for name in stacks}
    with Rig.pairs(servings, stacks, LinkSpec.symmetric(rtt_ms=10)) as rig:
        yield {"rig": rig, "chains": chains, "dir": run_dir, "servings": servings, "ports": where}
    left = processes_mentioning(run_dir)  # servers name their logs there
    assert not left, f"processes left after the rig closed: {left}"


def job(bed: dict, server: str, kex: str, sig: str, **kw) -> ClientJob:
    return bed["rig"].job(bed["ports"][server, sig], kex, bed["chains"][sig], **kw)


def check_negotiates(bed: dict, server: str, client: str, kex: str, sig: str) -> None:
    """The pair negotiates kex and sig in every sample, or says why it cannot (a skip with the reason)."""
    reason = endpoints.unsupported(server, client, kex, sig, "handshake")
    if reason:
        pytest.skip(reason)
    samples = bed["rig"].sample(job(bed, server, kex, sig), 4, 1, bed["dir"], client=client)
    assert len(samples) == 4
    assert all(s["ok"] for s in samples), [s.get("error") for s in samples if not s["ok"]]
    assert {(s["group"], s["sigalg"]) for s in samples} == {(kex, catalog.find(sig, "sig").sigalg)}
    assert {s.get("group_as_sent", s["group"]) for s in samples} == {PRINTED[kex]}
    # every client reports its own wait for a CPU, as pqtimer does, for the late-sample detector
    assert all(isinstance(s.get("cpu_wait_ns"), int) and s["cpu_wait_ns"] >= 0 for s in samples), samples


def runnable(combos: list[tuple], mode: str = "handshake") -> tuple[list[tuple], dict[str, tuple]]:
    """(server, client, kex, sig) combinations split, at collection, into those the stacks as built can
    run and, per reason, one that they refuse: a matrix test generates only the first, and one test
    per reason checks the refusal, so the skips left in a summary are about the machine. Stacks not
    built yet keep every combination (their tests then fail with what is missing, never skip)."""
    run, refused = [], {}
    for combo in combos:
        why = endpoints.unsupported(*combo, mode)
        if why and "is not built" not in why and "is missing" not in why:
            refused.setdefault(why, combo)
        else:
            run.append(combo)
    return run, refused


def check_refused(reason: str, combo: tuple, mode: str = "handshake") -> None:
    """The combination is refused with exactly that reason, which names the stack and role that lacks it."""
    server, client, kex, sig = combo
    assert endpoints.unsupported(server, client, kex, sig, mode) == reason
    assert any(f"{name} {role}" in reason for name, role in ((server, "server"), (client, "client"))) \
        or "different protocols" in reason, reason
