"""A ClientHello read off the wire says what its client offers: the groups, the key shares and the signature
schemes by their code points, GREASE left out. Checked against OpenSSL's s_client, told what to offer, on
loopback; the browsers' own ClientHellos are read in test_browsers."""

import struct
import subprocess

import pytest

from pqbench import paths
from pqbench.endpoints.browsers import hello, offered_names
from pqbench.errors import MeasurementFailed


def s_client(groups: str, sigalgs: str):
    def start(port: int) -> subprocess.Popen:
        return subprocess.Popen([str(paths.OPENSSL_PREFIX / "bin" / "openssl"), "s_client", "-connect",
                                 f"127.0.0.1:{port}", "-tls1_3", "-groups", groups, "-sigalgs", sigalgs],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return start


def test_a_client_hello_names_what_its_client_was_told_to_offer():
    found = hello.capture(s_client("X25519MLKEM768:x25519:secp384r1", "mldsa65:ecdsa_secp256r1_sha256:ed25519"),
                          "openssl s_client", timeout_s=30)
    assert found.groups == (0x11EC, 0x001D, 0x0018)
    assert found.key_shares == (0x11EC,)  # OpenSSL's default: a share for the first group only
    assert found.sigalgs == (0x0905, 0x0403, 0x0807)
    assert offered_names(found) == (("X25519MLKEM768", "X25519", "secp384r1"), ("mldsa65", "ecdsap256", "ed25519"))


def _extension(kind: int, data: bytes) -> bytes:
    return struct.pack("!HH", kind, len(data)) + data


def _u16_list(values) -> bytes:
    body = b"".join(struct.pack("!H", v) for v in values)
    return struct.pack("!H", len(body)) + body


def test_grease_values_are_left_out():
    shares = b"".join(struct.pack("!HH", g, 1) + b"\0" for g in (0x2A2A, 0x001D))
    anchors = bytes([3, 0x82, 0xDF, 0x13]) + bytes([4, 0x82, 0xDF, 0x13, 0x7F])  # IDs 44947 and 44947.127
    extensions = (_extension(0x0A0A, b"") + _extension(hello.SUPPORTED_GROUPS, _u16_list([0x3A3A, 0x001D, 0x0017]))
                  + _extension(hello.SIGNATURE_ALGORITHMS, _u16_list([0x0403, 0xFAFA]))
                  + _extension(hello.KEY_SHARE, struct.pack("!H", len(shares)) + shares)
                  + _extension(hello.TRUST_ANCHORS, struct.pack("!H", len(anchors)) + anchors))
    body = b"\x03\x03" + bytes(32) + b"\x00" + _u16_list([0x1301]) + b"\x01\x00" + struct.pack("!H", len(extensions)) \
        + extensions
    message = bytes([hello.CLIENT_HELLO]) + len(body).to_bytes(3, "big") + body
    assert hello.parse(message) == hello.Hello(
        groups=(0x001D, 0x0017), key_shares=(0x001D,), sigalgs=(0x0403,),
        extensions=(hello.SUPPORTED_GROUPS, hello.SIGNATURE_ALGORITHMS, hello.KEY_SHARE, hello.TRUST_ANCHORS),
        trust_anchors=("44947", "44947.127"))
    assert [hello.grease(v) for v in (0x0A0A, 0xFAFA, 0x0A1A, 0x001D)] == [True, True, False, False]


def test_a_client_that_sends_no_client_hello_is_named():
    def start(port: int) -> subprocess.Popen:  # connects and says nothing TLS
        return subprocess.Popen(["python3", "-c", f"import socket; s = socket.create_connection(('127.0.0.1', {port}));"
                                 " s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); s.recv(1)"])
    with pytest.raises(MeasurementFailed, match="plain client sent no ClientHello"):
        hello.capture(start, "plain client", timeout_s=30)


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
def test_a_browser_s_capabilities_are_what_its_real_client_hello_offers(tmp_path, browser):
    """Read afresh (not from build/<browser>'s copy), the browser's ClientHello is what its stack's capabilities
    say: both offer ML-KEM with its key share first and no Ed25519; Chromium 156 accepts ML-DSA, Firefox ESR not."""
    from pqbench import endpoints
    from pqbench.endpoints.chromium import launch as chromium_launch
    from pqbench.endpoints.firefox import launch as firefox_launch
    stack = endpoints.get(browser)
    start = {"chromium": chromium_launch, "firefox": firefox_launch}[browser].start_towards
    found = hello.capture(lambda port: start(tmp_path, f"https://127.0.0.1:{port}/"), browser, timeout_s=120)
    assert found.key_shares[0] == 0x11EC and 0x11EC in found.groups  # X25519MLKEM768
    groups, signatures = offered_names(found)
    assert "ed25519" not in signatures
    assert {"mldsa44", "mldsa65", "mldsa87"} <= set(signatures) if browser == "chromium" else \
        not {s for s in signatures if s.startswith("mldsa")}
    # Chromium says which trust anchors it has (draft-ietf-tls-trust-anchor-ids; 156 sends 28), Firefox not
    assert bool(found.trust_anchors) == (browser == "chromium") == (hello.TRUST_ANCHORS in found.extensions)
    caps = stack.capabilities()
    assert all(caps.unsupported(g, "ecdsap256", "client") is None for g in groups)
    refused = caps.unsupported("X25519MLKEM768", "ed25519", "client")
    assert refused and "ClientHello accepts only" in refused and signatures[0] in refused
