"""The assemble stage and the repository linter.

- :mod:`.config` reads and writes config.pbtxt through Triton's own ModelConfig protobuf;
- :mod:`.render` renders BLS ``model.py`` files from ``model_repository_template/`` with values
  only as checked literals;
- :mod:`.assemble` writes a versioned Triton repository and its manifest (:mod:`.manifest`);
- :mod:`.lint` (a package: the linter, its rule families and ``model-release lint``) checks a
  repository the way Triton would at load time, and more.
"""
