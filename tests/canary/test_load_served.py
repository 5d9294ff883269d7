"""The load phase on a real tritonserver: the rows it counts are the rows Triton served, a batch too big for the
entry model is refused before any request, and a slow model's windows are sized by requests.

Triton's own statistics (``/v2/models/<model>/stats``, read here directly) are the reference. The slow
model is the canary tests' ``iris_slow`` (its postprocess sleeps 25 ms a batch, one instance: about 40
requests a second whatever the concurrency); its windows run on past ``window_s`` to ``min_requests``.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from model_release.canary.judge.latency_ratio import load_ratio_findings
from model_release.canary.measure.latency import CANDIDATE, CHAMPION, load_phase, load_runner
from model_release.canary.measure.load import paired_ratios
from model_release.errors import SpecError
from model_release.spec import LoadSpec, parse_spec
from model_release.triton.server import TritonServer

pytestmark = pytest.mark.integration

BASE = {"name": "iris", "model": {"name": "m", "alias": "candidate"}}


def _load(**load):  # noqa: ANN003, ANN202
    return parse_spec({**BASE, "canary": {"load": load}}).canary.load


def _stats(url: str, model: str) -> tuple[int, int]:
    """(requests, rows) Triton counts served for ``model``, from its statistics endpoint."""
    with urllib.request.urlopen(f"http://{url}/v2/models/{model}/stats", timeout=10) as answer:
        stats = json.load(answer)["model_stats"][0]
    return int(stats["inference_stats"]["success"]["count"]), int(stats["inference_count"])


def _measure(served, server, entries, golden, **settings):  # noqa: ANN001, ANN003, ANN202
    """``canary.load`` with ``settings``, and the load phase of ``entries`` (target -> entry model) under it."""
    load = _load(**settings)
    runner = load_runner(served.http_url, server, entries, golden, load)
    try:
        return load, load_phase(runner, list(entries), load)
    finally:
        runner.close()


@pytest.fixture(scope="module")
def server(served):  # noqa: ANN001, ANN201
    client = served.client()
    for model in ("iris", "iris_slow"):
        client.load_model(model)
    handle = TritonServer(served.http_url)
    yield handle
    handle.close()


def test_the_rows_counted_are_the_rows_triton_served(served, server, iris) -> None:
    _, golden, _ = iris
    before = _stats(served.http_url, "iris")
    _, measured = _measure(served, server, {CANDIDATE: server.entry("iris")}, golden, concurrency=2, batch_rows=13,
                           warmup_s=0.1, window_s=0.2, budget_s=0.6, min_requests=1)
    measured = measured[CANDIDATE]
    requests, rows = (a - b for a, b in zip(_stats(served.http_url, "iris"), before))
    windows = measured.windows
    assert windows and all(w.errors == 0 for w in windows)
    # the warm-up's requests are served but not counted in a window: the windows' own statistics deltas say so
    counted = (sum(w.requests for w in windows), sum(w.rows for w in windows))
    in_windows = (sum(w.stats["iris"]["success_count"] for w in windows), sum(w.stats["iris"]["inference_count"] for w in windows))
    assert counted == in_windows and counted[1] == 13 * counted[0]
    assert requests > counted[0] and rows == 13 * requests  # every request Triton served carried 13 rows


def test_batch_rows_above_the_served_entrys_max_batch_size_is_refused_and_nothing_is_sent(served, server, iris) -> None:
    """The release spec refuses it against repository.max_batch_size; this is what is served (a champion, an endpoint)."""
    _, golden, _ = iris
    entry = server.entry("iris")
    assert entry.max_batch_size == 64
    before = _stats(served.http_url, "iris")
    with pytest.raises(SpecError) as caught:
        load_runner(served.http_url, server, {CANDIDATE: entry}, golden, LoadSpec(batch_rows=65))
    message = str(caught.value)
    assert "canary.load.batch_rows 65 is above the candidate's entry model 'iris', served with max_batch_size 64" in message
    assert message.endswith("Set canary.load.batch_rows to at most 64")
    assert _stats(served.http_url, "iris") == before


def test_a_slow_models_windows_hold_min_requests_and_a_budget_too_small_ends_inconclusive_saying_so(served, server, iris) -> None:
    _, golden, _ = iris
    entries = {CANDIDATE: server.entry("iris_slow"), CHAMPION: server.entry("iris_slow")}
    _, measured = _measure(served, server, entries, golden, concurrency=2, batch_rows=16, warmup_s=0.1, window_s=0.1,
                           min_requests=12, budget_s=3.0, stable_windows=2)
    for target in (CANDIDATE, CHAMPION):
        windows = measured[target].windows
        print(f"{target}: requests per window {[w.requests for w in windows]}, seconds {[round(w.seconds, 3) for w in windows]}")
        # 12 requests at 25 ms each, one at a time: at least 0.3 s, where 0.1 s windows held about 4
        assert len(windows) >= 2 and all(w.requests >= 12 and w.seconds >= 0.3 for w in windows[:-1])  # the last: cut by the budget
        assert all(w.rows == 16 * w.requests for w in windows)

    small, short = _measure(served, server, entries, golden, concurrency=2, batch_rows=16, warmup_s=0.1, window_s=0.1,
                            min_requests=200, budget_s=1.0, stable_windows=2)
    paired = paired_ratios(short[CANDIDATE], short[CHAMPION])
    assert max(paired["requests"]) < 200  # 1 s at about 40 requests a second cannot hold 200 a window
    for finding in load_ratio_findings(paired, small):
        assert finding.outcome in ("inconclusive", "block")  # never a pass on windows this thin
        assert "requests each (canary.load.min_requests 200)" in finding.message
        if finding.outcome == "inconclusive":
            assert "canary.load.budget_s of about" in finding.message and "(it is 1)" in finding.message
