"""Measuring: the rig (one lane's testbed, server, client and certificates), one cell's samples with
its stopping rule (cell), one cell from the CLI (single), the schedule of a run's cells over lanes,
the concurrency controller, the wire record joined to the samples (wire), the late-sample detector
(late), provenance and progress."""
