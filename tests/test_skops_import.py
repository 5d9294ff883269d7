"""skops.io imported by model_release.model.skops_import: no torch, the same trusted types, the real package after."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import json, sys
mode = sys.argv[1]
if mode == "ours":
    from model_release.model.skops_import import import_skops, TORCH_COMPAT
    import_skops()
else:
    import skops.io
from skops.io import _trusted_types as t
trusted = sorted(n for k in dir(t) if k.endswith("_TYPE_NAMES") for n in getattr(t, k))
torch_then = "torch" in sys.modules
stand_in = sys.modules.get("sklearn.externals.array_api_compat.torch")
import sklearn.externals.array_api_compat.torch as compat  # the real one, on demand
print(json.dumps({"trusted": trusted, "torch": torch_then, "left": stand_in is not None,
                  "real": hasattr(compat, "asarray"), "torch_after": "torch" in sys.modules}))
"""


def _probe(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_skops_imports_without_torch_trusting_the_same_types_and_the_real_package_loads_after() -> None:
    plain, ours = _probe("plain"), _probe("ours")
    assert plain["torch"] is True  # what it costs without: scikit-learn's walk imports torch
    assert ours["torch"] is False and ours["left"] is False
    assert len(ours["trusted"]) > 100 and ours["trusted"] == plain["trusted"]
    assert ours["real"] is True and ours["torch_after"] is True  # asked for, the real package imports torch
