"""The store handle, :class:`ModelStore`: one backend plus the key map, and :func:`open_store`.

Named for what it is: not a backend (those are :class:`~.s3.S3Backend` in ``s3.py`` and
:class:`~.folder.FolderBackend` in ``folder.py``, both speaking :class:`~.backend.StoreBackend`)
but the model store a caller holds: its URI, its backend, where a release's models are for
Triton, the release documents (manifest, completion record), and the checks that a store is
there and writable. Keys come from :mod:`.keys`; the channel pointer protocol is
:mod:`.pointer`. Opening a store (:func:`open_store`) refuses a URI a store never has before
anything is read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..errors import SpecError, StoreError
from . import keys
from .backend import StoreBackend
from .documents import excerpt
from .pointer import ChannelPointer, read_pointer


class ModelStore:
    """A model store: a backend plus the key map (:mod:`.keys`).

    Use :func:`open_store` to get one from a URI.
    """

    def __init__(self, backend: StoreBackend, *, endpoint_url: str | None = None) -> None:
        self.backend = backend
        self.uri = backend.uri
        self.endpoint_url = endpoint_url

    # -- keys ----------------------------------------------------------------------------------
    @staticmethod
    def release_prefix(release_id: str) -> str:
        """``releases/<release_id>/`` (:func:`.keys.release_prefix`)."""
        return keys.release_prefix(release_id)

    def release_uri(self, release_id: str) -> str:
        """The release prefix as a URI under this store."""
        return f"{self.uri}/{keys.release_prefix(release_id)}"

    def triton_repository(self, release_id: str) -> str:
        """The ``--model-repository`` argument that makes Triton load this release's models.

        ``s3://bucket/prefix/releases/<id>/models`` on AWS; ``s3://host:port/bucket/...`` for a
        private endpoint (moto, MinIO); a plain absolute path for a local-folder store.
        """
        rest = f"{keys.release_prefix(release_id)}models"
        if self.uri.startswith("file://"):
            return str(Path(unquote(urlparse(self.uri).path)) / rest)
        if self.endpoint_url:
            host = urlparse(self.endpoint_url).netloc
            return f"s3://{host}/{self.uri[len('s3://'):]}/{rest}"
        return f"{self.uri}/{rest}"

    # -- documents -----------------------------------------------------------------------------
    def read_json(self, key: str) -> tuple[dict[str, Any], str] | None:
        """A stored JSON object and its etag, or None when absent.

        Raises:
            StoreError: the object is not a JSON object; the message quotes its first bytes.
        """
        got = self.backend.get_bytes(key)
        if got is None:
            return None
        data, etag = got
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise StoreError(f"{self.uri}/{key} is not a JSON object (content {excerpt(data)}); it was not written by "
                             "model-release or is damaged")
        return doc, etag

    def read_pointer(self, channel: str) -> ChannelPointer | None:
        """The channel's pointer: :func:`.pointer.read_pointer` of this store, for a caller that
        holds only the store."""
        return read_pointer(self, channel)

    def read_manifest(self, release_id: str) -> tuple[dict[str, Any], bytes] | None:
        """A release's ``release.json`` (parsed, and as stored), or None when absent.

        Raises:
            StoreError: it is not a JSON object.
        """
        got = self.backend.get_bytes(keys.release_prefix(release_id) + keys.MANIFEST)
        if got is None:
            return None
        try:
            doc = json.loads(got[0])
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise StoreError(f"{self.release_uri(release_id)}{keys.MANIFEST} is not a JSON object; the release is damaged")
        return doc, got[0]

    def read_record(self, release_id: str) -> dict[str, Any] | None:
        """A release's ``_COMPLETE`` record, or None when the release is not complete."""
        got = self.read_json(keys.release_prefix(release_id) + keys.MARKER)
        return None if got is None else got[0]

    def channels(self) -> list[str]:
        """Every channel with a pointer (damaged or not), sorted."""
        return sorted(c for o in self.backend.list(keys.CHANNELS) if (c := keys.channel_of(o.key)) is not None)

    def release_ids(self) -> list[str]:
        """Every release prefix's id, complete or not."""
        return self.backend.list_dirs(keys.RELEASES)

    # -- checks --------------------------------------------------------------------------------
    def check_readable(self) -> None:
        """Refuse a store that is not there, without creating anything.

        Raises:
            SpecError: a local store folder that does not exist or is not a folder (a typo'd path).
            StoreError: the bucket does not exist or may not be listed.
            ServiceUnavailable: the endpoint did not answer.
        """
        self.backend.check(write=False)

    def check_writable(self) -> None:
        """Prove a promotion could write here, leaving nothing behind; cheap enough to call
        before any stage of a release runs.

        S3: a HEAD of the bucket, then a multipart upload started under ``releases/`` and
        aborted at once (it needs the same permission as an upload and never becomes an
        object). Local folder: a temporary file created and removed in the store folder, or in
        its nearest existing parent when the folder is still to be created.

        Raises:
            StoreError: the bucket does not exist or may not be written, or the folder is not
                writable; the message says which and what to do.
            ServiceUnavailable: the endpoint did not answer.
        """
        self.backend.check(write=True)

    def __repr__(self) -> str:
        return f"ModelStore({self.uri!r})"


