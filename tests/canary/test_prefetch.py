"""The canary imports great_expectations ahead, in a thread, while its Triton starts (canary.serve.prefetch)."""

from __future__ import annotations

import sys

from model_release.canary.serve import PREFETCH, prefetch


def test_a_module_not_yet_imported_is_imported_in_a_thread_and_nothing_twice(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    thread = prefetch(("colorsys",))
    assert thread is not None and thread.daemon and thread.name == "canary-prefetch"
    thread.join(timeout=60)
    assert "colorsys" in sys.modules
    assert prefetch(("colorsys",)) is None  # imported already: no thread


def test_a_module_that_fails_to_import_is_left_to_the_judging_to_report(caplog) -> None:
    caplog.set_level("DEBUG", logger="model_release.canary.serve")
    thread = prefetch(("model_release_no_such_module",))
    thread.join(timeout=60)
    assert "importing model_release_no_such_module ahead failed: No module named 'model_release_no_such_module'" in caplog.text
    assert PREFETCH == ("great_expectations",)
