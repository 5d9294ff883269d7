"""Where things live in a model store, and the small JSON documents kept there.

Keys, relative to the store root (``s3://bucket/prefix`` or ``file:///path``)::

    releases/<release_id>/models/...      the Triton model repository (immutable once complete)
    releases/<release_id>/reports/...     the canary report and other evidence
    releases/<release_id>/release.json    the manifest: every file's sha256 and size (written after them)
    releases/<release_id>/_COMPLETE       the verification record, written last: a release without it
                                          is unfinished and no channel may point at it
    channels/<channel>.json               the pointer, moved only by a conditional write
    history/<channel>/<seq, 10 digits>.json   one entry per pointer move, never rewritten
"""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..errors import SpecError, StoreError
from ..names import check_channel, is_release_id
from .backend import PreconditionFailed, StoreBackend

RELEASES = "releases/"
MANIFEST = "release.json"
MARKER = "_COMPLETE"
FORMAT = 1


def actor() -> str:
    """Who moves a pointer: ``$MODEL_RELEASE_ACTOR`` or ``user@host``."""
    if os.environ.get("MODEL_RELEASE_ACTOR"):
        return os.environ["MODEL_RELEASE_ACTOR"]
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def utcnow() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def dumps(doc: Any) -> bytes:
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def _excerpt(data: bytes, limit: int = 80) -> str:
    """A stored document's first bytes, quoted on one line, for an error message."""
    text = data[:limit].decode("utf-8", "replace")
    return repr(text + ("..." if len(data) > limit else ""))


@dataclass
class ChannelPointer:
    """The content of ``channels/<channel>.json`` (and of each history entry).

    Attributes:
        channel: the channel's name.
        release_id: the release it points at.
        previous_release: the release it pointed at before this move (None for the first).
        seq: 1 for the first move, then +1 per move; the history entry's number.
        action: ``promote``, ``rollback`` or ``repair``.
        updated_at: UTC time of the move.
        updated_by: who moved it (``$MODEL_RELEASE_ACTOR`` or user@host).
        etag: the stored object's etag when read (not serialised), for the next conditional write.
    """

    channel: str
    release_id: str
    previous_release: str | None
    seq: int
    action: str = "promote"
    updated_at: str = field(default_factory=utcnow)
    updated_by: str = field(default_factory=actor)
    format: int = FORMAT
    etag: str | None = field(default=None, compare=False)

    def to_doc(self) -> dict[str, Any]:
        doc = asdict(self)
        doc.pop("etag")
        return doc

    @classmethod
    def from_doc(cls, doc: Any, etag: str | None = None, *, channel: str | None = None) -> "ChannelPointer":
        """The pointer a stored document describes.

        Raises:
            DamagedDocument: the document is not a pointer (not an object, a key missing or of
                the wrong type, or naming another channel than ``channel``); says which.
        """
        problem = pointer_problem(doc, channel)
        if problem:
            raise DamagedDocument(problem)
        known = {k: doc[k] for k in ("channel", "release_id", "previous_release", "seq", "action", "updated_at", "updated_by", "format") if k in doc}
        return cls(**known, etag=etag)


class DamagedDocument(Exception):
    """A stored pointer or history entry is not what model-release writes. Internal: the caller
    turns it into a ``StoreError`` naming the key and the way out."""


#: the keys every pointer and history entry carries, and their types
_POINTER_KEYS: dict[str, tuple[type, ...]] = {
    "channel": (str,), "release_id": (str,), "previous_release": (str, type(None)), "seq": (int,), "action": (str,),
}


def pointer_problem(doc: Any, channel: str | None = None) -> str | None:
    """What makes ``doc`` unusable as a channel pointer, or None when it is one."""
    if not isinstance(doc, dict):
        return f"it holds a JSON {type(doc).__name__}, not an object"
    for key, types in _POINTER_KEYS.items():
        if key not in doc:
            return f"key {key!r} is missing"
        value = doc[key]
        if not isinstance(value, types) or isinstance(value, bool):
            return f"key {key!r} is {value!r}, not {' or '.join('null' if t is type(None) else t.__name__ for t in types)}"
    if not is_release_id(doc["release_id"]):
        return f"key 'release_id' is {doc['release_id']!r}, not a valid release id"
    if doc["seq"] < 1:
        return f"key 'seq' is {doc['seq']!r}, not a move number >= 1"
    if channel is not None and doc["channel"] != channel:
        return f"key 'channel' is {doc['channel']!r}, not {channel!r}"
    return None


def repair_hint(uri: str, channel: str) -> str:
    """The way out of a damaged or dangling pointer, as a command line."""
    return (f"repair it with `model-release store repair-pointer --store {uri} --channel {channel} --to RELEASE`, "
            "naming a release `model-release store releases` lists as complete (it is verified first)")