#: an S3 bucket name: AWS's rule, widened to the legacy us-east-1 names (capitals, '_', up to 255)
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]{1,253}[A-Za-z0-9]")
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c|00)", re.IGNORECASE)
_FORMS = "use s3://BUCKET[/PREFIX] or file:///ABSOLUTE/PATH"


def _redacted(uri: str) -> str:
    """The URI with any user:password@ part replaced, so an error never repeats a credential."""
    scheme, sep, rest = uri.partition("://")
    netloc, slash, path = rest.partition("/")
    if sep and "@" in netloc:
        return f"{scheme}://***@{netloc.rsplit('@', 1)[1]}{slash}{path}"
    return uri


def _uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot name a store, or None. Checked before anything is opened."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in uri):
        return "it contains a control character"
    for mark, what in (("?", "query"), ("#", "fragment")):
        if mark in uri:
            part = uri[uri.index(mark):]
            part = part.split("#")[0] if mark == "?" else part
            return f"it has a {what} {part!r}, which a store URI never has (it would be dropped and the base store opened)"
    if "\\" in uri:
        return "it has a backslash; separate folders with '/'"
    encoded = _ENCODED_SEPARATOR.search(uri)
    if encoded:
        return f"it has {encoded.group(0)!r}, a percent-encoded '/', '\\' or NUL (decoded, it would name another folder)"
    parsed = urlparse(uri)
    if "@" in parsed.netloc:
        return "it carries credentials (user@ or user:password@); they come from the AWS chain or the Airflow connection"
    path = unquote(parsed.path) if parsed.scheme == "file" else parsed.path
    if any(seg in (".", "..") for seg in path.split("/")):
        return "it has a '.' or '..' segment" + (" (after percent-decoding)" if path != parsed.path else "")
    if parsed.scheme == "s3" and parsed.netloc and not _BUCKET.fullmatch(parsed.netloc):
        return (f"{parsed.netloc!r} is not an S3 bucket name (letters, digits, '.', '-', '_'; 3 to 255); "
                "a private endpoint (moto, MinIO) is set with MODEL_RELEASE_S3_ENDPOINT_URL, not in the URI")
    if parsed.scheme == "s3" and "//" in parsed.path.strip("/"):
        return "its prefix has an empty segment ('//')"
    return None


def open_store(uri: str, *, s3_client: Any | None = None) -> ModelStore:
    """Open a model store. Opening reads and writes nothing (a local folder is created by the
    first write; see :meth:`ModelStore.check_readable` and :meth:`ModelStore.check_writable`).

    Args:
        uri: ``s3://BUCKET[/PREFIX]`` or ``file:///ABSOLUTE/PATH``; no query, fragment,
            credentials, ``.``/``..`` segment or percent-encoded separator.
        s3_client: a boto3 S3 client to use (for example built from an Airflow connection); when
            None one is built from the standard AWS chain, with the endpoint from
            ``MODEL_RELEASE_S3_ENDPOINT_URL`` or ``AWS_ENDPOINT_URL`` when set.

    Raises:
        SpecError: the URI is neither form, or one of them with something a store URI never has.
    """
    if not isinstance(uri, str):
        raise SpecError(f"store URI {uri!r} is not valid: it is not a string; {_FORMS}")
    problem = _uri_problem(uri)
    if problem:
        raise SpecError(f"store URI {_redacted(uri)!r} is not valid: {problem}; {_FORMS}")
    parsed = urlparse(uri)
    if parsed.scheme == "s3" and parsed.netloc:
        from .s3 import S3Backend, default_client

        client = s3_client if s3_client is not None else default_client()
        endpoint = getattr(getattr(client, "meta", None), "endpoint_url", None)
        if endpoint and endpoint.rstrip("/").endswith("amazonaws.com"):
            endpoint = None
        return ModelStore(S3Backend(parsed.netloc, parsed.path, client), endpoint_url=endpoint)
    if parsed.scheme == "file" and parsed.path.startswith("/") and parsed.netloc in ("", "localhost"):
        from .folder import FolderBackend

        return ModelStore(FolderBackend(Path(unquote(parsed.path))))
    raise SpecError(f"store URI {_redacted(uri)!r} is not valid; {_FORMS}")
