"""This machine: host facts (root, TUN, netem, congestion control, CPU) and `pqbench doctor`."""
