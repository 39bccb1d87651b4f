"""The results store (DuckDB): every SQL statement of pqbench lives in this package."""

from pqbench.sample import PHASES
from pqbench.store.schema import CELL_PARAMS, LATEST, MIGRATIONS, WIRE_COLUMNS, WIRE_COLUMNS_V3, WIRE_COLUMNS_V13
from pqbench.store.store import (DEFAULT_DB, Connection, Unwritable, add_cell_columns, cell_rows, columns, connect, count_rows, create_run, early_data, exported_tables, crypto_rows, export,
                                 finish_run, finished_cells, join_node, node_rows, update_node, load_step_rows, migrate, provenance, resolve_run, run_row, runs,
                                 runs_named, sample_columns, sample_raw, sample_row, save_cell, save_crypto, save_scan,
                                 scan_rows, schema_version,
                                 update_run)
from pqbench.store.merge import merge

__all__ = ["CELL_PARAMS", "Connection", "DEFAULT_DB", "Unwritable", "add_cell_columns", "LATEST", "MIGRATIONS", "PHASES", "WIRE_COLUMNS", "WIRE_COLUMNS_V3", "WIRE_COLUMNS_V13", "cell_rows", "columns",
           "connect", "count_rows", "create_run", "early_data", "exported_tables", "crypto_rows", "export", "finish_run", "finished_cells", "join_node", "node_rows", "update_node", "load_step_rows", "merge", "migrate",
           "provenance", "resolve_run", "run_row", "runs", "runs_named", "sample_columns", "sample_raw", "sample_row", "save_cell",
           "save_crypto", "save_scan", "scan_rows", "schema_version", "update_run"]
