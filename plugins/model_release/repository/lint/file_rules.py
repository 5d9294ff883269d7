"""Rules on a model folder's files: config.pbtxt, version folders, the file each backend loads.

Files are read defensively: never through a symlink, only regular files, at most a few MiB, so a
hostile repository can neither make the linter read elsewhere nor make it slow or huge. Version
folders are read as Triton 2.51 reads them (``model_lifecycle.cc`` VersionsToLoad): ``std::stoll``
of the folder name, so ``0`` is a version, ``01`` is ignored, and ``1abc`` is read as version 1.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from ..config import CONFIG_FILE, ConfigParseError, parse_config
from .findings import listing
from .model_info import Add, ModelInfo

CONFIG_LIMIT = 1 << 20  # bytes of config.pbtxt read at most
SOURCE_LIMIT = 8 << 20  # bytes of model.py read at most
#: sub-folders Triton never takes for versions (kWarmupDataFolder, kInitialStateFolder, kModelConfigFolder)
NOT_VERSIONS = frozenset({"warmup", "initial_state", "configs"})
_INT64 = 2**63
_STOLL = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")

#: the file each backend loads by default, in the order Triton infers a backend from a version folder
DEFAULT_FILES = {
    "tensorflow_savedmodel": "model.savedmodel",
    "tensorflow_graphdef": "model.graphdef",
    "tensorrt": "model.plan",
    "onnxruntime": "model.onnx",
    "openvino": "model.xml",
    "pytorch": "model.pt",
    "python": "model.py",
}


class Refused(Exception):
    """A file the linter will not read: ``rule`` and a one-line reason (no content of the file)."""

    def __init__(self, rule: str, reason: str) -> None:
        super().__init__(reason)
        self.rule, self.reason = rule, reason


def is_symlink(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def read_capped(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, opened without following a symlink, at most ``limit``.

    Raises:
        Refused: a symlink (``file-symlink``), not a regular file (``config-not-a-file``), over
            ``limit`` bytes (``file-too-large``) or unreadable (``file-unreadable``).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused("file-symlink", "is a symlink; the linter does not read through symlinks: "
                          "put the file itself there") from None
        raise Refused("file-unreadable", f"cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused("config-not-a-file", "is not a regular file (a folder, a pipe or a device); "
                          "Triton cannot read it as a file either")
        if info.st_size > limit:
            raise Refused("file-too-large", f"is {info.st_size} bytes, over the {limit}-byte limit the linter reads; "
                          "no real config or model.py is that large: check what wrote it")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise Refused("file-unreadable", f"cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise Refused("file-too-large", f"holds over {limit} bytes, the limit the linter reads")
    return data


def read_config(info: ModelInfo, add: Add) -> bool:
    """Read and parse ``info``'s config.pbtxt into ``info.config``.

    Returns:
        False when there is no config.pbtxt at all (Triton may infer one); True otherwise, with
        ``info.config`` None when the file was refused or does not parse (a finding says why).
    """
    path = info.path / CONFIG_FILE
    if not os.path.lexists(path):
        return False
    try:
        text = read_capped(path, CONFIG_LIMIT).decode("utf-8")
        info.config = parse_config(text)
    except Refused as refused:
        add(refused.rule, info.name, info.config_file, f"config.pbtxt {refused.reason}")
    except UnicodeDecodeError as exc:
        add("config-parse", info.name, info.config_file,
            f"config.pbtxt is not UTF-8 text (byte {exc.start}); Triton reads it as protobuf text: rewrite it as UTF-8")
    except ConfigParseError as exc:
        add("config-parse", info.name, info.config_file, f"not a valid ModelConfig: {exc}; fix the text at that place")
    return True


def inferred_backend(folder: Path) -> str | None:
    """The backend Triton infers from the files of the model's first sub-folder (by name), as it does."""
    try:
        subdirs = sorted(p.name for p in folder.iterdir() if p.is_dir())
        present = {p.name: p for p in (folder / subdirs[0]).iterdir()} if subdirs else {}
    except OSError:
        return None
    for backend, filename in DEFAULT_FILES.items():
        found = present.get(filename)
        if found is None:
            continue
        if backend == "tensorflow_savedmodel" and not found.is_dir():
            continue
        if backend in ("tensorflow_graphdef", "tensorrt", "pytorch") and found.is_dir():
            continue
        return "tensorflow" if backend.startswith("tensorflow") else backend
    return None


def scan_versions(info: ModelInfo, add: Add) -> None:
    """Find the versions Triton sees and those its version policy serves (``info.versions``, ``info.served``)."""
    config, name = info.config, info.name
    assert config is not None
    found: dict[int, str] = {}  # version -> folder name Triton took it from
    try:
        children = sorted(info.path.iterdir())
    except OSError as exc:
        add("file-unreadable", name, f"{name}/", f"the model folder cannot be listed ({exc.strerror})")
        return
    for child in children:
        if child.name.startswith(".") or child.name in NOT_VERSIONS or not child.is_dir():
            continue
        version = _version_of(info, child.name, add)
        if version is not None and (version not in found or child.name == str(version)):
            found[version] = child.name
    info.versions = sorted(found)
    info.folders = {v: info.path / folder for v, folder in found.items() if folder == str(v)}
    if not found:
        add("version-none", name, f"{name}/",
            "no numeric version folder, so Triton has nothing to load; put the model files in "
            f"{name}/1/ (an ensemble needs the folder too, even empty)")
        return
    _served(info, add)
    for version in info.served:
        folder = found[version]
        if folder != str(version):
            add("version-misread", name, f"{name}/{folder}",
                f"Triton reads folder {folder!r} as version {version} (it parses the leading number) and then loads "
                f"{name}/{version}/, which does not exist: that load never completes; rename the folder to {version}")
        elif is_symlink(info.folders[version]):
            add("file-symlink", name, f"{name}/{folder}",
                "the version folder is a symlink; the linter does not read through symlinks: put the folder itself there")
            del info.folders[version]


