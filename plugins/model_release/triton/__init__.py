"""Talking to Triton: one room for the canary and for every later stage that serves a model.

Modules: :mod:`.local` (:class:`~.local.LocalTriton`, a local tritonserver 2.51 from the
``.venv-triton`` runtime, started and stopped per run), :mod:`.client` (the HTTP inference client
and the timed replay of a golden set with bounded concurrency), :mod:`.server` (the
explicit-mode server handle: readiness, metadata, load and unload in dependency order),
:mod:`.delivery` (models delivered through the repository API to a remote Triton, pushed or staged,
and the TensorRT plan checks), :mod:`.shim` (a copy of a repository whose ONNX leaves are served by
the python-backend onnxruntime shim), :mod:`.shim_model` (that shim's ``model.py``, copied into
every shimmed version folder; it runs inside Triton, not here).

Nothing here imports from :mod:`model_release.canary`.
"""
