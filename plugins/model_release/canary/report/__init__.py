"""Reporting a canary: the report.json document, its page, its plots and its record in MLflow.

Modules: :mod:`.document` (:class:`~.document.CanaryReport`, what report.json holds; writing
report.json and report.html), :mod:`.decision` (the verdict and one line per gate, for the page
and the terminal), :mod:`.page` (report.html, self-contained), :mod:`.plots` (inline SVG plots),
:mod:`.plotdata` (the bounded data the plots are drawn from, built from the judged figures),
:mod:`.record` (the verdict and the served figures recorded in MLflow).
"""
