"""What one look of the Auto controller costs as a cell's samples pile up: it reads each sample once, so a look
late in a long cell (tens of thousands of samples) should cost about what an early one does. Prints the time per
look at each sample count and its ratio to the smallest count's, measured in this run.

    build/venv/bin/python bench/bench_auto_look.py
"""

from __future__ import annotations

import time

from pqbench.measure import concurrency


class _Meter:
    def look(self):
        return None, 0.0


def _sample(k: int) -> dict:
    return {"ok": True, "t_ns": {"tcp_connected": 31_000_000 + k % 50 * 1000, "handshake_done": 64_000_000 + k % 97 * 1000}}


def per_look_ms(total: int, per_look: int = 200) -> float:
    """The mean cost of the looks that read the last 20 batches of a cell growing to `total` samples."""
    control = concurrency.Auto(max_bias=0.02, maximum=128, network_ms=62, rtt_ms=31, meter=_Meter())
    samples: list[dict] = []
    timed, looks = 0.0, 0
    while len(samples) < total:
        samples.extend(_sample(len(samples) + i) for i in range(per_look))
        t = time.perf_counter()
        control.more(128, len(samples) + 128, samples)
        if len(samples) > total - 20 * per_look:
            timed += time.perf_counter() - t
            looks += 1
    return timed / looks * 1e3


def main() -> None:
    base = None
    for total in (5_000, 20_000, 50_000):
        ms = per_look_ms(total)
        base = base or ms
        print(f"{total:>7} samples: {ms:7.3f} ms per look ({ms / base:.2f}x the 5,000-sample cell's)")


if __name__ == "__main__":
    main()
