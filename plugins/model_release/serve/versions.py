"""The Triton version numbers a release is served under, decided by the store's history.

Every release of a channel gets, per model, a serving version number that no other content of
that model ever had on this channel, so versions of two releases can never be confused and a
request pinned to one version is answered by one release. A model whose files are unchanged
(same digest as a release already numbered) keeps that release's number: it is neither copied
nor loaded again. The numbers live in one small document per channel,
``serving/<channel>/versions.json``::

    {"format": 1, "channel": "production",
     "models": {"iris_model": {"releases": {"iris-1": 1, "iris-2": 2}, "digests": {"1": "…", "2": "…"}}}}

It is written only by a conditional write (``If-Match`` the etag read, ``If-None-Match`` for the
first), so two roll-outs numbering at once cannot both win; the loser re-reads and numbers again.
A BLS model's digest includes the numbers of the models it calls (they are in its ``pins.json``), so
it gets a new number whenever one of them does. Ensembles are not numbered: an ensemble has one configuration loaded at a time (config.pbtxt is
per model, shared by its versions), so the entry ensemble is served at version 1 with its steps
pinned to the numbers here (see :mod:`.server_repo`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConflictError, StoreError
from ..store import keys
from ..store.backend import PreconditionFailed
from ..store.documents import dumps
from ..store.model_store import ModelStore

FORMAT = 1
ENSEMBLE_VERSION = 1
_RETRIES = 5


def versions_key(channel: str) -> str:
    """The store key of a channel's version map."""
    return keys.serving_versions_key(channel)


def model_digest(manifest: dict[str, Any], model: str) -> str:
    """A digest of one model's content in a release: its config.pbtxt and its version folder's files.

    The release's own version number is not part of it (``models/<m>/<v>/f`` counts as ``f``),
    so the same files under another release version still count as unchanged.

    Raises:
        StoreError: the manifest lists no file of ``model``.
    """
    repo = manifest.get("repository", {})
    version = str(repo.get("models", {}).get(model, ""))
    prefix = f"models/{model}/"
    entries = []
    for path, entry in sorted(manifest.get("files", {}).items()):
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix):]
        if rest.startswith(f"{version}/"):
            rest = "@version/" + rest[len(version) + 1:]
        entries.append(f"{rest}\0{entry['sha256']}")
    if not entries:
        raise StoreError(f"release.json lists no file of model {model!r} under {prefix}; the release is damaged")
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()


@dataclass
class VersionMap:
    """A channel's version map as read (with its etag, for the next conditional write)."""

    channel: str
    models: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    etag: str | None = None

    def version(self, model: str, release_id: str) -> int | None:
        """The serving version of ``model`` in ``release_id``, or None when it was never numbered."""
        value = self.models.get(model, {}).get("releases", {}).get(release_id)
        return int(value) if value is not None else None

    def digest(self, model: str, version: int) -> str:
        """The content digest numbered ``version`` of ``model``."""
        return str(self.models[model]["digests"][str(version)])

    def release_ids(self) -> set[str]:
        """Every release numbered on this channel."""
        return {r for entry in self.models.values() for r in entry.get("releases", {})}

    def release_versions(self, release_id: str) -> dict[str, int]:
        """Every numbered model of ``release_id`` -> its serving version."""
        out = {}
        for model, entry in self.models.items():
            if release_id in entry.get("releases", {}):
                out[model] = int(entry["releases"][release_id])
        return out

    def to_doc(self) -> dict[str, Any]:
        return {"format": FORMAT, "channel": self.channel, "models": self.models}


def read_versions(store: ModelStore, channel: str) -> VersionMap:
    """The channel's version map (empty when no release was numbered yet).

    Raises:
        StoreError: the stored document is damaged.
    """
    got = store.read_json(versions_key(channel))
    if got is None:
        return VersionMap(channel)
    doc, etag = got
    if doc.get("format") != FORMAT or not isinstance(doc.get("models"), dict):
        raise StoreError(f"{store.uri}/{versions_key(channel)} is not a version map of format {FORMAT} "
                         f"(keys {sorted(doc)}); it was not written by model-release or is damaged")
    return VersionMap(channel, doc["models"], etag)


def served_models(manifest: dict[str, Any]) -> list[str]:
    """The models of a release that get serving numbers: all but ensembles (read from the manifest's files)."""
    repo = manifest.get("repository", {})
    ensembles = set(repo.get("ensembles", []))
    if not ensembles:
        ensembles = {m for m in repo.get("models", {}) if m == repo.get("entry_model") and _is_ensemble(manifest, m)}
    return [m for m in repo.get("load_order", []) if m not in ensembles]


def _is_ensemble(manifest: dict[str, Any], model: str) -> bool:
    """True when the model's version folder holds no file but a placeholder (the assembler's ensemble)."""
    version = str(manifest.get("repository", {}).get("models", {}).get(model, ""))
    files = [p for p in manifest.get("files", {}) if p.startswith(f"models/{model}/{version}/")]
    return all(p.rsplit("/", 1)[-1].startswith(".") for p in files)


def assign_versions(store: ModelStore, channel: str, release_id: str, manifest: dict[str, Any]) -> dict[str, int]:
    """Number ``release_id``'s models on ``channel`` (once; a rerun returns the same numbers).

    Args:
        store: the model store.
        channel: the channel the release is served on.
        release_id: the release.
        manifest: its release.json.

    Returns:
        model -> serving version, for every model but the ensembles.

    Raises:
        ConflictError: the map kept changing under this writer (more than a few concurrent numberings).
        StoreError: the map is damaged or a model has no files in the manifest.
    """
    models = served_models(manifest)
    calls = manifest.get("repository", {}).get("calls", {})
    models = [m for m in models if not calls.get(m)] + [m for m in models if calls.get(m)]  # callees first
    for _ in range(_RETRIES):
        current = read_versions(store, channel)
        if all(current.version(m, release_id) is not None for m in models):
            return {m: int(current.version(m, release_id)) for m in models}  # type: ignore[arg-type]
        numbers: dict[str, int] = {}
        for model in models:
            digest = model_digest(manifest, model)
            if calls.get(model):  # a BLS model's pins are part of what it is: new callee numbers, a new number
                pins = {c: numbers[c] for c in calls[model] if c in numbers}
                digest = hashlib.sha256(f"{digest}\0{json.dumps(pins, sort_keys=True)}".encode()).hexdigest()
            entry = current.models.setdefault(model, {"releases": {}, "digests": {}})
            if release_id not in entry["releases"]:
                same = [int(v) for v, d in entry["digests"].items() if d == digest]
                number = same[0] if same else max([0, *(int(v) for v in entry["digests"])]) + 1
                entry["releases"][release_id] = number
                entry["digests"][str(number)] = digest
            numbers[model] = int(entry["releases"][release_id])
        try:
            data = dumps(current.to_doc())
            if current.etag is None:
                store.backend.put_bytes(versions_key(channel), data, if_none_match=True)
            else:
                store.backend.put_bytes(versions_key(channel), data, if_match=current.etag)
        except PreconditionFailed:
            continue
        return {m: int(current.version(m, release_id)) for m in models}  # type: ignore[arg-type]
    raise ConflictError(f"the version map {store.uri}/{versions_key(channel)} changed {_RETRIES} times while numbering "
                        f"{release_id!r}; another roll-out is numbering releases at the same time: retry")


def describe(versions: dict[str, int]) -> str:
    """``model:v, model:v`` for messages and the record."""
    return json.dumps(dict(sorted(versions.items())))