def _version_of(info: ModelInfo, folder: str, add: Add) -> int | None:
    """The version Triton takes ``folder`` for, or None when it ignores it (with a warning)."""
    where = f"{info.name}/{folder}"
    if len(folder) > 1 and folder.startswith("0"):
        add("version-leading-zero", info.name, where,
            f"version folder {folder!r} starts with 0, so Triton ignores it; rename it to "
            f"{int(folder) if folder.isdigit() else 'a number without leading zeros'} if it is meant to be served")
        return None
    match = _STOLL.match(folder)
    if match is None:
        add("version-not-numeric", info.name, where,
            f"folder {folder!r} is not a version number, so Triton ignores it; rename it to a number (1, 2, ...) "
            "or move it out of the model folder")
        return None
    version = int(match.group(1))
    if not -_INT64 <= version < _INT64:
        add("version-misread", info.name, where,
            f"folder {folder!r} is a number beyond the 64-bit range Triton reads versions in; rename it to a small number")
        return None
    if folder != str(version) and (info.path / str(version)).is_dir():
        add("version-not-numeric", info.name, where,
            f"Triton reads folder {folder!r} as version {version}, which {version}/ already is, so this folder is never "
            "loaded; remove it or move it out of the model folder")
        return None
    return version


def _served(info: ModelInfo, add: Add) -> None:
    config, name = info.config, info.name
    assert config is not None
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    present = f"present: {listing(info.versions)}"
    if choice == "specific":
        wanted = list(dict.fromkeys(policy.specific.versions))
        missing = [v for v in wanted if v not in info.versions]
        info.served = sorted(v for v in wanted if v in info.versions)
        if missing and not info.served:
            add("version-policy-none", name, info.config_file,
                f"version_policy names versions {listing(missing)} and none of them has a folder ({present}), so Triton "
                "has nothing to load (\"at least one version must be available\"); fix the policy or add the folders")
        elif missing:
            add("version-policy-missing", name, info.config_file,
                f"version_policy names versions {listing(missing)} that have no folder; Triton loads only "
                f"{listing(info.served)}: add the folders or fix the policy")
        return
    if choice == "all":
        info.served = list(info.versions)
    elif choice == "latest" and policy.latest.num_versions == 0:
        add("version-policy-latest-zero", name, info.config_file,
            "version_policy { latest { } } asks for the latest 0 versions, so Triton loads none (\"at least one version "
            "must be available\"); set num_versions: 1 or more, or leave version_policy out (latest 1)")
        return
    else:
        keep = policy.latest.num_versions if choice == "latest" else 1
        info.served = info.versions[-keep:]
        if len(info.versions) > keep:
            add("version-stray", name, info.config_file,
                f"versions {listing(info.versions)} exist and the latest policy serves {listing(info.served)}; if that "
                "is not meant, pin one with version_policy { specific { versions: [...] } } or remove the others")


def check_model_files(info: ModelInfo, add: Add) -> None:
    """Each served version folder holds the file its backend loads."""
    config, name = info.config, info.name
    assert config is not None
    if not info.kind or info.kind == "ensemble":
        return
    expected = config.default_model_filename or DEFAULT_FILES.get(
        config.platform if config.platform.startswith("tensorflow") else info.kind
    )
    for version in info.served:
        folder = info.folders.get(version)
        if folder is None:
            continue  # misread or a symlink: said above
        try:
            present = sorted(p.name for p in folder.iterdir())
        except OSError as exc:
            add("file-unreadable", name, f"{name}/{version}/", f"the version folder cannot be listed ({exc.strerror})")
            continue
        if not present:
            add("version-empty", name, f"{name}/{version}/",
                f"version folder {version} is empty; put {expected or 'the model files'} in it or remove it")
        elif expected and expected not in present:
            add("model-file-missing", name, f"{name}/{version}/{expected}",
                f"{info.kind} loads {expected!r} but version {version} holds {listing(present)}; add the file, "
                "set default_model_filename, or fix the platform/backend")


def check_labels(info: ModelInfo, add: Add) -> None:
    """Every output's label_filename is a file in the model folder (Triton reads it at load)."""
    assert info.config is not None
    for output in info.config.output:
        label = output.label_filename
        if label and not (info.path / label).is_file():
            add("label-file-missing", info.name, f"{info.name}/{label}",
                f"output {output.name!r} has label_filename {label!r}, which is not a file in {info.name}/; Triton "
                "fails to load the model (\"failed to open text file for read\"): add the file or remove label_filename")
