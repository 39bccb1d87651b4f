"""The store's schema as numbered migrations: a store records the last one applied, and opening it
read-write applies the rest, each in one transaction. Stores from before the numbering (no
schema_version table) get migration 1, which is written to bring any of them up to date."""

from pqbench.sample import PHASES, PHASES_V1, SSH_ONLY_PHASES

# Cell parameters: name -> SQL type, as the numbered migrations made them (a registered axis added later has
# its column added by store.add_cell_columns; tests/test_axes.py holds these against pqbench.axis).
CELL_PARAMS = {
    "kex": "VARCHAR", "sig": "VARCHAR", "scenario": "VARCHAR", "rtt_ms": "DOUBLE", "loss": "DOUBLE",
    "loss_model": "VARCHAR", "rate_mbit": "DOUBLE", "mtu": "INTEGER", "initcwnd": "INTEGER",
    "mode": "VARCHAR", "page": "VARCHAR", "requests": "INTEGER", "pad": "INTEGER", "stack": "VARCHAR",
    "server": "VARCHAR", "client": "VARCHAR", "protocol": "VARCHAR", "congctl": "VARCHAR",
    "trace": "VARCHAR", "queue": "VARCHAR", "cross": "VARCHAR",
    "offer": "VARCHAR", "server_groups": "VARCHAR", "compress": "VARCHAR",
    "transport": "VARCHAR", "quic_retry": "BOOLEAN", "initial_size": "INTEGER",
}
# Added by later migrations, not in migration 1's table.
_LATER_PARAMS = ("stack", "server", "client", "protocol", "congctl", "trace", "queue", "cross", "offer", "server_groups",
                 "compress", "transport", "quic_retry", "initial_size")
# Sample columns from the emulator's record of the connection (pqbench.measure.wire.summary keys, prefixed).
WIRE_COLUMNS = {"wire_ms": "DOUBLE", "wire_retrans_c2s": "INTEGER", "wire_retrans_s2c": "INTEGER",
                "wire_drops_c2s": "INTEGER", "wire_drops_s2c": "INTEGER", "wire_packets_c2s": "INTEGER",
                "wire_packets_s2c": "INTEGER", "wire_bytes_c2s": "BIGINT", "wire_bytes_s2c": "BIGINT"}

# … added by migration 3: the server's first flight (TLS: ServerHello … Finished) as it crossed the link.
WIRE_COLUMNS_V3 = {"wire_server_flight_packets": "INTEGER", "wire_server_flight_pushes": "INTEGER"}
# … added by migration 13: a QUIC server's stalls at the anti-amplification limit, and the first one's length.
WIRE_COLUMNS_V13 = {"wire_stalls": "INTEGER", "wire_stall_ms": "DOUBLE"}

_V1 = f"""
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, created TIMESTAMP, finished TIMESTAMP, status VARCHAR,
    name VARCHAR, spec_toml VARCHAR, spec JSON, provenance JSON,
    calibration_start JSON, calibration_end JSON, seed BIGINT, cell_order JSON, warnings JSON
);
CREATE TABLE IF NOT EXISTS cells (
    run_id VARCHAR, cell_id VARCHAR, position INTEGER, status VARCHAR, reason VARCHAR,
    {", ".join(f"{k} {v}" for k, v in CELL_PARAMS.items() if k not in _LATER_PARAMS)},
    link JSON, metric VARCHAR, n INTEGER, ok INTEGER, failures INTEGER, failure_classes JSON,
    link_counters JSON, started TIMESTAMP, finished TIMESTAMP, stop_reason VARCHAR, concurrency JSON,
    PRIMARY KEY (run_id, cell_id)
);
ALTER TABLE cells ADD COLUMN IF NOT EXISTS concurrency JSON;
CREATE TABLE IF NOT EXISTS crypto (
    run_id VARCHAR, name VARCHAR, kind VARCHAR, op VARCHAR, median_us DOUBLE, p25_us DOUBLE, p75_us DOUBLE,
    n INTEGER, pk INTEGER, ct_or_sig INTEGER, round INTEGER
);
ALTER TABLE crypto ADD COLUMN IF NOT EXISTS round INTEGER;
CREATE TABLE IF NOT EXISTS samples (
    run_id VARCHAR, cell_id VARCHAR, seq INTEGER, worker INTEGER, i INTEGER, ok BOOLEAN,
    error_class VARCHAR, error VARCHAR, duration_ms DOUBLE,
    {", ".join(f"{p}_ms DOUBLE" for p in PHASES_V1)},
    start_mono_ns UBIGINT, "group" VARCHAR, sigalg VARCHAR, resumed BOOLEAN,
    client_hello_bytes INTEGER, server_hello_bytes INTEGER, certificate_bytes INTEGER,
    certificate_verify_bytes INTEGER, hs_bytes_sent INTEGER, hs_bytes_received INTEGER,
    records_sent INTEGER, records_received INTEGER,
    tcp_bytes_sent BIGINT, tcp_bytes_received BIGINT, tcp_segs_out INTEGER, tcp_segs_in INTEGER,
    tcp_retransmits INTEGER, tcp_rtt_us INTEGER, tcp_cwnd INTEGER,
    http_status INTEGER, body_bytes BIGINT, requests INTEGER, raw JSON
);
"""

