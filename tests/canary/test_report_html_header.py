"""The HTML report's first lines say what was released and, plainly, what served the canary."""

from __future__ import annotations

from model_release.canary.report import render_html


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
    head = html[: html.index("<h2>")]
    assert "iris-classifier version 2 (alias candidate, run_id abc)" in head
    assert "Triton 2.51.0, local: CPU, python-backend onnxruntime shim" in head
    assert "Judged against:</b> release iris-0 (iris-classifier v1) (served)" in head
    # the gates and the comparison with the champion come before parity, timing and the server details
    assert (html.index("<h2>Gates on the served model") < html.index("<h2>Against the champion")
            < html.index("<h2>Parity") < html.index("<h2>Timing") < html.index("<h2>Server"))
