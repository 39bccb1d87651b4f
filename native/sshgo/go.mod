module pqbench/native/sshgo

go 1.27

require (
	golang.org/x/crypto v0.58.0
	golang.org/x/sys v0.49.0
)
