"""In one process a release fetches its champion while the candidate exports (pipeline.ChampionAhead), and
opens its store once for every stage (Services.store)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from model_release.canary import champion as champion_module
from model_release.canary.champion import SERVED, Champion
from model_release.errors import ServiceUnavailable
from model_release.pipeline import ChampionAhead, Services
from model_release.workspace import Workspace


class _Spec:
    class promote:  # noqa: N801 - the attribute path the fetch reads
        store = "s3://bucket/iris"
        channel = "production"


def _fake_fetch(monkeypatch, *, result: str = "served", started: threading.Event | None = None,
                release: threading.Event | None = None) -> list[tuple[Path, object]]:
    """``fetch_served`` faked: it writes the champion's files; what it returns reads them (``champion()``), and
    records on which thread (the fetch's own must not parse the champion's code: CPython 3.11's ast is not thread-safe)."""
    calls: list[tuple[Path, object]] = []

    class Fetched:
        def champion(self, folder: Path) -> Champion:
            calls.append(("champion() on", threading.current_thread().name))
            return Champion(SERVED, "production", release_id="iris-1", repository=folder / "models", pinned=True)

    def fetch_served(spec, folder, *, store):  # noqa: ANN001, ANN202
        calls.append((folder, store))
        if started is not None:
            started.set()
        if release is not None:
            release.wait(30)
        if result == "error":
            raise ServiceUnavailable("the store at s3://bucket is not reachable")
        if result == "none":
            return None
        (folder / "models" / "iris__champion").mkdir(parents=True)
        (folder / "models" / "iris__champion" / "config.pbtxt").write_text('name: "iris__champion"\n')
        return Fetched()

    monkeypatch.setattr(champion_module, "fetch_served", fetch_served)
    return calls


def _ws(tmp_path: Path) -> Workspace:
    ws = Workspace("iris-2", tmp_path / "ws")
    ws.path.mkdir(parents=True)
    return ws


def test_the_fetch_runs_on_a_thread_and_take_moves_it_to_the_canarys_folder(tmp_path, monkeypatch) -> None:
    started, release = threading.Event(), threading.Event()
    calls = _fake_fetch(monkeypatch, started=started, release=release)
    ws = _ws(tmp_path)
    ahead = ChampionAhead(_Spec, ws, Services(open_store=lambda uri: f"store:{uri}"))
    assert started.wait(30)  # fetching while the caller goes on (the export stage)
    release.set()
    folder = ws.path / "canary" / "champion"
    found = ahead.take(folder)
    assert found.release_id == "iris-1" and found.pinned
    assert found.repository == folder / "models"
    assert (folder / "models" / "iris__champion" / "config.pbtxt").is_file()
    assert calls[0][1] == "store:s3://bucket/iris"
    assert calls[1] == ("champion() on", threading.current_thread().name)  # read on the caller's thread, not the fetch's
    assert ahead.take(folder) is None  # taken once: a second canary looks for itself
    ahead.close()
    assert [p.name for p in ws.path.iterdir()] == ["canary"]  # the hidden fetch folder is gone


def test_the_fetchs_error_is_raised_by_take_and_close_leaves_nothing(tmp_path, monkeypatch) -> None:
    _fake_fetch(monkeypatch, result="error")
    ws = _ws(tmp_path)
    ahead = ChampionAhead(_Spec, ws, Services(open_store=lambda uri: object()))
    with pytest.raises(ServiceUnavailable, match="not reachable"):
        ahead.take(ws.path / "canary" / "champion")
    ahead.close()
    assert list(ws.path.iterdir()) == []


def test_a_channel_without_a_pointer_takes_nothing_so_the_canary_looks_itself(tmp_path, monkeypatch) -> None:
    _fake_fetch(monkeypatch, result="none")
    ws = _ws(tmp_path)
    ahead = ChampionAhead(_Spec, ws, Services(open_store=lambda uri: object()))
    assert ahead.take(ws.path / "canary" / "champion") is None
    ahead.close()
    assert list(ws.path.iterdir()) == []


def test_a_release_that_stops_before_its_canary_removes_the_fetch(tmp_path, monkeypatch) -> None:
    _fake_fetch(monkeypatch)
    ws = _ws(tmp_path)
    ahead = ChampionAhead(_Spec, ws, Services(open_store=lambda uri: object()))
    ahead.close()  # (the export failed): joined, and the fetched champion removed
    assert list(ws.path.iterdir()) == []


def test_run_canary_judges_against_the_champion_fetched_ahead_else_finds_it(tmp_path, monkeypatch) -> None:
    import model_release.canary as canary_package
    from model_release import pipeline

    seen: list[Champion] = []

    def canary(spec, intake, export, assembled, ws, *, find_champion, **kwargs):  # noqa: ANN001, ANN202
        seen.append(find_champion(ws.path / "canary" / "champion"))
        from model_release.types import CanaryResult

        return CanaryResult(passed=True, report_json="", report_html="", summary="ok")

    monkeypatch.setattr(canary_package, "run_canary", canary)
    monkeypatch.setattr(champion_module, "find_champion",
                        lambda spec, folder, **kw: Champion("none", "production", reason="looked for here"))
    monkeypatch.setattr(pipeline, "run_stage", lambda ws, stage, fn: fn())

    class Spec(_Spec):
        pass

    _fake_fetch(monkeypatch)
    ws = _ws(tmp_path)
    services = Services(open_store=lambda uri: object())
    ahead = ChampionAhead(Spec, ws, services)
    pipeline.run_canary(Spec, ws, services, None, None, None, champion_ahead=ahead)
    pipeline.run_canary(Spec, ws, services, None, None, None, champion_ahead=ahead)  # taken: looked for again
    pipeline.run_canary(Spec, ws, services, None, None, None)  # without one (the Airflow task)
    ahead.close()
    assert [c.kind for c in seen] == [SERVED, "none", "none"]


def test_services_open_each_store_once_and_not_a_failed_one() -> None:
    opened: list[str] = []

    def open_store(uri: str) -> object:
        opened.append(uri)
        if uri.endswith("down"):
            raise ServiceUnavailable("down")
        return object()

    services = Services(open_store=open_store)
    first = services.store("s3://a/iris")
    assert services.store("s3://a/iris") is first
    assert services.store("s3://b/iris") is not first
    for _ in range(2):
        with pytest.raises(ServiceUnavailable):
            services.store("s3://a/down")
    assert opened == ["s3://a/iris", "s3://b/iris", "s3://a/down", "s3://a/down"]
    assert Services(open_store=open_store) == Services(open_store=open_store)  # the cache is not part of its value


def test_release_starts_the_fetch_before_the_export_and_hands_it_to_the_canary(tmp_path, monkeypatch) -> None:
    from model_release import pipeline

    events: list[str] = []
    started = threading.Event()
    _fake_fetch(monkeypatch, started=started)

    def export(spec, ws, intake):  # noqa: ANN001, ANN202
        assert started.wait(30)  # the champion is being fetched while the candidate exports
        events.append("export")

    def canary(spec, ws, services, intake, export_, assembled, *, keep_rejected, champion_ahead, later):  # noqa: ANN001, ANN202
        events.append("canary")
        later.callback(events.append, "joined")  # the Triton's stop: joined when the release ends
        assert champion_ahead.take(ws.path / "canary" / "champion").release_id == "iris-1"

    def claim_release(spec, ws, services, *, promote, holder):  # noqa: ANN001, ANN202 - nothing to check or claim here
        ws.claim()
        return None, None

    monkeypatch.setattr(pipeline, "claim_release", claim_release)
    monkeypatch.setattr(pipeline, "run_intake", lambda spec, ws, services, candidate: events.append("intake"))
    monkeypatch.setattr(pipeline, "run_export", export)
    monkeypatch.setattr(pipeline, "run_tensorrt", lambda *a: None)
    monkeypatch.setattr(pipeline, "run_assemble", lambda *a: None)
    monkeypatch.setattr(pipeline, "run_canary", canary)

    class Spec(_Spec):
        name = "iris"

    ws = Workspace("iris-2", tmp_path / "ws")
    pipeline.release(Spec, ws, Services(open_store=lambda uri: object()), promote=False)
    assert events == ["intake", "export", "canary", "joined"]
    assert not list(ws.path.glob(".champion-ahead-*"))  # closed: nothing of the fetch left beside the stages


@pytest.mark.parametrize("caller_joins", [False, True])
def test_the_canary_leaves_its_triton_stop_to_the_callers_stack_when_given_one(tmp_path, iris, iris_repository,
                                                                               monkeypatch, caller_joins) -> None:
    import contextlib

    from model_release.canary import run_canary, stage
    from model_release.errors import CanaryRejected

    from .support import make_release

    joined: list[str] = []

    def serve_and_replay(*args, later, **kwargs):  # noqa: ANN002, ANN003, ANN202
        later.callback(joined.append, "stop joined")  # what _triton registers: the stop thread's join
        raise CanaryRejected('model "iris_post" failed to load on the canary Triton')

    monkeypatch.setattr(stage, "serve_and_replay", serve_and_replay)
    onnx_path, golden, reference = iris
    release = make_release(tmp_path, iris_repository, onnx_path, golden, reference)
    outer = contextlib.ExitStack()
    with pytest.raises(CanaryRejected, match="failed to load"):
        run_canary(release.spec, release.intake, release.export, release.assembled, release.workspace,
                   later=outer if caller_joins else None)
    assert joined == ([] if caller_joins else ["stop joined"])
    outer.close()
    assert joined == ["stop joined"]
