"""Reusing a proven parity result: only for exactly the same check, never past a damaged entry.

A re-release of an unchanged model reuses the ONNX file and its parity result (and says so); a
change of tolerance, golden rows or golden file checks again, and a drift the new check can see
is blocked; a tampered cache entry is never reused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from model_release.errors import ParityError
from model_release.export import cache, export, paritycache
from model_release.intake.stage import resolve
from model_release.pipeline import Services, run_export, run_intake
from model_release.types import ExportResult, IntakeResult
from model_release.workspace import Workspace, sha256_file

from .altering import THRESHOLD, AlteringConverter
from .models import Registry, make_spec

pytestmark = pytest.mark.integration

DRIFT = {"sklearn": AlteringConverter("probabilities", "drift")}  # +0.02 on rows with feature 0 > THRESHOLD
LOOSE = {"probabilities": {"atol": 0.05, "rtol": 0.05}}
TIGHT = {"probabilities": {"atol": 0.001, "rtol": 0.001}}


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


class Releases:
    """Releases of one registered model into one workspace root (one intake, many export stages)."""

    def __init__(self, registry: Registry, root: Path, model_name: str) -> None:
        self.root = root
        self.model_name = model_name
        spec = make_spec(model_name, base_dir=root)
        self.intake: IntakeResult = resolve(spec, Workspace("intake", root=root), tracking_uri=registry.uri)

    def export(self, release: str, converters: Any = None, **sections: Any) -> ExportResult:
        spec = make_spec(self.model_name, base_dir=self.root, **sections)
        return export(spec, self.intake, Workspace(release, root=self.root), converters=converters)

    def parity_json(self, release: str) -> dict[str, Any]:
        return json.loads((self.root / release / "export" / "parity.json").read_text())

    def entry(self, result: ExportResult) -> Path:
        return cache.cache_dir(self.root, cache.PARITY) / result.converter["parity_key"]


def reused(result: ExportResult) -> bool:
    return result.converter["parity"].startswith("reused from cache ")


def test_second_release_of_an_unchanged_model_reuses_the_onnx_file_and_the_parity_result(registry, breast_cancer, ws_root):
    name, model, _ = breast_cancer
    spec = make_spec(name, base_dir=ws_root)
    ws1, ws2 = Workspace("first", root=ws_root), Workspace("second", root=ws_root)
    services = Services(tracking_uri=registry.uri)
    first = run_export(spec, ws1, run_intake(spec, ws1, services))
    second = run_export(spec, ws2, run_intake(spec, ws2, services))

    assert (first.cached, second.cached) == (False, True)
    assert first.converter["parity"] == "checked on 100 golden rows"
    key = first.converter["parity_key"]
    assert second.converter["parity"] == f"reused from cache {key} (checked in release first)"
    assert second.converter["parity_key"] == key and second.onnx_sha256 == first.onnx_sha256
    parity = json.loads((ws2.stage_dir("export") / "parity.json").read_text())
    assert parity["passed"] is True and parity["reused"] == second.converter["parity"]
    assert json.loads((ws1.stage_dir("export") / "parity.json").read_text())["reused"] is None
    assert second.parity == first.parity and second.golden_rows == 100
    assert ws2.load_result("export", ExportResult) == second
    # the restored files are the golden set and the model's own outputs on it (checked against the model here)
    golden, reference = load_npz(second.golden_path), load_npz(second.reference_path)
    assert sha256_file(second.golden_path) == sha256_file(first.golden_path)
    np.testing.assert_array_equal(reference["label"], model.predict(golden["input"].astype(np.float64)))
    np.testing.assert_allclose(reference["probabilities"], model.predict_proba(golden["input"].astype(np.float64)), rtol=0, atol=0)


def test_a_fully_cached_export_imports_neither_onnxruntime_nor_the_models_framework(registry, breast_cancer, ws_root):
    name = breast_cancer[0]
    # the classifier shape: its head (probabilities, decided on the native answers) comes from the cache too
    spec = make_spec(name, base_dir=ws_root, repository={"shape": "classifier"})
    ws = Workspace("first", root=ws_root)
    intake = run_intake(spec, ws, Services(tracking_uri=registry.uri))  # saves intake.json, which the child reads
    export(spec, intake, ws)
    code = (
        "import json, sys\n"
        "from model_release.export import export\n"
        "from model_release.spec.release import spec_from_record\n"
        "from model_release.types import IntakeResult\n"
        "from model_release.workspace import Workspace\n"
        f"root = {str(ws_root)!r}\n"
        "intake = Workspace('first', root=root).load_result('intake', IntakeResult)\n"
        "spec = spec_from_record(json.load(open(root + '/first/export/spec.json')), origin='spec.json')\n"
        "result = export(spec, intake, Workspace('again', root=root))\n"
        "print(json.dumps({'cached': result.cached, 'parity': result.converter['parity'],\n"
        "                  'loaded': sorted(m for m in ('onnxruntime', 'sklearn', 'skl2onnx', 'mlflow') if m in sys.modules)}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["cached"] is True and seen["parity"].startswith("reused from cache ")
    assert seen["loaded"] == []


def test_a_tighter_tolerance_checks_again_and_blocks_the_drift_a_reused_result_would_let_through(registry, breast_cancer, ws_root):
    rel = Releases(registry, ws_root, breast_cancer[0])
    loose = rel.export("loose", DRIFT, export={"tolerances": LOOSE})
    again = rel.export("loose-again", DRIFT, export={"tolerances": LOOSE})
    assert not reused(loose) and reused(again)
    assert loose.parity["probabilities"]["max_abs"] == pytest.approx(0.02, abs=1e-6)

    with pytest.raises(ParityError, match=r'output "probabilities" differs .* max abs 0.02 > atol 0.001'):
        rel.export("tight", DRIFT, export={"tolerances": TIGHT})
    parity = rel.parity_json("tight")
    assert parity["passed"] is False and parity["reused"] is None
    # the same check under the default tolerance is not the loose one either
    with pytest.raises(ParityError):
        rel.export("default-tolerance", DRIFT)
    # a lower required label agreement is another check too (it passes, but is not the stored one)
    other = rel.export("labels", DRIFT, export={"tolerances": LOOSE, "min_label_agreement": 0.9})
    assert not reused(other) and other.converter["parity_key"] != loose.converter["parity_key"]


def golden_file(path: Path, x: np.ndarray) -> Path:
    """60 rows without drift (feature 0 <= THRESHOLD), then 20 rows with it."""
    first = x[:, 0].astype(np.float32)
    np.savez(path, input=np.concatenate([x[first <= THRESHOLD][:60], x[first > THRESHOLD][:20]]))
    return path


def test_more_golden_rows_check_again_and_catch_the_drift_in_the_new_rows(registry, breast_cancer, ws_root, tmp_path):
    rel = Releases(registry, ws_root, breast_cancer[0])
    path = golden_file(tmp_path / "golden.npz", breast_cancer[2])
    section = {"source": "file", "path": str(path)}
    clean = rel.export("rows-60", DRIFT, export={"tolerances": TIGHT}, golden={**section, "rows": 60})
    assert clean.golden_rows == 60 and reused(rel.export("rows-60-again", DRIFT, export={"tolerances": TIGHT}, golden={**section, "rows": 60}))
    other_batches = rel.export("batches", DRIFT, export={"tolerances": TIGHT}, golden={**section, "rows": 60, "batch_rows": 7})
    assert not reused(other_batches)

    with pytest.raises(ParityError, match=r'output "probabilities" differs from the sklearn model on 20 of 80 rows'):
        rel.export("rows-80", DRIFT, export={"tolerances": TIGHT}, golden={**section, "rows": 80})


def test_a_changed_golden_file_at_the_same_path_checks_again(registry, breast_cancer, ws_root, tmp_path):
    rel = Releases(registry, ws_root, breast_cancer[0])
    x = breast_cancer[2]
    path = tmp_path / "golden.npz"
    first = x[:, 0].astype(np.float32)
    np.savez(path, input=x[first <= THRESHOLD][:40])
    section = {"source": "file", "path": str(path)}
    clean = rel.export("clean", DRIFT, export={"tolerances": TIGHT}, golden=section)
    assert clean.golden_rows == 40 and not reused(clean)

    np.savez(path, input=np.concatenate([x[first <= THRESHOLD][:30], x[first > THRESHOLD][:10]]))  # same path, same rows
    with pytest.raises(ParityError, match=r'differs from the sklearn model on 10 of 40 rows'):
        rel.export("changed", DRIFT, export={"tolerances": TIGHT}, golden=section)


@pytest.mark.parametrize("damage", ["reference.npz", "golden.npz", "meta.json", "missing reference.npz"])
def test_a_tampered_parity_entry_is_not_reused(registry, breast_cancer, ws_root, damage):
    rel = Releases(registry, ws_root, breast_cancer[0])
    first = rel.export("first", DRIFT, export={"tolerances": LOOSE})
    entry = rel.entry(first)
    if damage == "missing reference.npz":
        (entry / "reference.npz").unlink()
    elif damage == "meta.json":  # a figure edited, the file's own checksum left as it was
        meta = json.loads((entry / "meta.json").read_text())
        meta["report"]["probabilities"]["max_abs"] = 0.0
        (entry / "meta.json").write_text(json.dumps(meta))
    else:
        data = load_npz(entry / damage)
        name = next(iter(data))
        data[name] = data[name].copy()
        data[name].flat[0] += 1
        np.savez(entry / damage, **data)

    second = rel.export("second", DRIFT, export={"tolerances": LOOSE})
    assert not reused(second) and second.converter["parity"] == "checked on 100 golden rows"
    assert second.parity == first.parity
    assert load_npz(second.reference_path)["probabilities"][0] == pytest.approx(load_npz(first.reference_path)["probabilities"][0])
    # the check replaced the damaged entry, so the next release reuses a sound one
    third = rel.export("third", DRIFT, export={"tolerances": LOOSE})
    assert reused(third) and "checked in release second" in third.converter["parity"]


def test_a_stored_report_is_judged_again_before_it_is_reused(registry, breast_cancer, ws_root):
    """Even an entry whose checksums hold is refused when its figures do not stand for this check."""
    rel = Releases(registry, ws_root, breast_cancer[0])
    first = rel.export("first", DRIFT, export={"tolerances": LOOSE})
    key = first.converter["parity_key"]
    meta = cache.read_meta(ws_root, cache.PARITY, key)
    assert meta is not None
    parts, outputs = meta["parts"], first.outputs
    assert paritycache.stored_report(meta, parts, outputs) is not None

    def changed(edit: Any) -> dict[str, Any]:
        copy = json.loads(json.dumps(meta))
        edit(copy)
        return copy

    failing = changed(lambda m: m["report"]["probabilities"].update(failing_elements=3))
    other_atol = changed(lambda m: m["report"]["probabilities"].update(atol=1.0))
    fewer_rows = changed(lambda m: m.update(rows=50))
    missing_output = changed(lambda m: m["report"].pop("label"))
    low_agreement = changed(lambda m: m["report"]["label"].update(agreement=0.5))
    for bad in (failing, other_atol, fewer_rows, missing_output, low_agreement):
        assert paritycache.stored_report(bad, parts, outputs) is None
    tighter = {**parts, "tolerances": {**parts["tolerances"], "probabilities": {"atol": 0.001, "rtol": 0.001}}}
    assert paritycache.stored_report(meta, tighter, outputs) is None


def test_cache_entries_verify_their_key_and_their_own_checksum(tmp_path):
    src = tmp_path / "a.bin"
    src.write_bytes(b"payload")
    shas = cache.store(tmp_path, cache.PARITY, "k1", {"a.bin": src}, {"note": "x"})
    meta = cache.read_meta(tmp_path, cache.PARITY, "k1")
    assert meta is not None and meta["files"] == shas and meta["note"] == "x"
    dest = tmp_path / "out.bin"
    assert cache.restore(tmp_path, cache.PARITY, "k1", meta, "a.bin", dest) == shas["a.bin"] and dest.read_bytes() == b"payload"

    # an entry moved under another key is not that key's entry
    (cache.cache_dir(tmp_path, cache.PARITY) / "k1").rename(cache.cache_dir(tmp_path, cache.PARITY) / "k2")
    assert cache.read_meta(tmp_path, cache.PARITY, "k2") is None
    # a damaged file is not restored and leaves the destination as it was
    entry = cache.cache_dir(tmp_path, cache.PARITY) / "k2"
    (entry / "a.bin").write_bytes(b"Payload")
    dest.write_bytes(b"before")
    assert cache.restore(tmp_path, cache.PARITY, "k2", meta, "a.bin", dest) is None and dest.read_bytes() == b"before"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".cache", "a.bin", "out.bin"]  # no temporary left behind
