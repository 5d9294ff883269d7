"""The canary's load phase: latency and throughput measured the way perf_analyzer measures them.

After the correctness replay, :class:`LoadRunner` keeps ``concurrency`` requests of
``batch_rows`` golden rows in flight (requests built once from golden rows and cycled), discards a
warm-up, and measures in windows. It stops when the last ``stable_windows`` windows agree on p50
and p99 within ``stability`` (perf_analyzer's rule) or when the time budget is spent, and says
which. Candidate and champion are measured in alternating windows on the same server, each round
in the other order (A B B A A B ...), so the machine's noise falls on both.

Windows are sized by requests as well as by time: a window lasts ``window_s`` and then runs on
until it holds ``min_requests`` requests, within its share of what is left of the budget, so a slow
model's p99 is not its slowest request of a handful (a model at 400 ms a request gives 10 requests
a second at concurrency 4). The rows a window counts are the rows its requests carried, as each
:class:`~model_release.triton.requester.Requester` reports them.

Memory stays flat: latencies go into a fixed-size :class:`Histogram` (log-linear buckets, like
HdrHistogram: about 1.6% relative precision from 1 us to 100 s), never a list, and responses are
dropped as they arrive. Around every window the server's statistics extension is read for every
model of the release, so the report separates queueing from compute and charges each BLS step
only its own time (its compute minus the calls it made, which Triton counts in the called models).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...triton.requester import Requester

#: sub-buckets per power of two: relative precision 1/64
SUB_BUCKETS = 64
#: powers of two covered, from 1 us
OCTAVES = 27  # 2**27 us = 134 s
_TOP_US, _OVERFLOW, _frexp = 2.0**OCTAVES, OCTAVES * SUB_BUCKETS, math.frexp


class Histogram:
    """Latencies in log-linear buckets: fixed memory whatever the count, mergeable, percentiles to ~1.6%."""

    def __init__(self) -> None:
        self.counts = np.zeros(OCTAVES * SUB_BUCKETS + 1, dtype=np.int64)
        self.total_s = 0.0
        self.max_s = 0.0

    @staticmethod
    def _upper_ms(index: int) -> float:
        if index >= OCTAVES * SUB_BUCKETS:
            return 2.0**OCTAVES / 1e3
        octave, sub = divmod(index, SUB_BUCKETS)
        return 2.0**octave * (1.0 + (sub + 1) / SUB_BUCKETS) / 1e3

    def record(self, seconds: float) -> None:
        """Count one latency (called once per request: kept to a few float operations)."""
        us = seconds * 1e6
        if 1.0 <= us < _TOP_US:
            mantissa, exponent = _frexp(us)  # us = mantissa * 2**exponent, mantissa in [0.5, 1)
            self.counts[(exponent - 1) * SUB_BUCKETS + int((mantissa * 2.0 - 1.0) * SUB_BUCKETS)] += 1
        else:
            self.counts[0 if us < 1.0 else _OVERFLOW] += 1  # under 1 us; the overflow bucket
        self.total_s += seconds
        if seconds > self.max_s:
            self.max_s = seconds

    def merge(self, other: "Histogram") -> "Histogram":
        self.counts += other.counts
        self.total_s += other.total_s
        self.max_s = max(self.max_s, other.max_s)
        return self

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    def percentile_ms(self, q: float) -> float:
        """The q-th percentile in ms (the upper edge of its bucket, capped at the largest latency seen)."""
        n = self.count
        if n == 0:
            return math.nan
        rank = max(1, math.ceil(q / 100.0 * n))
        index = int(np.searchsorted(np.cumsum(self.counts), rank))
        if index >= OCTAVES * SUB_BUCKETS:  # the overflow bucket has no upper edge: the largest latency seen
            return self.max_s * 1e3
        return min(self._upper_ms(index), self.max_s * 1e3)

    def figures(self) -> dict[str, float]:
        return {"p50_ms": self.percentile_ms(50), "p90_ms": self.percentile_ms(90), "p95_ms": self.percentile_ms(95),
                "p99_ms": self.percentile_ms(99), "max_ms": self.max_s * 1e3,
                "mean_ms": self.total_s / self.count * 1e3 if self.count else math.nan}


@dataclass
class Window:
    """One measurement window of one model."""

    target: str
    seconds: float
    requests: int
    rows: int
    errors: int
    histogram: Histogram
    first_error: str | None = None
    stats: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def throughput(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 3), "requests": self.requests, "errors": self.errors,
                "throughput_rows_per_s": self.throughput, **self.histogram.figures()}


class _Worker:
    """One thread that owns one :class:`Requester` for its whole life (a connection is bound to its thread).

    Each command is one window: send until ``soft`` (a perf_counter time), then on until the
    window's workers together hold ``need`` requests or ``hard`` comes; each worker keeps its count
    in its own slot of the window's shared ``done`` list.
    """

    def __init__(self, connect: Callable[[], Requester], index: int, stride: int, alive: Callable[[], str | None] | None) -> None:
        import queue

        self.commands: queue.Queue[_Command | None] = queue.Queue()
        self.results: queue.Queue[_Result] = queue.Queue()
        self.index, self.stride, self.alive = index, stride, alive
        self.connect = connect
        self.thread = threading.Thread(target=self._run, name=f"canary-load-{index}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        requester: Requester | None = None
        n = self.index
        try:
            while (command := self.commands.get()) is not None:
                try:
                    requester = requester or self.connect()
                except Exception as exc:  # noqa: BLE001 - a connection that cannot be made is an error of the window
                    self.results.put(_Result(Histogram(), 0, 0, 1, f"{type(exc).__name__}: {_line(exc)}"))
                    continue
                result, n = self._window(requester, command, n)
                self.results.put(result)
        finally:
            if requester is not None:
                try:
                    requester.close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    pass

    def _window(self, requester: Requester, command: "_Command", n: int) -> tuple["_Result", int]:
        """Closed-loop requests for one window, each timed from just before it is sent to its answer's end."""
        clock, send = time.perf_counter, requester.send
        result = _Result(Histogram(), 0, 0, 0, None)
        record = result.histogram.record
        soft, hard, need, done, me = command.soft, command.hard, command.need, command.done, self.index
        now = clock()
        while now < soft or (now < hard and sum(done) < need):
            start = clock()
            try:
                rows = send(n)
            except Exception as exc:  # noqa: BLE001 - every failure is counted, the first one kept
                result.errors += 1
                result.first = result.first or f"{type(exc).__name__}: {_line(exc)}"
                if result.errors >= 3 and self.alive is not None and self.alive() is not None:
                    break  # the server is gone: stop hammering it
                now = clock()
            else:
                now = clock()
                record(now - start)
                result.requests += 1
                result.rows += rows
                done[me] = result.requests
            n += self.stride
        return result, n


