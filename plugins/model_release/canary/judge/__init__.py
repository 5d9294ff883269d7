"""Judging the served model: every check as one :class:`~.gates.Gate`, decided the same way.

Modules: :mod:`.compare` (the outputs' roles, parity of served outputs against the native
reference), :mod:`.quality` (metrics on ground truth, agreement and distribution shift against the
champion), :mod:`.contract` (the interface clients rely on, and what breaks it), :mod:`.expect`
(a great-expectations suite over the served outputs), :mod:`.gates` (each judgement as a gate:
parity, contract, nonfinite, quality, agreement, load, the replay's SLO, expectations).

Nothing here imports from :mod:`model_release.canary.report`: the report is drawn from what
judging returns.
"""