# Stack, the late-sample detector and the wire record (cells); the local port, stack, protocol
# and the wire record per sample. Cells from before were all measured by the openssl stack.
_V2 = f"""
ALTER TABLE cells ADD COLUMN stack VARCHAR DEFAULT 'openssl';
ALTER TABLE cells ADD COLUMN detector JSON;
ALTER TABLE cells ADD COLUMN wire JSON;
ALTER TABLE samples ADD COLUMN local_port INTEGER;
ALTER TABLE samples ADD COLUMN stack VARCHAR DEFAULT 'openssl';
ALTER TABLE samples ADD COLUMN protocol VARCHAR DEFAULT 'tls';
{"".join(f"ALTER TABLE samples ADD COLUMN {k} {v};" for k, v in WIRE_COLUMNS.items())}
"""

# Server and client stacks apart (a cell's `stack` is now the pair's label); cells from before measured
# one stack in both roles.
_V3 = f"""
ALTER TABLE cells ADD COLUMN server VARCHAR DEFAULT 'openssl';
ALTER TABLE cells ADD COLUMN client VARCHAR DEFAULT 'openssl';
UPDATE cells SET server = stack, client = stack;
ALTER TABLE samples ADD COLUMN server VARCHAR DEFAULT 'openssl';
UPDATE samples SET server = stack;
{"".join(f"ALTER TABLE samples ADD COLUMN {k} {v};" for k, v in WIRE_COLUMNS_V3.items())}
"""

# The protocol a cell measures (SSH cells: kex and sig hold SSH names); every cell before was TLS.
_V4 = """
ALTER TABLE cells ADD COLUMN protocol VARCHAR DEFAULT 'tls';
"""

# SSH's own phases per sample (milliseconds since the start, like the TLS phases' columns), and the time
# the client waited for a CPU during the handshake (pqtimer: the kernel's schedstat).
_V5 = "".join(f"ALTER TABLE samples ADD COLUMN {p}_ms DOUBLE;" for p in SSH_ONLY_PHASES) + \
    "ALTER TABLE samples ADD COLUMN cpu_wait_ms DOUBLE;"

# The congestion control a cell asked for (the spec's congctl axis; NULL: the host's default) and the one
# each endpoint's connections really used, read from the kernel in each namespace.
_V6 = """
ALTER TABLE cells ADD COLUMN congctl VARCHAR;
ALTER TABLE cells ADD COLUMN cc_client VARCHAR;
ALTER TABLE cells ADD COLUMN cc_server VARCHAR;
"""

# A cell measured against a target (a server pqbench did not start, over the host's real network): the
# target's name, and the path's TCP-connect RTT measured before and after the cell (the link is measured, not
# emulated). NULL for cells on the emulated link.
_V7 = """
ALTER TABLE cells ADD COLUMN target VARCHAR;
ALTER TABLE cells ADD COLUMN path JSON;
"""

# `pqbench scan` results: what a server accepts and prefers (TLS groups, chain; SSH KEXINIT), one row per scan.
_V8 = """
CREATE TABLE IF NOT EXISTS scans (
    scan_id VARCHAR PRIMARY KEY, created TIMESTAMP, target VARCHAR, address VARCHAR, protocol VARCHAR,
    summary VARCHAR, result JSON, provenance JSON
);
"""

# Load cells (`kind = "load"`): the cell's verdict (which side saturated, capacity, CPU per handshake) and
# one row per offered rate; achieved_rate is what was served per second of the step's whole span. Cells
# from before are all handshake cells (kind NULL).
_V9 = """
ALTER TABLE cells ADD COLUMN kind VARCHAR;
ALTER TABLE cells ADD COLUMN "load" JSON;
CREATE TABLE IF NOT EXISTS load_steps (
    run_id VARCHAR, cell_id VARCHAR, step INTEGER, offered_rate DOUBLE, achieved_rate DOUBLE, completed INTEGER,
    p50_ms DOUBLE, p99_ms DOUBLE, server_cpu_s DOUBLE, client_cpu_s DOUBLE, saturated BOOLEAN, client_bound VARCHAR,
    result JSON
);
"""

# Runs measured on several machines (`run --cluster`, `run --shard`, `merge`): the node that measured each cell;
# the nodes table, one row per segment (one node's part in one start of a run: its provenance, calibration
# at its start and end, when it joined and left, its status); crypto rounds carry their node and segment, so
# rounds from several nodes or shards stay apart when stores meet (a segment is unique: a random id).
# Cells and crypto rounds from before were measured on the run's one host (node NULL).
_V10 = """
ALTER TABLE cells ADD COLUMN node VARCHAR;
ALTER TABLE crypto ADD COLUMN node VARCHAR;
ALTER TABLE crypto ADD COLUMN segment VARCHAR;
CREATE TABLE IF NOT EXISTS nodes (
    run_id VARCHAR, segment VARCHAR, node VARCHAR, provenance JSON, calibration_start JSON, calibration_end JSON,
    joined TIMESTAMP, "left" TIMESTAMP, status VARCHAR, cells INTEGER, PRIMARY KEY (run_id, segment)
);
"""

