"""A release laid out locally exactly as its store prefix, ready for :func:`~.promote.promote`.

``bundle_release`` gathers what a release ships: the assembled Triton repository as ``models/``
(hard links where possible, not copies), the evidence as ``reports/`` (the canary's report.json
and report.html, the export's parity.json) and the manifest as ``release.json``, completed with
the canary's verdict and re-hashed so it lists every file of the bundle.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..repository.manifest import finalize_manifest
from ..workspace import link_or_copy
from .keys import MANIFEST


def bundle_release(
    dest: Path, *, repository_dir: str, manifest_path: str, reports: Iterable[str | None], canary: dict[str, Any],
    run: dict[str, Any] | None = None,
) -> Path:
    """Lay out ``dest`` as ``models/``, ``reports/`` and ``release.json`` (final).

    Args:
        dest: the folder to create (it must not exist yet).
        repository_dir: the assembled Triton model repository.
        manifest_path: the assembled manifest.
        reports: files for ``reports/``; missing or empty entries are left out.
        canary: the canary's verdict for the manifest's ``canary`` section.
        run: the run that made the release (the manifest's ``run`` section), when known.

    Returns:
        ``dest``.
    """
    shutil.copytree(repository_dir, dest / "models", copy_function=link_or_copy)
    folder = dest / "reports"
    folder.mkdir(parents=True)
    for path in reports:
        if path and Path(path).is_file():
            shutil.copy2(path, folder / Path(path).name)
    shutil.copy2(manifest_path, dest / MANIFEST)
    finalize_manifest(dest / MANIFEST, dest, canary=canary, run=run)
    return dest
