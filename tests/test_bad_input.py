"""Hostile input to every command: refused on one line naming the value, before anything moves.

One table of bad inputs across ``release``, ``report``, ``lint``, ``rollback``/``store`` and the
command line itself (the store's own URI and argument table is ``tests/store/test_store_bad_input.py``).
Every case runs the real CLI in this process (``model_release.cli.main``) against a real local
store holding two releases, and asserts: the exit code, exactly one line on stderr naming the bad
value (escaped when it holds control characters), nothing on stdout, no traceback, the store
unchanged, and nothing written anywhere (the workspace, the test's folder, the current folder).
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from model_release.cli import main
from model_release.store import open_store, promote

from .store.support import make_release

ESC = "\x1b"


def _base(store: str, **extra: str) -> str:
    """The table's valid spec (plus extra top-level YAML lines); every case breaks one thing in it."""
    text = (f"name: iris\nmodel:\n  name: iris-classifier\n  alias: candidate\n"
            f"promote:\n  store: '{store}'\n  channel: production\n")
    return text + "".join(f"{k}: {v}\n" for k, v in extra.items())


def _model(line: str) -> str:
    return f"name: iris\nmodel: {line}\npromote: {{store: '<STORE>'}}\n"


def _npz(path: Path, **arrays: np.ndarray) -> None:
    np.savez(path, **arrays)


def _truncated_npz(path: Path) -> None:
    """An .npz whose array header says 150 x 4 float32 but whose data stops after 10 rows."""
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.zeros((150, 4), np.float32))
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("input.npy", buf.getvalue()[: -140 * 16])


