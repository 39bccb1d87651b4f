"""The algorithm side: the catalog, certificate chains, the crypto microbenchmark, liboqs, and facts about
our OpenSSL/liboqs build and how to run it."""
