"""Does the linter agree with the real Triton? Each case of :mod:`.agreement_cases`, judged by both.

Triton's verdict: the case's model loads on the local tritonserver 2.51 (python backend, ensembles;
the ONNX leaf through the canary's shim, or as written for ``raw`` cases) or is refused, with the
reason from the server log. One server judges every case: between cases its repository is brought
to the case's state; a load that does not finish in time counts as refused and the server is
restarted.

The linter's verdict: ``refuses`` when it reports, on that model, a finding whose rule Triton
refuses (``RULES[rule].triton``); ``undecided`` when its findings there are only ones the files
cannot decide; else ``loads``. A linter whose rules do not say what Triton does (before issue 11)
is read as ``refuses`` on any error. ``undecided`` cases are shown, not counted.

    .venv/bin/python -m tests.repository.agreement                      # this checkout's linter
    PYTHONPATH=/tmp/before/plugins .venv/bin/python -m tests.repository.agreement   # another one
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .agreement_cases import CASES, ONNX, Case, copy_case
from .lint_repos import write_valid_repository

LOAD_TIMEOUT = 10.0  # seconds; some loads Triton refuses never finish (a version folder that does not exist)
#: a load that timed out is tried once more on a fresh server with this long a wait: on a busy machine (load
#: average 9 here) a fresh server's first load of the whole ensemble took over 10 s, read as a refusal
SLOW_LOAD_TIMEOUT = 60.0


@dataclass(frozen=True)
class Judgement:
    case: Case
    triton: str  # "loads" or "refuses"
    reason: str
    lint: str  # "loads", "refuses" or "undecided"
    rules: tuple[str, ...]
    seconds: float = 0.0  # Triton's part

    @property
    def counted(self) -> bool:
        return self.lint != "undecided"

    @property
    def agrees(self) -> bool:
        return self.lint == self.triton


def lint_verdict(repo: Path, model: str) -> tuple[str, tuple[str, ...]]:
    """The linter's verdict on ``model`` and the rules it reported there."""
    from model_release.repository.lint import RULES, lint_repository

    try:
        found = [f for f in lint_repository(repo).findings if f.model == model]
    except Exception as exc:  # noqa: BLE001 - a linter that crashes disagrees, whatever Triton does
        return "crashed", (type(exc).__name__,)
    rules = tuple(sorted({f.rule for f in found}))
    behaviour = [getattr(RULES[r], "triton", None) for r in rules]
    if any(b is None for b in behaviour):  # a linter whose rules do not say what Triton does
        return ("refuses" if any(f.severity == "error" for f in found) else "loads"), rules
    if "refuses" in behaviour:
        return "refuses", rules
    if any(b in ("undecided", "unread") for b in behaviour):
        return "undecided", rules
    return "loads", rules


