"""Roll-out cost against doing it by hand, a no-op roll-out, and rollback time, on two local Tritons.

Run:  .venv/bin/python benchmarks/bench_rollout.py [--repeats 3]

Two classifier releases (assembled and promoted with the product's own code into a local store):
release 2 changes the ONNX leaf, so a roll-out copies and loads one member and re-pins the entry
ensemble. Printed, all from this one run:

1. roll-out of release 2 over release 1, seconds per server (from the record), against doing the
   same by hand on a third server with the same starting state: copy the changed version folder,
   load the member with tritonclient (config override with both versions), load the ensemble with
   pinned steps. Ratio roll-out / by hand (the roll-out also reads state, checks readiness and
   writes its record, lock and version map);
2. a second roll-out of the same, unchanged release: what O(metadata) costs (index + config reads);
3. rollback: the pointer moved back and a roll-out, seconds per server (target under 2 s: no model
   is loaded, only the ensemble is re-pinned).

The fleet is the CPU one (python-backend Triton, ONNX leaves through the onnxruntime shim).
Medians of ``--repeats`` alternations of roll-out and rollback.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "plugins"))


def _by_hand(server, release, repo: Path, old: dict[str, int]) -> float:
    """Copy the changed folder and load it with tritonclient, as a platform team's script would."""
    import tritonclient.http as httpclient
    from google.protobuf import json_format

    from model_release.repository.config import write_config
    from model_release.serve.server_repo import entry_config, member_config

    client = httpclient.InferenceServerClient(server.url, network_timeout=300)
    t0 = time.perf_counter()
    for model in release.members():
        version = release.versions[model]
        if version == old.get(model):
            continue
        target = repo / model / str(version)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(release.models_dir / model / release.release_version(model), target)
        config = member_config(release, model, {old[model], version})
        write_config(repo / model / "config.pbtxt", config)  # loading the ensemble reloads members from their files
        client.load_model(model, config=json_format.MessageToJson(config, preserving_proto_field_name=True))
    config = entry_config(release)
    client.load_model(release.entry, config=json_format.MessageToJson(config, preserving_proto_field_name=True))
    seconds = time.perf_counter() - t0
    client.close()
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from model_release.serve.fleet import Fleet
    from model_release.serve.rollout import RolloutOptions, roll_out
    from model_release.serve.server_repo import prepare_release
    from model_release.serve.versions import assign_versions, read_versions
    from model_release.store.channels import rollback
    from model_release.store.pointer import move_channel
    from tests.serve.support import CHANNEL, build_release, local_fleet, local_store

    tmp = Path(tempfile.mkdtemp(prefix="bench-rollout-"))
    try:
        store = local_store(tmp)
        first = build_release(tmp, store, "lr", "iris-r1")
        second = build_release(tmp, store, "weak", "iris-r2", promote_it=False)
        with local_fleet(tmp, count=3) as (everyone, _servers):
            fleet = Fleet(CHANNEL, everyone.servers[:2])
            hand_server = everyone.servers[2]
            options = RolloutOptions(cache_dir=tmp / "cache")
            roll_out(store, everyone, options)  # all three on release 1
            second.promote(store)
            versions = assign_versions(store, CHANNEL, second.release_id, store.read_manifest(second.release_id)[0])
            release = prepare_release(store, second.release_id, versions, tmp / "cache", shim=True)
            old = read_versions(store, CHANNEL).release_versions(first.release_id)
            out, noop, back, hand = [], [], [], []
            calls: dict[str, list[float]] = {"noop": [], "rollback": []}
            outcomes: dict[str, list[str]] = {"rollout": [], "noop": [], "rollback": []}
            loads: dict[str, list[str]] = {"rollback": []}
            for _ in range(args.repeats):
                record = roll_out(store, fleet, options)
                out += [s.seconds for s in record.servers]
                outcomes["rollout"] += [s.outcome for s in record.servers]
                t0 = time.perf_counter()
                again = roll_out(store, fleet, options)
                calls["noop"].append(time.perf_counter() - t0)
                noop += [s.seconds for s in again.servers]
                outcomes["noop"] += [s.outcome for s in again.servers]
                hand.append(_by_hand(hand_server, release, Path(hand_server.repository), old))
                _reset_by_hand(hand_server, release, first.release_id, store)
                rollback(store, CHANNEL)
                t0 = time.perf_counter()
                rec = roll_out(store, fleet, options)
                calls["rollback"].append(time.perf_counter() - t0)
                back += [s.seconds for s in rec.servers]
                outcomes["rollback"] += [s.outcome for s in rec.servers]
                loads["rollback"] += [st.action for s in rec.servers for st in s.steps if st.action in ("copy", "load")]
                _reload_member(fleet, release, old)  # the next repeat copies and loads the member again, as the first did
                move_channel(store, CHANNEL, second.release_id)
        med = statistics.median
        print(json.dumps({
            "rollout_s_per_server": round(med(out), 3), "by_hand_s_per_server": round(med(hand), 3),
            "ratio_rollout_over_by_hand": round(med(out) / med(hand), 2),
            "noop_rollout_s_per_server": round(med(noop), 3), "rollback_s_per_server": round(med(back), 3),
            "rollback_under_2s": med(back) < 2.0,
            "noop_call_s_whole_fleet": round(med(calls["noop"]), 3),
            "rollback_call_s_whole_fleet": round(med(calls["rollback"]), 3),
            "outcomes": {k: sorted(set(v)) for k, v in outcomes.items()},
            "models_copied_or_loaded_by_rollback": loads["rollback"], "repeats": args.repeats, "samples": {"rollout": out, "noop": noop,
                                                                                        "rollback": back, "by_hand": hand},
        }, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _reset_by_hand(server, release, first_id, store) -> None:
    """Put the by-hand server back on release 1 with release 2's member unloaded and its folder gone."""
    import tritonclient.http as httpclient
    from google.protobuf import json_format

    from model_release.serve.server_repo import member_config, write_model_config
    from model_release.serve.versions import read_versions

    old = read_versions(store, "production").release_versions(first_id)
    client = httpclient.InferenceServerClient(server.url, network_timeout=300)
    pinned = {step: old[step] for step in old}
    config = release.config(release.entry)
    for step in config.ensemble_scheduling.step:
        step.model_version = pinned[step.model_name]
    client.load_model(release.entry, config=json_format.MessageToJson(config, preserving_proto_field_name=True))
    for model in release.members():
        if release.versions[model] != old[model]:
            cfg = member_config(release, model, {old[model]})
            write_model_config(Path(server.repository), model, cfg)
            client.load_model(model, config=json_format.MessageToJson(cfg, preserving_proto_field_name=True))
            shutil.rmtree(Path(server.repository) / model / str(release.versions[model]), ignore_errors=True)
    client.close()


def _reload_member(fleet, release, old) -> None:
    """Unload release 2's changed members on the fleet (policy back to release 1's), so each repeat loads them."""
    import tritonclient.http as httpclient
    from google.protobuf import json_format

    from model_release.serve.server_repo import member_config, write_model_config

    for server in fleet.servers:
        client = httpclient.InferenceServerClient(server.url, network_timeout=300)
        for model in release.members():
            if release.versions[model] != old[model]:
                cfg = member_config(release, model, {old[model]})
                write_model_config(Path(server.repository), model, cfg)
                client.load_model(model, config=json_format.MessageToJson(cfg, preserving_proto_field_name=True))
                shutil.rmtree(Path(server.repository) / model / str(release.versions[model]), ignore_errors=True)
        client.close()


if __name__ == "__main__":
    raise SystemExit(main())
