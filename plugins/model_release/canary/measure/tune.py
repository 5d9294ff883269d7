"""A serving configuration chosen on the canary and shipped in the release (``canary.tune``).

The release's leaf models (the converted model: ONNX or a TensorRT plan, whatever backend serves
it) get each setting of a small grid, through Triton's load API with the configuration replaced
(:meth:`~.server.TritonServer.load_with_config`): instance count, dynamic batching off or on with
each max queue delay and preferred batch sizes. Each trial is measured through the release's entry
model under the load phase's concurrency and batch size. The pick: the highest throughput whose
p99 meets the SLO (``canary.p99_ms``) and, with a champion served, ``max_p99_ratio`` x the
champion's p99. The pick is then confirmed against the template's own configuration in
counterbalanced measurements (pick, default, default, pick) and kept only if it is at least as
fast; the configuration kept stays loaded for the gate's load phase, and is written into a copy of the release's repository
(config.pbtxt through Triton's ModelConfig protobuf, re-linted), which is what gets promoted.

A champion tuned for a release of the same shape, recently, is not searched again: its kept setting
is carried, served and written the same way (:mod:`.carry`, ``canary.tune.reuse_days``).

A setting already served is not loaded again (:class:`Leaves`; a reload costs seconds on the CPU
canary): the template's own at the first trial, the pick when the grid's last trial left it loaded,
the default's second window, and the pick that ships after the confirmation ended on it.
"""

from __future__ import annotations

import itertools
import logging
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...errors import AssembleError
from ...repository.config import CONFIG_FILE, read_config, write_config
from ...spec import ReleaseSpec
from ...triton.server import TritonServer
from ...types import AssembleResult
from ...workspace import link_or_copy
from ..champion import Champion
from .carry import Carried, carried, fingerprint_or_why
from .load import LoadRunner, Measurement

log = logging.getLogger(__name__)

CANDIDATE, CHAMPION = "candidate", "champion"
_NOT_LEAVES = ("python", "ensemble")


@dataclass(frozen=True)
class Setting:
    """One serving configuration of the leaf models."""

    instances: int
    dynamic_batching: bool
    max_queue_delay_us: int = 0
    preferred_batch_sizes: tuple[int, ...] = ()

    def label(self) -> str:
        if not self.dynamic_batching:
            return f"{self.instances} instance(s), no dynamic batching"
        preferred = f", preferred {list(self.preferred_batch_sizes)}" if self.preferred_batch_sizes else ""
        return f"{self.instances} instance(s), dynamic batching, max queue delay {self.max_queue_delay_us} us{preferred}"

    def apply(self, config: Any) -> Any:
        """A copy of ``config`` (a ModelConfig) with this setting."""
        out = type(config)()
        out.CopyFrom(config)
        if not out.instance_group:
            out.instance_group.add()
        for group in out.instance_group:
            group.count = self.instances
        out.ClearField("dynamic_batching")
        if self.dynamic_batching and out.max_batch_size > 0:
            out.dynamic_batching.max_queue_delay_microseconds = self.max_queue_delay_us
            out.dynamic_batching.preferred_batch_size.extend(s for s in self.preferred_batch_sizes if s <= out.max_batch_size)
        return out


def setting_of(config: Any) -> Setting:
    """The setting a configuration already has (the template's default)."""
    instances = config.instance_group[0].count if config.instance_group and config.instance_group[0].count else 1
    if not config.HasField("dynamic_batching"):
        return Setting(instances, False)
    return Setting(instances, True, int(config.dynamic_batching.max_queue_delay_microseconds),
                   tuple(config.dynamic_batching.preferred_batch_size))


def grid(spec: ReleaseSpec, default: Setting) -> list[Setting]:
    """The template's setting first, then the spec's grid (without repeats)."""
    t = spec.canary.tune
    settings = [default]
    for instances, batching in itertools.product(t.instances, t.dynamic_batching):
        if not batching:
            settings.append(Setting(instances, False))
            continue
        for delay, preferred in itertools.product(t.max_queue_delay_us, t.preferred_batch_sizes):
            settings.append(Setting(instances, True, delay, tuple(preferred)))
    return list(dict.fromkeys(settings))


def leaf_models(assembled: AssembleResult) -> list[str]:
    """The models of the release that serve the converted model (not python steps, not ensembles)."""
    root = Path(assembled.repository_dir)
    leaves = []
    for model in assembled.load_order:
        config = read_config(root / model / CONFIG_FILE)
        if (config.backend or config.platform) not in _NOT_LEAVES:
            leaves.append(model)
    return leaves


