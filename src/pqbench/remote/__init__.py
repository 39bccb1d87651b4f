"""Out of the box: servers pqbench did not start (targets), reached over a real path instead of the
emulated link. `address` parses what a user names, `realpath` is the path that replaces a testbed."""