@dataclass
class _Command:
    """One window for a worker: until ``soft``, then on until ``need`` requests are ``done`` or ``hard``."""

    soft: float
    hard: float
    need: int
    done: list[int]


@dataclass
class _Result:
    """One worker's window: its latencies, requests, rows sent, errors and the first error."""

    histogram: Histogram
    requests: int
    rows: int
    errors: int
    first: str | None


def _line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:300] if text else ""


class LoadRunner:
    """Runs windows of closed-loop load (``concurrency`` requests in flight) against named targets.

    Each target gets ``concurrency`` worker threads, started on its first window and kept until
    :meth:`close`, each with its own connection.

    Args:
        connect: target -> a new :class:`Requester` for it (called inside the worker thread that uses it).
        concurrency: requests in flight.
        min_requests: the fewest requests a window holds when its caller lets it run on (``until_s``).
        statistics: reads the server's per-model statistics (cumulative); None skips them.
        alive: returns None while the server is alive, else why it is not (the local Triton's exit).
    """

    def __init__(self, connect: Callable[[str], Requester], *, concurrency: int, min_requests: int = 0,
                 statistics: Callable[[], dict[str, dict[str, float]]] | None = None,
                 alive: Callable[[], str | None] | None = None) -> None:
        self.connect = connect
        self.concurrency = concurrency
        self.min_requests = min_requests
        self.statistics = statistics
        self.alive = alive
        self._workers: dict[str, list[_Worker]] = {}

    def _pool(self, target: str) -> list[_Worker]:
        if target not in self._workers:
            self._workers[target] = [_Worker(lambda: self.connect(target), i, self.concurrency, self.alive)
                                     for i in range(self.concurrency)]
        return self._workers[target]

    def window(self, target: str, seconds: float, *, measure: bool = True, until_s: float | None = None) -> Window:
        """Keep ``concurrency`` requests in flight against ``target`` for ``seconds``.

        With ``until_s`` (at least ``seconds``), the window then runs on until it holds
        ``min_requests`` requests or ``until_s`` seconds have passed, whichever comes first.
        """
        gone = self.alive() if self.alive is not None else None
        if gone is not None:  # nothing is sent to a dead server, not even a statistics request
            return Window(target, 0.0, 0, 0, 1, Histogram(), gone)
        workers = self._pool(target)
        before = self._settled_statistics() if measure and self.statistics else {}
        start = time.perf_counter()
        hard = start + max(seconds, until_s if until_s is not None else seconds)
        done = [0] * len(workers)
        for worker in workers:
            worker.commands.put(_Command(start + seconds, hard, self.min_requests if until_s is not None else 0, done))
        results = self._collect(workers, target)
        elapsed = time.perf_counter() - start
        merged = Histogram()
        for result in results:
            merged.merge(result.histogram)
        first = next((r.first for r in results if r.first), None)
        gone = self.alive() if self.alive is not None else None
        after = self._settled_statistics() if measure and self.statistics and gone is None else {}
        return Window(target, elapsed, sum(r.requests for r in results), sum(r.rows for r in results),
                      sum(r.errors for r in results), merged, first, stats_delta(before, after))

    def _settled_statistics(self, *, pause_s: float = 0.005, bound_s: float = 0.2) -> dict[str, dict[str, float]]:
        """The server's statistics once the requests answered so far are in them.

        Triton counts a request when it releases it, which can come after the client has its answer, so
        a read just after a window's last answer can miss that request and charge it to the next window.
        Read again every ``pause_s`` until two reads agree (within ``bound_s``; no request is in flight
        between windows, so they agree within a read or two).
        """
        assert self.statistics is not None
        last = self.statistics()
        deadline = time.perf_counter() + bound_s
        while time.perf_counter() < deadline:
            time.sleep(pause_s)
            now = self.statistics()
            if now == last:
                break
            last = now
        return last

    def _collect(self, workers: list[_Worker], target: str) -> list[_Result]:
        """Every worker's window; a worker still blocked on a dead server counts as one error."""
        import queue

        results: list[_Result | None] = [None] * len(workers)
        while any(r is None for r in results):
            for i, worker in enumerate(workers):
                if results[i] is None:
                    try:
                        results[i] = worker.results.get(timeout=0.1)
                    except queue.Empty:
                        pass
            gone = self.alive() if self.alive is not None else None
            if gone is not None and any(r is None for r in results):
                # a request to a dead server can block until its timeout: do not wait for it
                self._workers.pop(target, None)
                return [r or _Result(Histogram(), 0, 0, 1, gone) for r in results]
        return [r for r in results if r is not None]

    def close(self) -> None:
        """Stop every worker thread and close its connection."""
        for workers in self._workers.values():
            for worker in workers:
                worker.commands.put(None)
            for worker in workers:
                worker.thread.join(timeout=30)
        self._workers.clear()


