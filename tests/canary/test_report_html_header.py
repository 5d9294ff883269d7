"""The HTML report's first lines say what was released and, plainly, what served the canary."""

from __future__ import annotations

from model_release.canary.report import render_html


def test_header_names_the_model_and_the_shimmed_cpu_server() -> None:
    html = render_html({
        "passed": True, "release": "iris", "release_id": "iris-1",
        "model": {"name": "iris-classifier", "version": "2", "alias": "candidate", "run_id": "abc"},
        "server": {"version": "2.51.0", "mode": "local", "description": "CPU, python-backend onnxruntime shim"},
        "baseline": {"name": "production (version 1)", "outputs": {"label": {"kind": "label", "rows": 4, "agreement": 0.75}}},
        "parity": {},
    })
    head = html[: html.index("<h2>")]
    assert "iris-classifier version 2 (alias candidate, run_id abc)" in head
    assert "Triton 2.51.0, local: CPU, python-backend onnxruntime shim" in head
    # the comparison with production comes before timing and the server details
    assert html.index("Against the production model") < html.index("<h2>Timing") < html.index("<h2>Server")
