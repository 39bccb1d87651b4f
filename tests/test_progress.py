"""measure.progress.Progress: the ETA of a resumed run comes from the cells measured since it resumed."""

import re

from pqbench.measure import progress as runner


def eta_lines(capsys) -> list[str]:
    return re.findall(r"ETA (\S+)", capsys.readouterr().err)


def test_eta_of_a_resumed_run_ignores_cells_done_before_and_skipped(monkeypatch, capsys):
    clock = [1000.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock[0])
    progress = runner.Progress(total=100, already_done=60)
    progress.cell_done("skipped cell", "skipped: not available", measured=False)
    clock[0] += 30  # the first measured cell takes 30 s; 38 are left
    progress.cell_done("measured cell", "n=1000")
    assert eta_lines(capsys) == ["?", "19m00s"]  # 38 x 30 s, not 30 s / 62 done x 38


def test_eta_of_a_fresh_run_is_the_mean_cell_time_times_the_cells_left(monkeypatch, capsys):
    clock = [0.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock[0])
    progress = runner.Progress(total=4)
    for _ in range(2):
        clock[0] += 90
        progress.cell_done("cell", "n=1000")
    assert eta_lines(capsys) == ["4m30s", "3m00s"]
