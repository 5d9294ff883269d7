"""Measuring the served model: how fast it answers, and the serving configuration that answers fastest.

Modules: :mod:`.load` (the load phase: requests kept in flight, windows until p50/p99 settle,
candidate and champion alternating, latencies in a fixed-size histogram), :mod:`.latency` (the
load phase wired to the served entry models, and where the time goes per model), :mod:`.tune`
(``canary.tune``: a serving-configuration search on the canary, shipped in the release).
"""