class TritonJudge:
    """One local tritonserver that loads each case's model from its repository.

    Only the model folders a case changes are replaced, after unloading them and the ensembles
    that use them (a failed reload would leave the old version serving), with fresh timestamps so
    Triton reads them again; the others stay loaded as they were.
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.repository = workdir / "models"
        self.repository.mkdir(parents=True)
        self.server = None
        self.client = None
        self._installed: dict[str, str] = {}  # model folder -> digest of what is there now
        self._start()

    def _start(self, timeout: float = LOAD_TIMEOUT) -> None:
        from model_release.triton.local import LocalTriton

        self._installed.clear()
        self.server = LocalTriton(self.repository, work_dir=self.workdir / "server")
        self.server.start()
        self.client = self.server.client(network_timeout=timeout)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def verdict(self, case_repo: Path, case: Case) -> tuple[str, str]:
        """("loads" | "refuses", Triton's reason) for loading ``case.model`` from ``case_repo``."""
        verdict, reason = self._load(case_repo, case)
        ready = {m["name"] for m in self.client.get_model_repository_index() if m.get("state") == "READY"}
        for name in list(self._installed):  # what did not load is copied afresh next time
            if name not in ready:
                del self._installed[name]
        return verdict, reason

    def _load(self, case_repo: Path, case: Case, timeout: float = LOAD_TIMEOUT) -> tuple[str, str]:
        from tritonclient.utils import InferenceServerException

        self._install(case_repo, case)
        log_from = self.server.log_path.stat().st_size
        try:
            self.client.load_model(case.model)
        except InferenceServerException as exc:
            reason = self._reason(log_from, case.model) or str(exc)
            if case.raw and "unable to find backend library" in f"{reason} {exc}":
                return "loads", "core checks passed (no onnxruntime backend on this server)"
            return "refuses", reason
        except Exception as exc:  # noqa: BLE001 - a timeout: the load never finished, or the machine is slow
            self.stop()
            if timeout < SLOW_LOAD_TIMEOUT:  # once more, on a fresh server, waiting long enough for a busy machine
                self._start(SLOW_LOAD_TIMEOUT)
                try:
                    return self._load(case_repo, case, SLOW_LOAD_TIMEOUT)
                finally:
                    self.stop()
                    self._start()
            return "refuses", f"not loaded within {timeout:g} s ({type(exc).__name__})"
        if not self.client.is_model_ready(case.model):
            return "refuses", self._reason(log_from, case.model) or "loaded but not ready"
        return "loads", ""

    def _install(self, case_repo: Path, case: Case) -> None:
        staging = Path(tempfile.mkdtemp(dir=self.workdir))
        try:
            prepared = {name: (folder, _digest(folder))
                        for name, folder in _prepare(case_repo, staging / "models", shim=not case.raw).items()}
            gone = [name for name in self._installed if name not in prepared]
            changed = [name for name, (_, digest) in prepared.items() if self._installed.get(name) != digest]
            self._unload(gone + changed)
            for name in gone:
                shutil.rmtree(self.repository / name)
                del self._installed[name]
            for name in changed:
                folder, digest = prepared[name]
                target = self.repository / name
                if target.exists() or target.is_symlink():
                    shutil.rmtree(target)
                shutil.copytree(folder, target, symlinks=True, copy_function=shutil.copy)  # fresh timestamps
                self._installed[name] = digest
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _unload(self, names: list[str]) -> None:
        """Unload ``names`` and the ensembles using them; wait until they are gone."""
        ready = {m["name"] for m in self.client.get_model_repository_index() if m.get("state") == "READY"}
        for name in set(names) & ready:
            self.client.unload_model(name, unload_dependents=True)
        deadline = time.monotonic() + LOAD_TIMEOUT
        while time.monotonic() < deadline:
            states = {m["name"]: m.get("state") for m in self.client.get_model_repository_index()}
            if "UNLOADING" not in states.values() and not any(states.get(n) == "READY" for n in names):
                return
            time.sleep(0.05)

    def _reason(self, log_from: int, model: str) -> str:
        """The last error the server logged about ``model`` since ``log_from``."""
        text = self.server.log_path.read_bytes()[log_from:].decode("utf-8", errors="replace")
        errors = [m.group(1) for m in re.finditer(r'^E\d{4} [^\]]*\] "(.*)"$', text, re.M)]
        about = [e for e in errors if model in e and "CUDA" not in e]
        return about[-1].split("\\n")[0] if about else ""


def _prepare(case_repo: Path, staging: Path, shim: bool) -> dict[str, Path]:
    """The case's model folders as the server gets them: the ONNX leaf through the canary shim unless ``shim`` is off."""
    copy_case(case_repo, staging)
    leaf = staging / ONNX
    if shim and (leaf / "config.pbtxt").is_file():
        from model_release.triton.shim import prepare_canary_repository

        (staging.parent / "leaf").mkdir()
        shutil.move(str(leaf), staging.parent / "leaf" / ONNX)
        shimmed = prepare_canary_repository(staging.parent / "leaf", staging.parent / "shimmed")
        shutil.move(str(shimmed.path / ONNX), leaf)
    return {p.name: p for p in sorted(staging.iterdir()) if p.is_dir()}


def _digest(folder: Path) -> str:
    """What a model folder holds: names, kinds, symlink targets and bytes."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        h.update(str(path.relative_to(folder)).encode() + b"\0")
        if path.is_symlink():
            h.update(b"L" + os.readlink(path).encode())
        elif path.is_file():
            h.update(b"F" + path.read_bytes())
        else:
            h.update(b"D")
    return h.hexdigest()


def judge_all(workdir: Path, onnx_model: Path, cases: list[Case] = CASES) -> list[Judgement]:
    """Every case, judged by a real Triton and by the linter."""
    judge = TritonJudge(workdir / "triton")
    results = []
    try:
        for index, case in enumerate(cases):
            repo = write_valid_repository(workdir / "cases" / f"{index:03d}" / "models", onnx_model)
            case.mutate(repo)
            start = time.perf_counter()
            try:
                triton, reason = judge.verdict(repo, case)
            except Exception as exc:  # a case the harness cannot install (the shim refused it): fix the case
                raise RuntimeError(f"agreement case {case.id!r}: {type(exc).__name__}: {exc}") from exc
            seconds = time.perf_counter() - start
            lint, rules = lint_verdict(repo, case.model)
            results.append(Judgement(case, triton, reason, lint, rules, seconds))
    finally:
        judge.stop()
    return results


def summary(results: list[Judgement]) -> str:
    counted = [r for r in results if r.counted]
    refused = sum(r.triton == "refuses" for r in counted)
    agree = sum(r.agrees for r in counted)
    undecided = len(results) - len(counted)
    return (f"agreement: {agree}/{len(counted)} cases ({refused} Triton refuses, {len(counted) - refused} it loads); "
            f"{undecided} undecided from files, not counted")


def table(results: list[Judgement]) -> str:
    rows = []
    for r in results:
        mark = "  " if not r.counted else ("ok" if r.agrees else "NO")
        rows.append(f"{mark} {r.case.id:42s} {r.seconds:5.1f}s triton {r.triton:8s} lint {r.lint:9s} "
                    f"{','.join(r.rules)[:60]:60s} {r.reason[:110]}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the case repositories and the server log")
    args = parser.parse_args()
    import model_release.repository.lint as lint_module

    from .support import sklearn_onnx

    workdir = Path(tempfile.mkdtemp(prefix="lint-agreement-"))
    start = time.perf_counter()
    try:
        onnx_model = workdir / "lr.onnx"
        sklearn_onnx(onnx_model, "lr")
        results = judge_all(workdir, onnx_model)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(table(results))
    print(f"linter: {lint_module.__file__}")
    print(f"{summary(results)}; {time.perf_counter() - start:.0f} s")
    sys.exit(0 if all(r.agrees for r in results if r.counted) else 1)


if __name__ == "__main__":
    main()
