"""Measuring: the rig (one lane's testbed, server, client and certificates), one cell's samples with
its stopping rule, the schedule of a run's cells over lanes, provenance and progress."""
