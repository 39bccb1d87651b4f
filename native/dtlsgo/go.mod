module pqbench/native/dtlsgo

go 1.27

require (
	github.com/pion/dtls/v4 v4.0.1
	pqbench/native/gotlskit v0.0.0
)

require (
	github.com/pion/logging v0.2.4 // indirect
	github.com/pion/transport/v5 v5.1.4 // indirect
	golang.org/x/crypto v0.48.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace pqbench/native/gotlskit => ../gotlskit