def _garbage_npy(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("input.npy", b"\x93NUMPY\x01\x00garbage header that is not a dict")


def _object_npz(path: Path) -> None:
    np.savez(path, input=np.array([{"a": 1}] * 3, dtype=object))


def _sparse(path: Path, size: int) -> None:
    path.touch()
    os.truncate(path, size)


def _bomb() -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


@dataclass
class Case:
    """One bad input: the words after ``model-release``, and what the one line must hold.

    ``argv`` and file contents may use ``<TMP>`` (the case's folder), ``<STORE>`` (the store URI),
    ``<WS>`` (the workspace root) and ``<TRACKING>`` (a valid tracking URI). ``files`` maps a name
    under ``<TMP>`` to text, bytes, or a function writing it. ``release`` cases get
    ``--workspace <WS>`` unless they give one.
    """

    id: str
    argv: list[str]
    expect: str
    files: dict[str, Any] = field(default_factory=dict)
    code: int = 2
    env: dict[str, str | None] = field(default_factory=dict)


def spec_case(id: str, spec: str | bytes | Callable[[Path], None], expect: str, *extra: str, **files: Any) -> Case:
    return Case(id, ["release", "<TMP>/spec.yaml", *extra], expect, files={"spec.yaml": spec, **files})


def cli_case(id: str, extra: list[str], expect: str, **kw: Any) -> Case:
    return Case(id, ["release", "<TMP>/spec.yaml", *extra], expect, files={"spec.yaml": _base("<STORE>"), **kw.pop("files", {})}, **kw)


def golden_case(id: str, name: str, writer: Any, expect: str) -> Case:
    spec = _base("<STORE>", golden=f"{{source: file, path: {name}}}")
    return spec_case(id, spec, expect, **{name: writer})


GOLDEN_OK = np.zeros((150, 4), np.float32)

CASES: list[Case] = [
    # -- the spec file itself ------------------------------------------------------------------
    Case("spec-missing", ["release", "<TMP>/nope.yaml"], "nope.yaml' does not exist"),
    Case("spec-directory", ["release", "<TMP>/adir"], "adir' is not a file", files={"adir/x": "x"}),
    spec_case("spec-not-utf8", b"name: \xff\xfe iris\n", "is not UTF-8 text (byte 0xff at offset 6)"),
    spec_case("spec-binary", b"\x7fELF\x02\x01\x01\x00\x00\x00", "is a binary file (it holds NUL bytes)"),
    spec_case("spec-empty", "", "must be a YAML mapping at the top level, got NoneType"),
    spec_case("spec-list", "- name\n- iris\n", "must be a YAML mapping at the top level, got list"),
    spec_case("spec-scalar", "just some words\n", "must be a YAML mapping at the top level, got str"),
    spec_case("spec-bad-yaml", "name: [unclosed\nmodel: x\n", "is not valid YAML"),
    spec_case("spec-tab-indent", "name: iris\nmodel:\n\tname: m\n", "is not valid YAML"),
    spec_case("spec-too-large", "name: iris\n" + "# padding\n" * 120_000, "is larger than 1024 KiB"),
    spec_case("spec-unknown-field", _base("<STORE>", promte="{channel: production}"), "unknown field 'promte'"),
    # -- YAML that reads as something else, or never finishes ----------------------------------------
    spec_case("dup-top-level", _base("<STORE>") + "name: other\n", "key 'name' is given twice in one mapping"),
    spec_case("dup-channel", "name: iris\nmodel: {name: m, alias: a}\npromote:\n  store: '<STORE>'\n"
              "  channel: staging\n  channel: production\n", "key 'channel' is given twice in one mapping (line 5 and 6)"),
    spec_case("dup-flow-mapping", _model("{name: m, alias: a, alias: b}"), "key 'alias' is given twice in one mapping (line 2)"),
    spec_case("deep-flow", "name: iris\nx: " + "[" * 5000 + "]" * 5000 + "\n", "nests deeper than 32 levels"),
    spec_case("deep-block", "name: iris\n" + "".join("  " * i + f"k{i}:\n" for i in range(40)) + "  " * 40 + "v: 1\n",
              "nests deeper than 32 levels"),
    spec_case("alias-bomb", _base("<STORE>") + _bomb() + "repository: {labels: *a8}\n", "aliases expand to more than 200000"),
    spec_case("alias-recursive", _base("<STORE>") + "loop: &l [*l]\n", "an alias refers to a mapping or list that contains it"),
    spec_case("alias-deep-chain", _base("<STORE>") + "".join(
        f"c{i}: &c{i} " + "[" * 8 + (f"*c{i - 1}" if i else "x") + "]" * 8 + "\n" for i in range(6)),
        "aliases expand to nesting deeper than 32 levels"),
    spec_case("flood-echo", _base("<STORE>").replace("name: iris\n", "name: " + "x" * 100_000 + "\n", 1),
              "name 'xxxxxxxx"),
    # -- values that were silently misread -----------------------------------------------------------
    spec_case("version-true", _model("{name: m, version: true}"), "model.version: true is a boolean, not a number"),
    spec_case("version-word", _model("{name: m, version: three}"), "model.version: Input should be a valid integer"),
    spec_case("version-float", _model("{name: m, version: 1.5}"), "(got 1.5)"),
    spec_case("version-zero", _model("{name: m, version: 0}"), "greater than or equal to 1 (got 0)"),
    spec_case("version-negative", _model("{name: m, version: -3}"), "(got -3)"),
    spec_case("version-huge", _model("{name: m, version: 99999999999999999999}"), "less than or equal to 2147483647"),
    spec_case("name-traversal", _model("{name: ../../x, alias: a}"), "'../../x' is not a registered model name"),
    spec_case("name-slash", _model("{name: team/model, alias: a}"), "'team/model' is not a registered model name"),
    spec_case("name-empty", _model("{name: '', alias: a}"), "'' is not a registered model name"),
    spec_case("name-colon", _model("{name: 'a:b', alias: a}"), "'a:b' is not a registered model name"),
    spec_case("name-control", _model('{name: "m\\n\\e[31mEVIL", alias: a}'), "'m\\n\\x1b[31mEVIL' is not a registered"),
    spec_case("name-bidi", _model('{name: "m\\u202eLIVE", alias: a}'), "'m\\u202eLIVE'"),
    spec_case("alias-invalid", _model("{name: m, alias: 'bad alias!'}"), "model.alias: 'bad alias!' is not a valid MLflow alias"),
    spec_case("alias-empty", _model("{name: m, alias: ''}"), "model.alias: '' is not a valid MLflow alias"),
    spec_case("alias-and-version", _model("{name: m, alias: a, version: 2}"), "exactly one of model.alias"),
    spec_case("model-missing", "name: iris\n", "model: Field required"),
    spec_case("tolerance-number", _base("<STORE>", export="{tolerances: {probabilities: 5}}"),
              "export.tolerances.probabilities: must be a mapping such as {atol: 1.0e-5, rtol: 1.0e-4} (got 5)"),
    spec_case("tolerance-default-number", _base("<STORE>", canary="{tolerances: {default: 0.1}}"),
              "canary.tolerances.default: must be a mapping"),
    spec_case("tolerance-list", _base("<STORE>", export="{tolerances: [1, 2]}"), "export.tolerances: must be a mapping of its fields (got [1, 2])"),
    spec_case("tolerance-bool", _base("<STORE>", export="{tolerances: {probabilities: {atol: true}}}"),
              "export.tolerances.probabilities.atol: true is a boolean"),
    spec_case("tolerance-inf", _base("<STORE>", export="{tolerances: {probabilities: {atol: .inf}}}"),
              "export.tolerances.probabilities.atol: Input should be a finite number (got inf)"),
    spec_case("tolerance-nan", _base("<STORE>", tensorrt="{tolerances: {default: {rtol: .nan}}}"),
              "tensorrt.tolerances.default.rtol: Input should be a finite number (got nan)"),
    spec_case("tolerance-negative", _base("<STORE>", export="{tolerances: {default: {atol: -1}}}"), "(got -1)"),
    spec_case("tolerance-typo-field", _base("<STORE>", export="{tolerances: {probabilities: {atoll: 1}}}"),
              "unknown field 'export.tolerances.probabilities.atoll'"),
    spec_case("rows-bool", _base("<STORE>", golden="{rows: true}"), "golden.rows: true is a boolean"),
    spec_case("max-batch-bool", _base("<STORE>", repository="{max_batch_size: false}"), "repository.max_batch_size: false is a boolean"),
    spec_case("concurrency-float", _base("<STORE>", canary="{concurrency: 1.5}"), "canary.concurrency"),
    spec_case("p99-inf", _base("<STORE>", canary="{p99_ms: .inf}"), "canary.p99_ms: Input should be a finite number"),
    spec_case("quality-nan", _base("<STORE>", canary="{quality: {accuracy: {threshold: .nan}}}"), "canary.quality.accuracy.threshold"),
    spec_case("quality-unknown-metric", _base("<STORE>", canary="{quality: {acuracy: {threshold: 0.9}}}"),
              "canary.quality.acuracy is not a metric"),
    spec_case("shape-unknown", _base("<STORE>", repository="{shape: tree}"), "repository.shape: Input should be"),
    spec_case("name-digit", _base("<STORE>").replace("name: iris", "name: 9lives", 1), "name '9lives' must start with a letter"),
    spec_case("promote-alias", "name: iris\nmodel: {name: m, alias: a}\npromote: {store: '<STORE>', mlflow_alias: 'bad alias!'}\n",
              "promote.mlflow_alias 'bad alias!' is not a valid MLflow alias"),
    spec_case("promote-channel", "name: iris\nmodel: {name: m, alias: a}\npromote: {store: '<STORE>', channel: ../x}\n",
              "promote.channel '../x' must be letters"),
    spec_case("promote-store-fragment", _base("<STORE>#staging"), "has a fragment '#staging'"),
    spec_case("promote-store-scheme", _base("ftp://host/store"), "promote.store 'ftp://host/store' is not a store URI"),
    # -- golden files: refused before the model is even fetched ---------------------------------------
    golden_case("golden-ext", "g.csv", "a,b\n", "golden.path 'g.csv' must end in .npz or .parquet"),
    golden_case("golden-missing", "missing.npz", None, "missing.npz' does not exist"),
    golden_case("golden-directory", "gdir.npz", lambda p: p.mkdir(), "gdir.npz' is not a file"),
    golden_case("golden-not-zip", "g.npz", "not a zip file\n", "g.npz' is not a readable .npz file"),
    golden_case("golden-no-arrays", "g.npz", lambda p: zipfile.ZipFile(p, "w").close(), "g.npz' holds no arrays"),
    golden_case("golden-npy-truncated", "g.npz", _truncated_npz, 'array "input" has a header saying [150, 4] of float32'),
    golden_case("golden-npy-garbage", "g.npz", _garbage_npy, 'array "input" is not a readable .npy array'),
    golden_case("golden-rows-differ", "g.npz", lambda p: _npz(p, a=GOLDEN_OK, b=GOLDEN_OK[:10]),
                "its arrays have different row counts {'a': 150, 'b': 10}"),
    golden_case("golden-object-array", "g.npz", _object_npz, 'array "input" is an object array'),
    golden_case("golden-scalar", "g.npz", lambda p: _npz(p, input=np.float32(1)), 'array "input" is a scalar'),
    golden_case("golden-parquet-garbage", "g.parquet", "PAR1 not really\n", "g.parquet' is not a readable parquet file"),
    # -- the command line of `release` ------------------------------------------------------------------
    cli_case("cli-version-zero", ["--version", "0"], "greater than or equal to 1 (got 0)"),
    cli_case("cli-version-negative", ["--version", "-1"], "(got -1)"),
    cli_case("cli-version-huge", ["--version", "99999999999999999999"], "less than or equal to 2147483647 (got 99999999999999999999)"),
    cli_case("cli-version-word", ["--version", "abc"], "argument --version: invalid int value: 'abc'"),
    cli_case("cli-version-float", ["--version", "1.5"], "invalid int value: '1.5'"),
    cli_case("cli-alias-empty", ["--alias", ""], "model.alias: '' is not a valid MLflow alias"),
    cli_case("cli-alias-invalid", ["--alias", "bad alias!"], "'bad alias!' is not a valid MLflow alias"),
    cli_case("cli-alias-and-version", ["--alias", "a", "--version", "1"], "not allowed with argument"),
    cli_case("cli-release-id-traversal", ["--release", "../x"], "release id '../x' is not valid"),
    cli_case("cli-release-id-empty", ["--release", ""], "release id '' is not valid"),
    cli_case("cli-release-id-slash", ["--release", "a/b"], "release id 'a/b' is not valid"),
    cli_case("cli-release-id-reused", ["--release", "iris-old"], "release id 'iris-old' is taken: its workspace",
             files={"ws/iris-old/intake/intake.json": "{}", "ws/iris-old/canary/report.json": "{}"}),
    cli_case("cli-release-id-in-store", ["--release", "r1"], "release id 'r1' is taken: the store"),
    cli_case("cli-workspace-dev-null", ["--workspace", "/dev/null/x"], "workspace root '/dev/null/x' cannot be a folder"),
    cli_case("cli-workspace-file", ["--workspace", "<TMP>/afile/ws"], "afile exists and is not a folder", files={"afile": "x"}),
    cli_case("cli-workspace-empty", ["--workspace", ""], "workspace root '' is not a folder name"),
    cli_case("cli-tracking-bogus", ["--tracking-uri", "bogus://x"], "MLflow tracking URI 'bogus://x' has scheme 'bogus'"),
    cli_case("cli-tracking-empty", ["--tracking-uri", ""], "MLflow tracking URI '' is empty"),
    cli_case("cli-tracking-missing-db", ["--tracking-uri", "sqlite:///<TMP>/nope.db"], "nope.db' does not exist"),
    cli_case("cli-tracking-no-host", ["--tracking-uri", "http://"], "'http://' names no host"),
    cli_case("cli-tracking-bad-port", ["--tracking-uri", "http://mlflow:99999"], "'http://mlflow:99999' has an invalid port"),
    cli_case("cli-tracking-control", ["--tracking-uri", "http://mlflow\x1b[2J"], "'http://mlflow\\x1b[2J' holds a control"),
    cli_case("cli-tracking-missing-folder", ["--tracking-uri", "<TMP>/no-such-folder"], "is neither a URI nor an existing folder"),
    cli_case("cli-tracking-unset", [], "no MLflow tracking URI: give one with --tracking-uri",
             env={"MLFLOW_TRACKING_URI": None, "AIRFLOW_HOME": None, "AIRFLOW_CONN_MLFLOW_DEFAULT": None}),
    cli_case("env-tracking-bogus", [], "MLflow tracking URI 'bogus://env' has scheme", env={"MLFLOW_TRACKING_URI": "bogus://env"}),
    cli_case("cli-triton-no-port", ["--triton", "nohost"], "argument --triton: 'nohost' is not HOST:PORT"),
    cli_case("cli-triton-port-range", ["--triton", "host:70000"], "'host:70000' is not HOST:PORT"),
    cli_case("cli-mlflow-timeout-zero", ["--mlflow-timeout", "0"], "--mlflow-timeout '0' is not valid; give whole seconds"),
    cli_case("cli-mlflow-timeout-nan", ["--mlflow-timeout", "nan"], "--mlflow-timeout 'nan' is not valid"),
    cli_case("cli-mlflow-retries-many", ["--mlflow-retries", "11"], "--mlflow-retries '11' is not valid; give whole retries from 0 to 10"),
    cli_case("env-mlflow-timeout-word", [], "environment variable MLFLOW_HTTP_REQUEST_TIMEOUT 'abc' is not valid",
             env={"MLFLOW_HTTP_REQUEST_TIMEOUT": "abc"}),
    cli_case("env-log-level", [], "MODEL_RELEASE_LOG_LEVEL='LOUD' is not a log level", env={"MODEL_RELEASE_LOG_LEVEL": "LOUD"}),
    cli_case("cli-unknown-option", ["--promote"], "unrecognized arguments: --promote"),
    Case("cli-no-spec", ["release"], "the following arguments are required: spec"),
    # -- report ------------------------------------------------------------------------------------------
    Case("report-missing", ["report", "<TMP>/missing.json"], "missing.json' does not exist"),
    Case("report-folder-without-report", ["report", "<TMP>/canary"], "report.json' does not exist", files={"canary/x": "x"}),
    Case("report-text", ["report", "<TMP>/r.json"], "r.json' is not JSON (Expecting value", files={"r.json": "passed\n"}),
    Case("report-binary", ["report", "<TMP>/r.json"], "r.json' is not UTF-8 text (byte 0x89", files={"r.json": b"\x89PNG\r\n\x1a\n\x00"}),
    Case("report-list", ["report", "<TMP>/r.json"], "holds a JSON list, not a canary report", files={"r.json": "[1, 2]"}),
    Case("report-number", ["report", "<TMP>/r.json"], "holds a JSON int, not a canary report", files={"r.json": "3"}),
    Case("report-empty", ["report", "<TMP>/r.json"], "r.json' is not JSON", files={"r.json": ""}),
    Case("report-not-a-report", ["report", "<TMP>/r.json"], "has neither a 'passed' flag nor a 'verdict'", files={"r.json": '{"a": 1}'}),
    Case("report-deep", ["report", "<TMP>/r.json"], "nests deeper than 64 levels", files={"r.json": "[" * 100_000 + "]" * 100_000}),
    Case("report-huge", ["report", "<TMP>/r.json"], "is larger than 64 MiB",
         files={"r.json": lambda p: _sparse(p, 65 << 20)}),
    Case("report-control-name", ["report", "<TMP>/r\x1b[31m.json"], "r\\x1b[31m.json' does not exist"),
    Case("report-no-args", ["report"], "the following arguments are required: report"),
    Case("report-two-args", ["report", "<TMP>/a.json", "<TMP>/b.json"], "unrecognized arguments"),
    # -- lint (the command line; the linter's own hostile inputs are tested with the linter) -----------
    Case("lint-missing", ["lint", "<TMP>/no-repo"], "repository path '<TMP>/no-repo' does not exist"),
    Case("lint-file", ["lint", "<TMP>/config.pbtxt"], "config.pbtxt' is not a folder", files={"config.pbtxt": "name: 'x'"}),
    Case("lint-empty-path", ["lint", ""], "repository path '' is not a folder"),
    Case("lint-control-path", ["lint", "<TMP>/m\n\x1b[31mEVIL"], "m\\n\\x1b[31mEVIL' does not exist"),
    Case("lint-no-args", ["lint"], "give the repository's PATH (or --explain RULE, or --rules)"),
    Case("lint-unknown-option", ["lint", "--fix", "<TMP>"], "unrecognized arguments: --fix"),
    # -- rollback and the store: checked before the pointer moves ---------------------------------------
    Case("rollback-tracking-bogus", ["rollback", "--store", "<STORE>", "--release", "r1", "--tracking-uri", "bogus://x"],
         "MLflow tracking URI 'bogus://x' has scheme 'bogus'"),
    Case("rollback-tracking-missing-db", ["rollback", "--store", "<STORE>", "--tracking-uri", "sqlite:///<TMP>/gone.db"],
         "gone.db' does not exist"),
    Case("rollback-alias-invalid", ["rollback", "--store", "<STORE>", "--tracking-uri", "<TRACKING>", "--mlflow-alias", "bad alias!"],
         "--mlflow-alias 'bad alias!' is not a valid MLflow alias"),
    Case("rollback-to-control", ["rollback", "--store", "<STORE>", "--release", "r1\x1b[31m"], "release id 'r1\\x1b[31m' is not valid"),
    Case("store-channel-control", ["store", "history", "--store", "<STORE>", "--channel", "p\x1b[2J"], "channel 'p\\x1b[2J' is not valid"),
    Case("store-uri-control", ["store", "releases", "--store", "file:///tmp/s\x1b[2J"], "it contains a control character"),
    Case("store-choice-control", ["store", "hist\x1bory"], "invalid choice: 'hist\\x1bory'"),
    # -- the command line itself -------------------------------------------------------------------------
    Case("unknown-command", ["relase"], "unknown command 'relase'; valid: release, lint"),
    Case("unknown-command-control", ["rel\x1b]0;pwned\x07ease"], "unknown command 'rel\\x1b]0;pwned\\x07ease'"),
    Case("no-command", [], "no command given; valid: release"),
]


def _tree(root: Path) -> dict[str, str]:
    """Every path under ``root`` with a digest of its content (folders as 'dir')."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink() or not p.is_file():
            out[rel] = "dir" if p.is_dir() else "other"
        elif p.stat().st_size > 1 << 20:
            out[rel] = f"size {p.stat().st_size}"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A local store with two releases on ``production``, and an (empty) MLflow database file."""
    root = tmp_path_factory.mktemp("bad-input-world")
    store_uri = (root / "store").as_uri()
    store = open_store(store_uri)
    for rid in ("r1", "r2"):
        promote(make_release(root / "src" / rid, small=1, seed=rid), rid, store, "production")
    (root / "mlflow.db").write_bytes(b"")
    return {"root": root, "store": store_uri, "store_dir": root / "store", "tracking": f"sqlite:///{root / 'mlflow.db'}"}


def _fill(text: str, tmp: Path, ws: Path, world: dict[str, Any]) -> str:
    return (text.replace("<TMP>", str(tmp)).replace("<STORE>", world["store"]).replace("<WS>", str(ws))
            .replace("<TRACKING>", world["tracking"]))


def _write(tmp: Path, name: str, content: Any, fill: Callable[[str], str]) -> None:
    if content is None:
        return
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if callable(content):
        content(path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(fill(content))


def test_the_table_is_large_and_names_unique() -> None:
    assert len(CASES) >= 80
    assert len({c.id for c in CASES}) == len(CASES)
    commands = {c.argv[0] for c in CASES if c.argv}
    assert {"release", "report", "lint", "rollback", "store"} <= commands


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_exit_2_and_moves_nothing(case: Case, world, tmp_path, monkeypatch, capsys) -> None:
    ws = tmp_path / "ws"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", world["tracking"])
    monkeypatch.delenv("MODEL_RELEASE_STORE", raising=False)
    monkeypatch.delenv("MODEL_RELEASE_WORKSPACE", raising=False)
    monkeypatch.delenv("MODEL_RELEASE_DEBUG", raising=False)
    for key, value in case.env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)

    def fill(text: str) -> str:
        return _fill(text, tmp_path, ws, world)

    for name, content in case.files.items():
        _write(tmp_path, name, content, fill)
    argv = [fill(a) for a in case.argv]
    if argv[:1] == ["release"] and "--workspace" not in argv:
        argv += ["--workspace", str(ws)]
    store_before, around_before = _tree(world["store_dir"]), _tree(tmp_path)
    capsys.readouterr()

    code = main(argv)

    out = capsys.readouterr()
    assert code == case.code, out.err
    assert out.out == "", out.out
    assert out.err.count("\n") == 1 and out.err.endswith("\n"), out.err
    line = out.err.rstrip("\n")
    assert line.startswith("model-release"), line
    assert fill(case.expect) in line, line
    assert "Traceback" not in line
    assert ESC not in line and "\x07" not in line and "\u202e" not in line
    assert len(line) < 5000
    assert _tree(world["store_dir"]) == store_before, "the store changed"
    assert _tree(tmp_path) == around_before, "something was written"
    assert (world["root"] / "mlflow.db").stat().st_size == 0, "MLflow was reached"


def test_a_flood_is_cut_and_a_secret_is_never_echoed(world, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", world["tracking"])
    spec = tmp_path / "spec.yaml"
    spec.write_text(_base(world["store"]).replace("name: iris\n", "name: " + "x" * 100_000 + "\n", 1)
                    + "repository: {labels: [" + ", ".join(["1"] * 5000) + "], top_k: 0}\n")
    assert main(["release", str(spec), "--workspace", str(tmp_path / "ws")]) == 2
    line = capsys.readouterr().err
    assert line.count("\n") == 1 and len(line) < 5000, line
    assert "more characters" in line and "and 4992 more errors" in line, line
    spec.write_text(_base("s3://AKIAEXAMPLE:wJalrXUtn-bad-input@bucket/p"))
    assert main(["release", str(spec), "--workspace", str(tmp_path / "ws"), "--no-promote"]) == 2
    err = capsys.readouterr().err
    assert "wJalrXUtn-bad-input" not in err and "***@bucket" in err, err


def test_a_reused_release_id_leaves_the_earlier_workspace_whole(world, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", world["tracking"])
    earlier = tmp_path / "ws" / "iris-1"
    for stage in ("intake", "export", "repository", "canary", "promote"):
        (earlier / stage).mkdir(parents=True)
        (earlier / stage / f"{stage}.json").write_text(json.dumps({"stage": stage}))
    (earlier / "outcome.json").write_text('{"promoted": {"release_id": "iris-1"}}')
    before = _tree(earlier)
    spec = tmp_path / "spec.yaml"
    spec.write_text(_base(world["store"]))
    code = main(["release", str(spec), "--release", "iris-1", "--workspace", str(tmp_path / "ws")])
    err = capsys.readouterr().err
    assert code == 2 and "release id 'iris-1' is taken" in err and "intake, export, repository, canary, promote" in err, err
    assert _tree(earlier) == before


def test_debug_shows_the_traceback(world, tmp_path, monkeypatch, capsys) -> None:
    assert main(["--debug", "report", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip("\n").splitlines()[-1].startswith("model-release report: ")


def test_an_unforeseen_error_is_one_line_exit_1(monkeypatch, tmp_path, capsys) -> None:
    import model_release.cli as cli

    def boom(argv: list[str]) -> int:
        raise KeyError("m\x1b[31m")

    monkeypatch.setitem(cli.COMMANDS, "report", boom)
    assert main(["report", "x"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unexpected KeyError" in err and "--debug" in err and ESC not in err, err