# Links as users live on them: the cellular trace a cell's rate followed (its name; "up / down" when the
# directions differ), the queue's management ("codel", "pie target=20ms"; NULL: drop-tail), the competing
# bulk flows during the cell ("1 cubic"; NULL: none) and what they moved. NULL for cells from before.
_V11 = """
ALTER TABLE cells ADD COLUMN trace VARCHAR;
ALTER TABLE cells ADD COLUMN queue VARCHAR;
ALTER TABLE cells ADD COLUMN "cross" VARCHAR;
ALTER TABLE cells ADD COLUMN cross_traffic JSON;
"""

# What deployed clients and servers do: the client's offer (groups and key shares), the server's preference
# order and certificate compression per cell; per sample whether a HelloRetryRequest came, the Certificate
# message's compressed size and what became of 0-RTT early data. NULL for cells and samples from before.
_V12 = """
ALTER TABLE cells ADD COLUMN offer VARCHAR;
ALTER TABLE cells ADD COLUMN server_groups VARCHAR;
ALTER TABLE cells ADD COLUMN compress VARCHAR;
ALTER TABLE samples ADD COLUMN hrr BOOLEAN;
ALTER TABLE samples ADD COLUMN certificate_compressed_bytes INTEGER;
ALTER TABLE samples ADD COLUMN early_data VARCHAR;
"""

# QUIC (`transport = quic`): the transport a cell ran over (NULL: TCP, as every cell from before), whether the
# server validated addresses with Retry and the client's Initial size; per sample the phase QUIC adds and
# the transport, with the datagram counts in the raw sample and the wire record.
_V13 = "".join(f"ALTER TABLE samples ADD COLUMN {p}_ms DOUBLE;" for p in PHASES if p not in PHASES_V1) + """
ALTER TABLE cells ADD COLUMN transport VARCHAR;
ALTER TABLE cells ADD COLUMN quic_retry BOOLEAN;
ALTER TABLE cells ADD COLUMN initial_size INTEGER;
ALTER TABLE samples ADD COLUMN transport VARCHAR;
""" + "".join(f"ALTER TABLE samples ADD COLUMN {k} {v};" for k, v in WIRE_COLUMNS_V13.items())

# IKEv2 (`protocol = ike`): its own phases per sample (each exchange's request out and response in); what each
# exchange sent and received, in fragments and bytes, is in the raw sample.
# (written out: a phase IKEv2 gains later is a migration of its own)
IKE_PHASES_V14 = ("ike_sa_init_sent", "ike_sa_init_received", "intermediate_received", "ike_auth_sent",
                  "ike_auth_received")
_V14 = "".join(f"ALTER TABLE samples ADD COLUMN {p}_ms DOUBLE;" for p in IKE_PHASES_V14)

# Real Merkle Tree Certificates took the chain shapes' names mtc-standalone and mtc-landmark; the size-only
# stand-ins those names meant before are now mtc-standalone-size and mtc-landmark-size (the column comes with the
# chain axis: a store from before it gains it here, empty).
_V15 = """
ALTER TABLE cells ADD COLUMN IF NOT EXISTS chain VARCHAR;
UPDATE cells SET chain = chain || '-size' WHERE chain IN ('mtc-standalone', 'mtc-landmark');
"""

MIGRATIONS = (
    (1, "runs, cells, crypto rounds, samples (the schema before numbered migrations)", _V1),
    (2, "stack, late-sample detector and wire timestamps", _V2),
    (3, "server and client stacks, the server's first flight on the wire", _V3),
    (4, "the protocol of a cell (tls, ssh)", _V4),
    (5, "SSH's phases and the client's CPU wait per sample", _V5),
    (6, "the congestion control a cell asked for and the one each endpoint used", _V6),
    (7, "targets: the target a cell measured and its path's measured RTT", _V7),
    (8, "scans of servers' post-quantum readiness", _V8),
    (9, "load cells: their verdict and one row per offered rate", _V9),
    (10, "nodes: the node of each cell and crypto round, one row per node's segment of a run", _V10),
    (11, "users' links: the trace, queue management and competing traffic of a cell", _V11),
    (12, "client offers, server preference, certificate compression, HelloRetryRequests and early data", _V12),
    (13, "QUIC: a cell's transport, Retry and Initial size; a sample's transport and QUIC's own phase", _V13),
    (14, "IKEv2's phases", _V14),
    (15, "the size-only MTC stand-ins renamed (mtc-…-size) as real Merkle Tree Certificates take their names", _V15),
)
LATEST = MIGRATIONS[-1][0]

VERSION_TABLE = """CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY, applied TIMESTAMP, what VARCHAR)"""
