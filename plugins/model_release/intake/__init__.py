"""Intake: from an MLflow model reference to one immutable, downloaded, described model version.

- :mod:`.stage`: :func:`~.stage.resolve`, the stage (alias or version to one version, download,
  signature to Triton tensor specs, lineage);
- :mod:`.members`: a cascade's or fan-out's members as references (``models:/NAME@ALIAS``, a
  version, a file), pinned to versions with their lineage; imports neither the spec nor a stage,
  so the spec's validator and the ledger use it;
- :mod:`.candidate`: the candidate a run claims, resolved once (the model's version and every
  member's), which intake then downloads without asking an alias again;
- :mod:`.member_stages`: intake of every registered member with the release's own code.

Nothing is imported here, so ``import model_release.intake.members`` stays as light as that module.
"""
