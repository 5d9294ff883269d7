"""The demo's fourth release: it passes the canary, fails on production traffic, and the watch rolls it back.

The model is release 3's (the C=10 retrain) with a calibration table spliced into its ONNX graph: one
weight per whole centimetre of petal length, 0 to 7 cm (all that iris ever held), every weight 1.0.
On the golden set it answers what release 3 answers, to the last bit, so the canary passes it. But
production also sends petal lengths in millimetres (a new client); the table lookup (an ONNX
``Gather``) then indexes past the table's end and onnxruntime refuses the request: an error on every
such row, on the serving Tritons as on any onnxruntime backend.

Its spec is the demo's (:func:`write_watched_spec`): the shipped spec with the watch turned on, a
bake of a few seconds, and production-like rows as the watch's probe. A :class:`~.traffic.TrafficLoop`
plays production while it is rolled out; the checks (:func:`rollback_findings`) read what the watch
left behind: every server back on the old release, the channel pointer and the MLflow alias moved
back, the ledger's rejection, the roll-out record and the channel's Asset event.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import yaml

#: the column of iris's petal length, and the calibration table's size (whole centimetres 0..7)
PETAL_LENGTH, TABLE_CM = 2, 8
#: ``serve.watch`` of the demo's spec: seconds, not minutes; time limits widened (floor 50 ms) because
#: a shared 2-core machine moves one server's tail by tens of milliseconds; error limits the defaults
WATCH = {
    "enabled": True, "bake_s": 4, "interval_s": 1, "min_requests": 5, "failures": 2, "settle": 2, "budget_s": 30,
    "mean_request_us": {"ratio": 1.5, "floor": 50_000.0}, "mean_queue_us": {"ratio": 1.5, "floor": 50_000.0},
    "p99_us": {"ratio": 1.5, "floor": 50_000.0},
}
PROBE_FILE = "production-rows.json"


def with_petal_table(model: Any) -> Any:
    """``model`` (an ONNX classifier with a ``probabilities`` output) times a per-centimetre petal-length weight.

    The weight is ``table[floor(petal_length)]`` with ``TABLE_CM`` weights of 1.0: the outputs are
    unchanged for petal lengths below ``TABLE_CM`` cm, and onnxruntime refuses any longer one.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    x = graph.input[0].name
    for node in graph.node:  # the classifier's own probabilities become the table's input
        node.output[:] = ["uncalibrated" if o == "probabilities" else o for o in node.output]
    graph.initializer.extend([
        numpy_helper.from_array(np.ones(TABLE_CM, dtype=np.float32), "petal_cm_weight"),
        numpy_helper.from_array(np.array([PETAL_LENGTH], dtype=np.int64), "petal_from"),
        numpy_helper.from_array(np.array([PETAL_LENGTH + 1], dtype=np.int64), "petal_to"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "petal_axis"),
    ])
    graph.node.extend([
        helper.make_node("Slice", [x, "petal_from", "petal_to", "petal_axis"], ["petal_length"]),
        helper.make_node("Floor", ["petal_length"], ["petal_floor"]),
        helper.make_node("Cast", ["petal_floor"], ["petal_cm"], to=TensorProto.INT64),
        helper.make_node("Gather", ["petal_cm_weight", "petal_cm"], ["weight"], axis=0),  # [N, 1]
        helper.make_node("Mul", ["uncalibrated", "weight"], ["probabilities"]),
    ])
    onnx.checker.check_model(model)
    return model


def register_petal_table_model(tracking_uri: str, fitted: Any, x: np.ndarray, *, model_name: str,
                               alias: str = "candidate") -> str:
    """Convert ``fitted`` (a scikit-learn classifier) to ONNX, add the petal table, log and register it.

    Returns:
        The new model version.
    """
    import mlflow
    from mlflow.models import infer_signature
    from skl2onnx import to_onnx

    model = with_petal_table(to_onnx(fitted, x[:1], options={"zipmap": False}, target_opset=17))
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    mlflow.set_experiment("model-release")
    with mlflow.start_run(run_name="iris-C10-petal-table"):
        mlflow.log_params({"C": 10.0, "model": "StandardScaler+LogisticRegression, ONNX, petal-length table 0-7 cm"})
        info = mlflow.onnx.log_model(model, name="model", signature=infer_signature(x), input_example=x[:5],
                                     registered_model_name=model_name, pip_requirements=["onnx", "onnxruntime"])
    version = str(info.registered_model_version)
    mlflow.MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri).set_registered_model_alias(
        model_name, alias, version)
    return version


def golden_rows(spec_path: Path) -> tuple[str, np.ndarray]:
    """The spec's golden input: its tensor name and rows (the file's one array that is not the target)."""
    spec = yaml.safe_load(Path(spec_path).read_text())
    path = Path(spec["golden"]["path"])
    data = np.load(path if path.is_absolute() else Path(spec_path).parent / path)
    (name,) = [k for k in data.files if k != spec["golden"].get("target")]
    return name, data[name].astype(np.float32)


