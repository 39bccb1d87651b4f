"""Where the build puts things. PQBENCH_BUILD overrides the build directory."""

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PQBENCH_BUILD", PROJECT_ROOT / "build"))
CATALOG_FILE = PROJECT_ROOT / "catalog" / "algorithms.toml"

OPENSSL_PREFIX = BUILD / "openssl"
OPENSSL_BIN = OPENSSL_PREFIX / "bin" / "openssl"
OPENSSL_LIB = OPENSSL_PREFIX / "lib"
OPENSSL_MODULES = OPENSSL_LIB / "ossl-modules"
OPENSSL_CONF = BUILD / "openssl.cnf"
LIBOQS_PREFIX = BUILD / "liboqs"
LIBOQS_LIB = LIBOQS_PREFIX / "lib"
NATIVE_BUILD = BUILD / "native"


def native_binary(name: str) -> Path:
    """Path of a program built from native/ (e.g. 'pqlink', 'cryptobench')."""
    return NATIVE_BUILD / name / name
