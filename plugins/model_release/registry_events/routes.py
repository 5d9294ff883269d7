"""Which release a registry event is for: the specs in ``releases/`` that name the model and alias.

Each spec's scheduled DAG (``model_release__<spec name>``) waits on one Asset, named here and
imported by the DAG's shape (:mod:`model_release.airflow.dags`), so the receiver and the DAG agree
on it by construction::

    name  model_release_registry_<spec name>
    uri   x-model-release://registry/<spec name>   (names.ASSET_SCHEME)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ..errors import SpecError
from ..names import ASSET_SCHEME

log = logging.getLogger(__name__)


def asset_name(spec_name: str) -> str:
    """The name of the Asset a spec's scheduled DAG runs on when its model's alias moves."""
    return f"model_release_registry_{spec_name}"


def asset_uri(spec_name: str) -> str:
    """The URI of that Asset."""
    return f"{ASSET_SCHEME}://registry/{spec_name}"


@dataclass(frozen=True)
class Route:
    """An alias event for ``model@alias`` becomes an event on the Asset of spec ``spec_name``."""

    spec_name: str
    model: str
    alias: str
    spec_path: str

    @property
    def asset_uri(self) -> str:
        return asset_uri(self.spec_name)


def routes_from_specs(folder: Path) -> list[Route]:
    """One route per spec in ``folder`` (``*.yaml``) that names its model by alias.

    A spec that does not parse is logged and skipped (its DAG does not exist either); a spec that
    pins a version waits for no alias.
    """
    from ..spec import load_spec

    routes = []
    for path in sorted(Path(folder).glob("*.yaml")):
        try:
            spec = load_spec(path)
        except SpecError as exc:
            log.error("no webhook route for %s: %s", path, exc)
            continue
        if spec.model.alias:
            routes.append(Route(spec.name, spec.model.name, spec.model.alias, str(path)))
    return routes


def match(routes: list[Route], model: str, alias: str) -> tuple[list[Route], bool]:
    """The routes for ``model@alias``, and whether any spec names ``model`` at all."""
    named = [r for r in routes if r.model == model]
    return [r for r in named if r.alias == alias], bool(named)
