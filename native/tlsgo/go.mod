module pqbench/native/tlsgo

go 1.27

require golang.org/x/sys v0.49.0
