module pqbench/native/gotlskit

go 1.27

require golang.org/x/sys v0.47.0
