"""What Triton 2.51 does with the repository API that the roll-out's design rests on, proven here.

A member ``m`` (python, answers with its own version number) and an ensemble ``e`` over it, on a
local Triton in explicit mode. Each fact is why the agent converges as it does (see serve/converge.py and serve/control.py).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from model_release.triton.local import LocalTriton

pytestmark = pytest.mark.integration

MEMBER = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.version = float(args["model_version"])

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUT", np.full_like(pb_utils.get_input_tensor_by_name(r, "IN").as_numpy(), self.version))]) for r in requests]
'''
IO = {"input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [1]}],
      "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}]}


def member(versions: list[int]) -> dict:
    return {"name": "m", "backend": "python", "max_batch_size": 0, **IO,
            "instance_group": [{"count": 1, "kind": "KIND_CPU"}], "version_policy": {"specific": {"versions": versions}}}


def ensemble(pin: int) -> dict:
    return {"name": "e", "platform": "ensemble", "max_batch_size": 0, **IO, "ensemble_scheduling": {"step": [
        {"model_name": "m", "model_version": pin, "input_map": {"IN": "IN"}, "output_map": {"OUT": "OUT"}}]}}


def pbtxt(doc: dict) -> str:
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    return text_format.MessageToString(json_format.ParseDict(doc, model_config_pb2.ModelConfig()))


@pytest.fixture
def triton(tmp_path):
    repo = tmp_path / "models"
    for version in (1, 2):
        (repo / "m" / str(version)).mkdir(parents=True)
        (repo / "m" / str(version) / "model.py").write_text(MEMBER)
    (repo / "m" / "config.pbtxt").write_text(pbtxt(member([1])))
    (repo / "e" / "1").mkdir(parents=True)
    (repo / "e" / "config.pbtxt").write_text(pbtxt(ensemble(1)))
    with LocalTriton(repo, work_dir=tmp_path / "server", ready_timeout=120) as server:
        client = server.client(network_timeout=120)
        client.load_model("m")
        client.load_model("e")
        yield client, repo


def answer(client) -> float:  # noqa: ANN001
    import tritonclient.http as httpclient

    tensor = httpclient.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.zeros(1, np.float32))
    return float(client.infer("e", [tensor]).as_numpy("OUT")[0])


def test_a_load_without_a_config_after_an_override_keeps_the_override(triton):
    client, repo = triton
    (repo / "m" / "config.pbtxt").write_text(pbtxt(member([1, 2])))
    client.load_model("m", config=json.dumps(member([1, 2])))
    client.load_model("e", config=json.dumps(ensemble(2)))
    assert answer(client) == 2.0
    client.load_model("e")  # the file still pins version 1: it is not read again
    assert answer(client) == 2.0


def test_loading_an_ensemble_reloads_a_member_whose_file_disagrees_with_its_override(triton):
    client, repo = triton
    client.load_model("m", config=json.dumps(member([1, 2])))  # the file still says specific [1]
    assert client.is_model_ready("m", "2")
    with pytest.raises(InferenceServerException, match="required version 2 is not loaded"):
        client.load_model("e", config=json.dumps(ensemble(2)))
    # written to the file as well (what the roll-out does), the same two loads switch the ensemble
    (repo / "m" / "config.pbtxt").write_text(pbtxt(member([1, 2])))
    client.load_model("m", config=json.dumps(member([1, 2])))
    client.load_model("e", config=json.dumps(ensemble(2)))
    assert answer(client) == 2.0 and client.is_model_ready("m", "1")


@pytest.mark.parametrize(("precompiled", "member_loads"), [(False, 2), (True, 1)])
def test_a_stub_writing_bytecode_makes_the_ensemble_s_load_load_its_python_member_again(tmp_path, precompiled, member_loads):
    """Why the roll-out compiles ``model.py`` into the version folder (server_repo.compile_python_model): the
    stub's ``__pycache__`` there is a change to the model, and the stub writes it even with
    PYTHONDONTWRITEBYTECODE=1 in its environment, so that variable is no way out for a serving Triton."""
    from model_release.serve.server_repo import compile_python_model

    repo = tmp_path / "models"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "1" / "model.py").write_text(MEMBER)
    if precompiled:
        compile_python_model(repo / "m" / "1")
    (repo / "m" / "config.pbtxt").write_text(pbtxt(member([1])))
    (repo / "e" / "1").mkdir(parents=True)
    (repo / "e" / "config.pbtxt").write_text(pbtxt(ensemble(1)))
    with LocalTriton(repo, work_dir=tmp_path / "server", ready_timeout=120,
                     env={"PYTHONDONTWRITEBYTECODE": "1"}) as server:
        client = server.client(network_timeout=120)
        client.load_model("m")
        client.load_model("e")
        assert answer(client) == 1.0
        log = server.log_path.read_text(errors="replace")
    assert log.count('"loading: m:1"') == member_loads, log[-2000:]
    assert (repo / "m" / "1" / "__pycache__").is_dir()  # written by the stub, or by compile_python_model before


SLOW_SECOND = MEMBER.replace(
    '        self.version = float(args["model_version"])\n',
    '        self.version = float(args["model_version"])\n'
    '        open(args["model_repository"] + "/../inits.txt", "a").write(args["model_version"] + "\\n")\n'
    '        if self.version > 1:\n            import time\n            time.sleep(1.5)\n')


def test_a_load_over_grpc_leaves_http_traffic_and_the_serving_version_alone_and_one_over_http_holds_it(tmp_path):
    """Why the agent loads over gRPC (serve/control.py): a new version built beside the serving one never
    initializes the serving one again, either way; but Triton's HTTP frontend answers a load on the thread that
    took it and holds HTTP inference requests behind it for the whole load, while a gRPC load does not."""
    import threading
    import time

    import tritonclient.grpc as grpcclient

    repo = tmp_path / "models"
    for version in (1, 2, 3):
        (repo / "m" / str(version)).mkdir(parents=True)
        (repo / "m" / str(version) / "model.py").write_text(SLOW_SECOND)
    (repo / "m" / "config.pbtxt").write_text(pbtxt(member([1])))
    (repo / "e" / "1").mkdir(parents=True)
    (repo / "e" / "config.pbtxt").write_text(pbtxt(ensemble(1)))
    with LocalTriton(repo, work_dir=tmp_path / "server", ready_timeout=120, precompile=True) as server:
        http = server.client(network_timeout=120)
        http.load_model("m")
        http.load_model("e")
        longest: dict[str, float] = {}

        def traffic(label: str, stop: threading.Event) -> None:
            client = server.client(network_timeout=120)
            worst = 0.0
            while not stop.is_set():
                t0 = time.perf_counter()
                assert answer(client) == 1.0
                worst = max(worst, time.perf_counter() - t0)
            longest[label] = worst

        for how, versions in (("grpc", [1, 2]), ("http", [1, 2, 3])):
            stop = threading.Event()
            thread = threading.Thread(target=traffic, args=(how, stop))
            thread.start()
            time.sleep(0.3)
            (repo / "m" / "config.pbtxt").write_text(pbtxt(member(versions)))
            if how == "grpc":
                grpc = grpcclient.InferenceServerClient(server.grpc_url)
                grpc.load_model("m", config=json.dumps(member(versions)))
                grpc.close()
            else:
                http.load_model("m", config=json.dumps(member(versions)))
            stop.set()
            thread.join()
    assert (repo / "inits.txt").read_text().split() == ["1", "2", "3"]  # version 1 initialized once
    assert longest["grpc"] < 1.0 <= longest["http"], longest
