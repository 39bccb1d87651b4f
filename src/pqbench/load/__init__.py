"""Server capacity: open-loop handshakes at rising offered rates until the server saturates (`pqbench
load`, `kind = "load"` specs). `generator` runs a stack's load generator, `cpu` accounts for both sides'
CPU time and pins them apart, `steps` ramps the rate and judges which side saturated."""
