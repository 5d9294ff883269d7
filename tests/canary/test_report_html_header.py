"""The HTML report's first screen says what was released, plainly what served the canary, what it was
judged against and the verdict with its gates; the plots and the details come after."""

from __future__ import annotations

from model_release.canary.report.document import render_html


def test_header_names_the_model_and_the_shimmed_cpu_server() -> None:
    html = render_html({
        "passed": True, "release": "iris", "release_id": "iris-1",
        "model": {"name": "iris-classifier", "version": "2", "alias": "candidate", "run_id": "abc"},
        "server": {"version": "2.51.0", "mode": "local", "description": "CPU, python-backend onnxruntime shim"},
        "champion": {"kind": "served", "name": "release iris-0 (iris-classifier v1)"},
        "gates": [{"name": "champion.agreement", "passed": False, "setting": "canary.champion.min_agreement",
                   "candidate": 0.75, "champion": 1.0, "limit": ">= 0.9", "message": "agree on 75.00%"}],
        "shift": {"agreement": 0.75, "psi": 0.1},
        "parity": {},
    })
    head = html[: html.index("</header>")]
    assert "iris-classifier version 2 (alias candidate, run_id abc)" in head
    assert "Triton 2.51.0 (local: CPU, python-backend onnxruntime shim)" in head
    assert "judged against <b>release iris-0 (iris-classifier v1) (served)</b>" in head
    assert "<b>champion.agreement</b>" in head and "75.00%" in head and "&gt;= 0.9" in head
    # the decision, then the plots section by section, then the details (collapsed)
    assert (html.index("</header>") < html.index("<h2>Quality on ground truth") < html.index("<h2>Against the production champion")
            < html.index("<h2>Latency") < html.index("<h2>Parity") < html.index("<h2>Details") < html.index("<details>"))
