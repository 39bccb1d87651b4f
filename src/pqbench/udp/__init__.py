"""Handshakes over UDP beyond QUIC, each a protocol of its own module: DTLS 1.3 (dtls), IKEv2 (ike). Each module registers
its protocol's record (pqbench.protocol), its timeline (pqbench.sample) and its own axes (pqbench.axis); its
stacks live under pqbench.endpoints."""
