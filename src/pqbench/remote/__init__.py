"""Out of the box: servers pqbench did not start (targets), reached over a real path instead of the
emulated link (pqbench.testbed.realpath). `address` parses what a user names, `target` what a target is."""