def tune(spec: ReleaseSpec, server: TritonServer, runner: LoadRunner, assembled: AssembleResult, folder: Path,
         *, champion_target: bool, champion: Champion | None = None, release_id: str = "",
         canary: Mapping[str, Any] | None = None, now: datetime | None = None) -> dict[str, Any]:
    """Search, pick, confirm and write the serving configuration (or carry the champion's); return what the report keeps.

    ``champion``, ``canary`` (the report's server facts) and ``now``: whether the champion's setting
    is carried instead (:mod:`.carry`); ``release_id``: where a search's setting was measured.

    Raises:
        CanaryRejected: Triton refused a setting (its message quoted).
        AssembleError: the chosen configuration does not lint clean (it is never shipped then).
    """
    leaves = leaf_models(assembled)
    if not leaves:
        return {"skipped": "the release has no leaf model to tune (only python steps and ensembles)"}
    root = Path(assembled.repository_dir)
    default = setting_of(read_config(root / leaves[0] / CONFIG_FILE))
    served = Leaves(server, {m: server.config(m) for m in leaves})  # as served (the CPU canary's shim, on the local Triton)
    now = now or datetime.now(timezone.utc)
    began = time.perf_counter()
    mine = fingerprint_or_why(spec, root, [*assembled.load_order, assembled.entry_model], leaves, canary or {})
    carry, reuse = carried(spec, champion, mine, now)
    log.info("canary: tuning %s", reuse)
    if carry is not None:
        return _carry(served, carry, root, folder, leaves, default, mine, reuse, began)
    started = time.perf_counter()  # the budget is for the search's windows, not for reading the repository
    limit, why = _p99_limit(spec, runner, champion_target)
    trials, settings = [], grid(spec, default)
    for setting in settings:
        if time.perf_counter() - started > spec.canary.tune.budget_s and trials:
            log.info("canary: tuning budget of %g s spent after %d trials", spec.canary.tune.budget_s, len(trials))
            break
        trials.append({"setting": asdict(setting), "label": setting.label(), **_trial(spec, served, runner, setting)})
    fit = [t for t in trials if not t["errors"] and (limit is None or t["p99_ms"] <= limit)]
    best = max(fit, key=lambda t: t["throughput_rows_per_s"]) if fit else trials[0]
    chosen = _setting(best["setting"])
    confirm = _confirm(spec, served, runner, chosen, default) if chosen != default else None
    kept_default = confirm is not None and confirm["chosen_throughput"] < confirm["default_throughput"]
    final = default if kept_default else chosen
    served.load(final)  # the gate's load phase measures what ships
    return _ship(served, final, root, folder, leaves, default, began, reuse,
                 p99_limit_ms=limit, p99_limit=why, budget_s=spec.canary.tune.budget_s, trials=trials,
                 kept_default=kept_default, confirm=confirm, fingerprint=None if "error" in mine else mine,
                 carried_from=None, measured_in=release_id, measured_at=now.isoformat(),
                 complete=len(trials) == len(settings))  # a search the budget cut short is not carried


def _carry(served: Leaves, carry: Carried, root: Path, folder: Path, leaves: list[str], default: Setting,
           mine: dict[str, Any], reuse: str, began: float) -> dict[str, Any]:
    """Serve and write the champion's setting, no trial: the load phase measures the candidate under it."""
    setting = _setting(carry.setting)
    served.load(setting)
    return _ship(served, setting, root, folder, leaves, default, began, reuse,
                 p99_limit_ms=None, p99_limit="no search: " + reuse, budget_s=None, trials=[],
                 kept_default=carry.kept_default, confirm=None, fingerprint=mine, carried_from=carry.carried_from,
                 measured_in=carry.measured_in, measured_at=carry.measured_at, complete=True)


def _ship(served: Leaves, final: Setting, root: Path, folder: Path, leaves: list[str], default: Setting, began: float,
          reuse: str, **how: Any) -> dict[str, Any]:
    """Write ``final`` (served already) into the repository that ships; what the report keeps, with ``how`` it was chosen."""
    repository = write_tuned(root, folder / "tuned" / "models", leaves, final)
    return {
        "leaves": leaves, "seconds": round(time.perf_counter() - began, 3), "default": asdict(default),
        "chosen": asdict(final), "chosen_label": final.label(), "reloads": served.reloads,
        "reloads_skipped": served.skipped, "repository": str(repository), "reuse": reuse, **how,
    }


def _setting(fields: Mapping[str, Any]) -> Setting:
    """A Setting from its report form (``asdict``: lists for tuples)."""
    return Setting(**{**fields, "preferred_batch_sizes": tuple(fields.get("preferred_batch_sizes") or ())})


