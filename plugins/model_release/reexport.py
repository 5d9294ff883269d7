"""``python -m model_release.reexport --root ROOT --release ID``: re-run a release's export stage.

Reads ``<root>/<release>/intake/intake.json`` and ``<root>/<release>/export/spec.json`` (written by
the export stage) and runs the export again through the pipeline's one runner; this is what the
export's ``reproduce.sh`` calls. It lives beside :mod:`.pipeline`, not inside ``export/``, because
it runs the stage: the stage's own package never imports the runner above it.
"""

from __future__ import annotations

import argparse
import json
import sys

from .errors import ModelReleaseError
from .pipeline import run_export
from .spec import spec_from_record
from .stages import EXPORT, INTAKE
from .types import IntakeResult
from .workspace import Workspace


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m model_release.reexport", description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the workspace root")
    parser.add_argument("--release", required=True, help="the release id")
    parser.add_argument("--no-cache", action="store_true", help="convert again even if the cache has this model")
    args = parser.parse_args(argv)
    try:
        ws = Workspace(args.release, root=args.root)
        intake = ws.load_result(INTAKE, IntakeResult)
        spec_path = ws.stage_dir(EXPORT) / "spec.json"
        if intake is None or not spec_path.is_file():
            print(f"export: {ws.path} has no intake/intake.json or export/spec.json; run the release first", file=sys.stderr)
            return 2
        data = json.loads(spec_path.read_text())
        if args.no_cache:
            data.setdefault("export", {})["cache"] = False
        spec = spec_from_record(data, origin=str(spec_path))
        result = run_export(spec, ws, intake)
    except ModelReleaseError as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    print(json.dumps({"onnx_path": result.onnx_path, "cached": result.cached, "parity": "passed"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