def production_rows(x: np.ndarray, count: int = 8) -> np.ndarray:
    """Rows production sends that the golden set never held: petal length in millimetres."""
    rows = x[:: max(1, len(x) // count)][:count].copy()
    rows[:, PETAL_LENGTH] *= 10.0
    return rows


def body(name: str, rows: np.ndarray) -> dict[str, Any]:
    """A Triton HTTP/REST request body for ``rows`` of input ``name``."""
    return {"inputs": [{"name": name, "shape": list(rows.shape), "datatype": "FP32", "data": rows.ravel().tolist()}]}


def traffic_bodies(name: str, x: np.ndarray, *, batch: int = 4, production_every: int = 10) -> list[dict[str, Any]]:
    """Production as the demo plays it: golden-like batches, and one request in ``production_every``
    a single row in millimetres."""
    golden = [body(name, x[i:i + batch]) for i in range(0, len(x) - batch + 1, batch)]
    odd = [body(name, row[None, :]) for row in production_rows(x)]
    out: list[dict[str, Any]] = []
    for i, b in enumerate(golden):
        out.append(b)
        if (i + 1) % (production_every - 1) == 0:
            out.append(odd[(i // (production_every - 1)) % len(odd)])
    return out


def write_watched_spec(base: Path, folder: Path) -> Path:
    """The demo's spec for the fourth release: ``base`` with the watch on, short, and a production probe.

    The golden path is made absolute (the spec no longer sits beside it); the probe rows are written
    beside the new spec. Returns its path.
    """
    from ..spec import load_spec

    data = yaml.safe_load(Path(base).read_text())
    golden = Path(data["golden"]["path"])
    data["golden"]["path"] = str(golden if golden.is_absolute() else (Path(base).parent / golden).resolve())
    folder.mkdir(parents=True, exist_ok=True)
    name, x = golden_rows(base)
    (folder / PROBE_FILE).write_text(json.dumps([body(name, row[None, :]) for row in production_rows(x)]))
    data.setdefault("serve", {})["watch"] = {**WATCH, "probe": {"rows": PROBE_FILE, "requests": 2, "timeout_s": 5}}
    path = folder / Path(base).name
    path.write_text(f"# the demo's fourth release: {base} with the watch on (model_release.local.watch_demo)\n"
                    + yaml.safe_dump(data, sort_keys=False))
    load_spec(path)  # refused here, not in the DAG, if the demo's own spec were wrong
    return path


def channel_events(airflow_db: Path, channel: str) -> list[dict[str, Any]]:
    """The ``extra`` of every event on the channel's Asset, oldest first, from Airflow's metadata DB."""
    with sqlite3.connect(airflow_db) as db:
        rows = db.execute("SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                          "WHERE a.name = ? ORDER BY e.id", (f"model_release_channel_{channel}",)).fetchall()
    return [json.loads(extra) if extra else {} for (extra,) in rows]


def serving_release(store: Any, server: Any, channel: str) -> str | None:
    """The release ``server`` serves now, as its agent reports it in the store."""
    from ..serve.membership import read_states

    return next((s.release for s in read_states(store, channel) if s.name == server.name), None)


def rollback_findings(store: Any, fleet: Any, *, bad: str, good: str, good_version: str,
                      model_name: str, tracking_uri: str, alias: str, airflow_db: Path) -> dict[str, Any]:
    """What the watch left behind after rolling ``bad`` back to ``good``, and every way that falls short.

    Returns:
        ``{"record": the roll-out record, "event": the channel's last Asset event, "problems": [...]}``;
        no problem means: the roll-out record of ``bad`` says rolled back, every server serves ``good``,
        the pointer names ``good`` by a rollback, the MLflow alias names ``good_version``, the ledger
        marks ``bad``'s model version rejected in production, and the channel's last Asset event says
        the watch rolled back.
    """
    import mlflow

    from ..serve.record import read_records
    from ..store import ledger

    channel, problems = fleet.channel, []
    record = next((r for r in reversed(read_records(store, channel)) if r["release_id"] == bad), None)
    if record is None or record["outcome"] != "rolled back":
        problems.append(f"the roll-out of {bad} ended {record and record['outcome']!r}, not 'rolled back' "
                        f"({record and record.get('reason')})")
    serving = {s.name: serving_release(store, s, channel) for s in fleet.servers}
    if set(serving.values()) != {good}:
        problems.append(f"the servers serve {serving}, not {good} everywhere")
    pointer = store.read_pointer(channel)
    if pointer is None or (pointer.release_id, pointer.action) != (good, "rollback"):
        problems.append(f"the channel pointer is {pointer and (pointer.release_id, pointer.action)}, not ({good!r}, 'rollback')")
    client = mlflow.MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    aliased = str(client.get_model_version_by_alias(model_name, alias).version)
    if aliased != good_version:
        problems.append(f"the MLflow alias {alias!r} names v{aliased}, not v{good_version}")
    manifest = (store.read_manifest(bad) or [{}])[0].get("model") or {}
    entry_doc = (ledger.read_entry(store, channel, manifest.get("name"), manifest.get("version")) or [{}])[0]
    if entry_doc.get("state") != ledger.REJECTED or not str(entry_doc.get("reason", "")).startswith(ledger.IN_PRODUCTION):
        problems.append(f"the ledger entry of {bad} is {entry_doc.get('state')!r} ({entry_doc.get('reason')}), "
                        "not rejected in production")
    events = channel_events(airflow_db, channel)
    event = events[-1] if events else {}
    if (event.get("action"), event.get("by"), event.get("release_id"), event.get("previous_release")) != ("rollback", "watch", good, bad):
        problems.append(f"the channel's last Asset event is {event}, not a rollback by the watch from {bad} to {good}")
    return {"record": record, "event": event, "serving": serving, "ledger": entry_doc, "problems": problems}