def stats_delta(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per-model differences of cumulative statistics (counts and nanoseconds)."""
    out = {}
    for model, now in after.items():
        was = before.get(model, {})
        delta = {k: v - was.get(k, 0) for k, v in now.items()}
        if delta.get("success_count", 0) > 0:
            out[model] = delta
    return out


def stable(windows: list[Window], count: int, tolerance: float) -> bool:
    """Whether the last ``count`` windows agree on p50 and p99 within ``tolerance`` (relative spread)."""
    if len(windows) < count:
        return False
    last = windows[-count:]
    for q in (50, 99):
        values = [w.histogram.percentile_ms(q) for w in last]
        if any(not math.isfinite(v) or v <= 0 for v in values) or max(values) / min(values) - 1.0 > tolerance:
            return False
    return True


@dataclass
class Measurement:
    """The load phase's figures for one target: its measured windows and whether they settled."""

    target: str
    windows: list[Window] = field(default_factory=list)
    stable: bool = False
    warmup_s: float = 0.0

    def settled(self, count: int) -> list[Window]:
        """The windows the figures come from: the last ``count`` (all of them when fewer)."""
        return self.windows[-count:]

    def merged(self, count: int) -> Histogram:
        """The latencies of the windows the figures come from, in one histogram."""
        merged = Histogram()
        for w in self.settled(count):
            merged.merge(w.histogram)
        return merged

    def figures(self, count: int) -> dict[str, Any]:
        chosen = self.settled(count)
        merged = self.merged(count)
        seconds = sum(w.seconds for w in chosen)
        rows = sum(w.rows for w in chosen)
        return {
            **merged.figures(), "requests": merged.count, "errors": sum(w.errors for w in self.windows),
            "first_error": next((w.first_error for w in self.windows if w.first_error), None),
            "throughput_rows_per_s": rows / seconds if seconds else 0.0, "windows_measured": len(self.windows),
            "windows_used": len(chosen), "stable": self.stable,
            "fewest_requests_per_window": min((w.requests for w in self.windows), default=0),
        }


def measure(runner: LoadRunner, targets: list[str], *, warmup_s: float, window_s: float, stable_windows: int,
            stability: float, budget_s: float, progress: Callable[[str], None] | None = None,
            decided: Callable[[dict[str, Measurement]], bool] | None = None) -> dict[str, Measurement]:
    """Warm every target up, then measure them in alternating windows, each round in the other order (A B B A A B ...).

    A window lasts ``window_s``, then runs on until it holds the runner's ``min_requests`` requests,
    within an equal share of what is left of ``budget_s`` for each target of the round (so a pair's
    two windows had the same room). Every target gets a window in each round (so window ``i`` of
    each ran back to back). Every other round runs in reverse: whatever else on the machine keeps
    time with the rounds (a poll every second against pairs of half-second windows) then falls
    on each target's windows in turn, where A B A B would put it on the same target's every round
    and move the pairs' ratios all one way. Rounds go on until every target's last ``stable_windows`` windows are stable (and ``decided`` says the windows so
    far decide what they are measured for, when given) or ``budget_s`` (the measuring time, warm-up
    excluded) is spent; each :class:`Measurement` says which. A target whose window had errors
    stops being measured further (its errors fail the gate).
    """
    results = {t: Measurement(t) for t in targets}
    for target in targets:
        t0 = time.perf_counter()
        runner.window(target, warmup_s, measure=False)
        results[target].warmup_s = round(time.perf_counter() - t0, 3)
    spent, rounds = 0.0, -1
    while spent < budget_s:
        rounds += 1
        healthy = [t for t in targets if not any(w.errors for w in results[t].windows)]
        if not healthy or (all(results[t].stable for t in healthy) and (decided is None or decided(results))):
            break
        share = max(window_s, (budget_s - spent) / len(healthy))  # each target's room this round, to reach min_requests
        for target in healthy if rounds % 2 == 0 else healthy[::-1]:
            window = runner.window(target, window_s, until_s=share)
            spent += window.seconds
            result = results[target]
            result.windows.append(window)
            result.stable = stable(result.windows, stable_windows, stability)
            if progress is not None:
                f = window.histogram.figures()
                progress(f"load {target}: window {len(result.windows)}: {window.requests} requests in {window.seconds:.2f} s, "
                         f"{window.throughput:.0f} rows/s, p50 {f['p50_ms']:.2f} ms, p99 {f['p99_ms']:.2f} ms, "
                         f"{window.errors} errors" + (" (stable)" if result.stable else ""))
    return results


def paired_ratios(candidate: Measurement, champion: Measurement) -> dict[str, Any]:
    """Candidate over champion, window pair by window pair (A_i, B_i ran back to back), then the median.

    Adjacent windows share the machine's state, so a pair's ratio cancels drift that a ratio of
    the two merged figures would keep; the median keeps one disturbed pair from deciding. Beside
    the ratios: the requests each pair's ratios rest on (the fewer of its two windows') and the
    slower side's requests per second (what a window of ``min_requests`` takes).
    """
    pairs = [(a, b) for a, b in zip(candidate.windows, champion.windows) if a.requests and b.requests]
    if not pairs:
        return {"pairs": 0, "p99_ratio": math.nan, "throughput_ratio": math.nan}
    p99 = [a.histogram.percentile_ms(99) / b.histogram.percentile_ms(99) for a, b in pairs]
    tput = [a.throughput / b.throughput if b.throughput else math.inf for a, b in pairs]
    rates = [w.requests / w.seconds for pair in pairs for w in pair if w.seconds > 0]
    return {"pairs": len(pairs), "p99_ratio": float(np.median(p99)), "throughput_ratio": float(np.median(tput)),
            "p99_ratios": [round(r, 4) for r in p99], "throughput_ratios": [round(r, 4) for r in tput],
            "requests": [min(a.requests, b.requests) for a, b in pairs],
            "requests_per_s": round(min(rates), 3) if rates else None}