class Leaves:
    """The leaf models as served, and the setting they are loaded with now.

    A reload costs seconds on the canary (Triton starts a python stub per instance and reloads the
    ensemble above the leaf), and loading the setting already loaded changes nothing: :meth:`load`
    skips it. The leaves start out with the template's setting when what Triton serves has it.

    Args:
        server: the canary's Triton.
        configs: each leaf's configuration as Triton serves it (a ModelConfig per model name).
    """

    def __init__(self, server: TritonServer, configs: dict[str, Any]) -> None:
        self.server, self.configs = server, configs
        served = {setting_of(c) for c in configs.values()}
        self.current: Setting | None = served.pop() if len(served) == 1 else None
        self.reloads = self.skipped = 0

    def load(self, setting: Setting) -> bool:
        """Serve ``setting`` on every leaf (a reload through the load API), unless it is served already;
        whether it reloaded.

        Raises:
            CanaryRejected: Triton refused the setting (its message quoted); what is loaded is then unknown.
        """
        if setting == self.current:
            self.skipped += 1
            return False
        self.current = None  # a load that fails half-way leaves the leaves in no known setting
        for model, config in self.configs.items():
            self.server.load_with_config(model, setting.apply(config))
        self.current = setting
        self.reloads += 1
        return True


def _p99_limit(spec: ReleaseSpec, runner: LoadRunner, champion_target: bool) -> tuple[float | None, str]:
    limits = []
    if spec.canary.p99_ms is not None:
        limits.append((spec.canary.p99_ms, f"canary.p99_ms {spec.canary.p99_ms:g} ms"))
    if champion_target:  # served beside the candidate and replayed already: warm, as a trial's setting served before
        p99 = runner.window(CHAMPION, spec.canary.tune.trial_s).histogram.percentile_ms(99)
        ratio = spec.canary.load.max_p99_ratio
        limits.append((ratio * p99, f"{ratio:g} x the champion's p99 {p99:.3f} ms"))
    if not limits:
        return None, "no SLO and no champion: the fastest trial without errors"
    value, why = min(limits)
    return value, why


def _trial(spec: ReleaseSpec, served: Leaves, runner: LoadRunner, setting: Setting) -> dict[str, Any]:
    """One window of ``setting``, warmed up first when it was just loaded: a freshly loaded model's first
    requests are slow (stubs starting, sessions allocating); one already served has answered before."""
    if served.load(setting):
        runner.window(CANDIDATE, min(spec.canary.load.warmup_s, spec.canary.tune.trial_s), measure=False)
    window = runner.window(CANDIDATE, spec.canary.tune.trial_s)
    result = Measurement(CANDIDATE, [window])
    figures = result.figures(1)
    log.info("canary: tuning trial %s: %.0f rows/s, p99 %.2f ms, %d errors", setting.label(),
             figures["throughput_rows_per_s"], figures["p99_ms"], figures["errors"])
    return {k: figures[k] for k in ("throughput_rows_per_s", "p50_ms", "p99_ms", "errors", "requests")}


def _confirm(spec: ReleaseSpec, served: Leaves, runner: LoadRunner, chosen: Setting, default: Setting) -> dict[str, Any]:
    """Chosen and default measured twice more each, in the order chosen, default, default, chosen (ABBA): the pick
    stands only if it is at least as fast.

    ABBA balances a drift of the machine's speed over the four windows (each setting's two windows
    have the same mean position, where ABAB favours the first), and switches setting twice where
    ABAB switches three times: it starts with the pick, which the grid's last trial often left
    loaded, and ends on it, which is what ships unless the default measured faster.
    """
    figures: dict[str, list[float]] = {"chosen": [], "default": []}
    for name, setting in (("chosen", chosen), ("default", default), ("default", default), ("chosen", chosen)):
        figures[name].append(_trial(spec, served, runner, setting)["throughput_rows_per_s"])
    return {"chosen_throughput": sum(figures["chosen"]) / 2, "default_throughput": sum(figures["default"]) / 2,
            "rounds": figures}


def write_tuned(source: Path, destination: Path, leaves: list[str], setting: Setting) -> Path:
    """A copy of the release's repository with ``setting`` in its leaves' config.pbtxt, linted.

    The copy hard-links every file (a model's weights are not copied); each config.pbtxt it changes is
    written atomically, a new file in place of the link, so the source keeps its own.
    """
    from ...repository.lint import lint_repository

    if destination.exists():
        shutil.rmtree(destination)
    shutil.copytree(source, destination, copy_function=link_or_copy)
    for model in leaves:
        path = destination / model / CONFIG_FILE
        write_config(path, setting.apply(read_config(path)))
    report = lint_repository(destination)
    if report.errors:
        raise AssembleError(
            f"the tuned configuration ({setting.label()}) does not lint clean, so it is not shipped: "
            + "; ".join(str(f) for f in report.errors[:5])
        )
    return destination
