"""Import ``skops.io`` (the MLflow sklearn flavor's format) without importing PyTorch.

On import, skops lists the estimators it trusts with scikit-learn's ``all_estimators()``, which
walks every package of scikit-learn and so imports its vendored
``sklearn.externals.array_api_compat.torch``, and with it all of PyTorch when it is installed
(it is here, for the pytorch flavor): about 1.2-1.4 s of a 3-4 s import on two cores, in every
process that loads or logs a scikit-learn model, for a package that holds no estimator.
:func:`import_skops` puts an empty package in that name's place while skops imports, then takes it
out again, so a later ``import sklearn.externals.array_api_compat.torch`` finds the real one.
skops trusts the same types either way (``tests/test_skops_import.py`` compares the lists).
"""

from __future__ import annotations

import sys
import types
from typing import Any

#: the package scikit-learn's walk imports only to look inside it (array-API support for torch tensors)
TORCH_COMPAT = "sklearn.externals.array_api_compat.torch"


def import_skops() -> Any:
    """``skops.io``, imported now if it was not, without importing torch on the way; the module."""
    module = sys.modules.get("skops.io")
    if module is not None:
        return module
    placeholder = None
    if TORCH_COMPAT not in sys.modules and "torch" not in sys.modules:
        placeholder = types.ModuleType(TORCH_COMPAT, "an empty stand-in while skops imports (model_release.model.skops_import)")
        placeholder.__path__ = []  # a package with nothing in it: the walk looks inside and finds nothing
        sys.modules[TORCH_COMPAT] = placeholder
    try:
        import skops.io

        return skops.io
    finally:
        if placeholder is not None and sys.modules.get(TORCH_COMPAT) is placeholder:
            del sys.modules[TORCH_COMPAT]
            parent = sys.modules.get(TORCH_COMPAT.rpartition(".")[0])
            if parent is not None and getattr(parent, "torch", None) is placeholder:
                delattr(parent, "torch")