class ModelStore:
    """A model store: a backend plus the layout above.

    Use :func:`open_store` to get one from a URI.
    """

    def __init__(self, backend: StoreBackend, *, endpoint_url: str | None = None) -> None:
        self.backend = backend
        self.uri = backend.uri
        self.endpoint_url = endpoint_url

    # -- keys ----------------------------------------------------------------------------------
    @staticmethod
    def release_prefix(release_id: str) -> str:
        return f"{RELEASES}{release_id}/"

    @staticmethod
    def channel_key(channel: str) -> str:
        return f"channels/{check_channel(channel)}.json"

    @staticmethod
    def history_key(channel: str, seq: int) -> str:
        return f"history/{check_channel(channel)}/{seq:010d}.json"

    def release_uri(self, release_id: str) -> str:
        return f"{self.uri}/{self.release_prefix(release_id)}"

    def triton_repository(self, release_id: str) -> str:
        """The ``--model-repository`` argument that makes Triton load this release's models.

        ``s3://bucket/prefix/releases/<id>/models`` on AWS; ``s3://host:port/bucket/...`` for a
        private endpoint (moto, MinIO); a plain absolute path for a local-folder store.
        """
        rest = f"{self.release_prefix(release_id)}models"
        if self.uri.startswith("file://"):
            return str(Path(unquote(urlparse(self.uri).path)) / rest)
        if self.endpoint_url:
            host = urlparse(self.endpoint_url).netloc
            return f"s3://{host}/{self.uri[len('s3://'):]}/{rest}"
        return f"{self.uri}/{rest}"

    # -- documents -----------------------------------------------------------------------------
    def read_json(self, key: str) -> tuple[dict[str, Any], str] | None:
        got = self.backend.get_bytes(key)
        if got is None:
            return None
        data, etag = got
        try:
            doc = json.loads(data)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise StoreError(f"{self.uri}/{key} is not a JSON object (content {_excerpt(data)}); it was not written by "
                             "model-release or is damaged")
        return doc, etag

    def parse_pointer(self, channel: str, got: tuple[bytes, str] | None) -> tuple[ChannelPointer | None, str | None]:
        """A stored pointer's content (from ``backend.get_bytes``), read without raising:
        ``(pointer, None)``; ``(None, None)`` when there is none; ``(None, what is wrong)`` when damaged."""
        if got is None:
            return None, None
        try:
            return ChannelPointer.from_doc(json.loads(got[0]), etag=got[1], channel=channel), None
        except ValueError:
            problem = "it is not valid JSON"
        except DamagedDocument as exc:
            problem = str(exc)
        return None, f"{problem} (content {_excerpt(got[0])})"

    def inspect_pointer(self, channel: str) -> tuple[ChannelPointer | None, str | None]:
        """:meth:`parse_pointer` of the channel's stored pointer."""
        return self.parse_pointer(channel, self.backend.get_bytes(self.channel_key(channel)))

    def damaged_pointer(self, channel: str, problem: str) -> StoreError:
        """The error for a damaged pointer: which key, what is wrong, the way out."""
        return StoreError(
            f"channel pointer {self.uri}/{self.channel_key(channel)} is damaged: {problem}; promotion, rollback and "
            f"retention cannot use it: {repair_hint(self.uri, channel)}"
        )

    def read_pointer(self, channel: str) -> ChannelPointer | None:
        """The channel's pointer, or None when there is none.

        Raises:
            StoreError: the stored pointer is damaged (not JSON, a key missing or of the wrong
                type); the message names the key and the repair command.
        """
        pointer, problem = self.inspect_pointer(channel)
        if problem:
            raise self.damaged_pointer(channel, problem)
        return pointer

    def write_pointer(self, pointer: ChannelPointer, *, replacing: ChannelPointer | None) -> ChannelPointer:
        """Write the pointer only if the stored one is still ``replacing`` (absent when None).

        Raises:
            PreconditionFailed: someone else wrote the pointer meanwhile.
        """
        key = self.channel_key(pointer.channel)
        data = dumps(pointer.to_doc())
        if replacing is None:
            etag = self.backend.put_bytes(key, data, if_none_match=True)
        else:
            if not replacing.etag:
                raise PreconditionFailed("the pointer being replaced has no etag")
            etag = self.backend.put_bytes(key, data, if_match=replacing.etag)
        pointer.etag = etag
        return pointer

    def append_history(self, pointer: ChannelPointer) -> None:
        """Record a pointer move; an entry that exists already is left as it is."""
        try:
            self.backend.put_bytes(self.history_key(pointer.channel, pointer.seq), dumps(pointer.to_doc()), if_none_match=True)
        except PreconditionFailed:
            pass

    def read_manifest(self, release_id: str) -> tuple[dict[str, Any], bytes] | None:
        got = self.backend.get_bytes(self.release_prefix(release_id) + MANIFEST)
        if got is None:
            return None
        try:
            doc = json.loads(got[0])
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise StoreError(f"{self.release_uri(release_id)}{MANIFEST} is not a JSON object; the release is damaged")
        return doc, got[0]

    def read_record(self, release_id: str) -> dict[str, Any] | None:
        got = self.read_json(self.release_prefix(release_id) + MARKER)
        return None if got is None else got[0]

    def channels(self) -> list[str]:
        return sorted(o.key[len("channels/") : -len(".json")] for o in self.backend.list("channels/") if o.key.endswith(".json"))

    def release_ids(self) -> list[str]:
        return self.backend.list_dirs(RELEASES)

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
        from .localfs import FileBackend

        return ModelStore(FileBackend(Path(unquote(parsed.path))))
    raise SpecError(f"store URI {_redacted(uri)!r} is not valid; {_FORMS}")
