"""What the browser client stacks (chromium, firefox) share: a trusted CA in an NSS database, the sample
indices shared among workers, the client namespace's own record of which local port a connection used, and
a browser's per-connection timings turned into a pqbench sample and compared with the wire."""
