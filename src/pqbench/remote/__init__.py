"""Out of the box: servers pqbench did not start (targets), reached over a real path instead of the
emulated link (pqbench.testbed.realpath). `address` parses what a user names, `target` what a target is
(`pqbench serve`, which runs pqbench's servers for clients elsewhere, is pqbench.measure.serve)."""
