"""pqbench: TLS 1.3 handshake measurements for post-quantum and hybrid cryptography."""

__version__ = "0.1.0"
