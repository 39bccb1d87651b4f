module pqbench/native/tlsgo

go 1.27

require golang.org/x/sys v0.49.0

require pqbench/native/gotlskit v0.0.0

replace pqbench/native/gotlskit => ../gotlskit
