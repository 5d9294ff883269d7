"""The wheel and sdist hold what a release needs and nothing of the clone's; installed without extras into a
venv outside the clone, the package registers its Airflow provider and brings no mock service or test tool."""

from __future__ import annotations

import email
import json
import tarfile
import zipfile

import pytest

from tests.conftest import PROJECT

from .conftest import Dist, Venv

pytestmark = [pytest.mark.package, pytest.mark.integration]

TEMPLATES = sorted(str(p.relative_to(PROJECT / "model_repository_template"))
                   for p in (PROJECT / "model_repository_template").rglob("*.j2"))
CONNECTION_TYPES = ("mlflow", "triton_canary", "model_store")


def test_the_wheel_holds_the_package_its_templates_and_types_and_no_tests(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as whl:
        names = whl.namelist()
        size = sum(i.file_size for i in whl.infolist())
        metadata = email.message_from_bytes(whl.read(next(n for n in names if n.endswith(".dist-info/METADATA"))))
        entry_points = whl.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    print(f"\n[package] {dist.wheel.name}: {len(names)} files, {dist.wheel.stat().st_size / 1024:.0f} KiB "
          f"({size / 1024:.0f} KiB unpacked); {dist.sdist.name}: {dist.sdist.stat().st_size / 1024:.0f} KiB")
    assert TEMPLATES and all(f"model_release/templates/{t}" in names for t in TEMPLATES), TEMPLATES
    assert "model_release/templates/README.md" in names
    assert "model_release/py.typed" in names
    package = PROJECT / "plugins" / "model_release"
    sources = {f"model_release/{p.relative_to(package).as_posix()}" for p in package.rglob("*") if p.suffix in (".py", ".typed")
               and "__pycache__" not in p.parts}
    assert sources <= set(names), sorted(sources - set(names))  # every module, the DAG factory and the provider among them
    assert not [n for n in names if n.startswith(("tests/", "dags/", "infra/", "benchmarks/", "examples/"))
                or "/tests/" in n or "__pycache__" in n]
    assert not [n for n in names if not n.startswith(("model_release/", "model_release-"))], "only the package at the top"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert metadata["License-Expression"] == "Apache-2.0"
    import model_release

    assert metadata["Version"] == model_release.__version__  # the one place the version lives
    assert "apache_airflow_provider" in entry_points and "model_release.airflow.provider:get_provider_info" in entry_points
    requires = metadata.get_all("Requires-Dist")
    core = [r for r in requires if "extra ==" not in r]
    assert not [r for r in core if "==" in r], f"exact pins in the core requirements: {[r for r in core if '==' in r]}"
    assert not [r for r in core if r.lower().startswith(("moto", "pytest"))], core
    assert {e for e in metadata.get_all("Provides-Extra")} >= {"torch", "boost", "local", "test"}


def test_the_sdist_builds_the_wheel_from_the_templates_and_holds_no_tests(dist: Dist) -> None:
    """uv build made the wheel above from this sdist: the sdist carries the template folder, setup.py's
    mapping and the license, and none of the clone's tests."""
    with tarfile.open(dist.sdist) as sdist:
        names = [n.split("/", 1)[1] for n in sdist.getnames() if "/" in n]
    assert all(f"model_repository_template/{t}" in names for t in TEMPLATES)
    assert {"setup.py", "pyproject.toml", "LICENSE", "CHANGELOG.md", "plugins/model_release/py.typed"} <= set(names)
    assert not [n for n in names if n.startswith("tests/") or "__pycache__" in n]


def test_the_core_install_brings_no_mock_service_and_no_test_tool(core_venv: Venv) -> None:
    moto = core_venv.run(core_venv.python, "-m", "pip", "show", "moto", check=False)
    assert moto.returncode != 0 and "not found: moto" in moto.stderr, moto.stdout + moto.stderr
    show = core_venv.run(core_venv.python, "-m", "pip", "show", "model-release", "pytest", "hypothesis")
    assert "Name: model-release" in show.stdout and "not found: hypothesis, pytest" in show.stderr, show.stdout + show.stderr


def test_installed_it_runs_from_the_venv_with_its_templates_and_names_the_triton_setting(core_venv: Venv) -> None:
    probe = core_venv.run(core_venv.python, "-c", """
import json, model_release
from model_release.errors import ServiceUnavailable
from model_release.repository.render import template_root
from model_release.triton.local import runtime_venv
try:
    runtime_venv(); triton = None
except ServiceUnavailable as exc:
    triton = str(exc)
print(json.dumps({"file": model_release.__file__, "templates": str(template_root()), "triton": triton,
                  "checkout": model_release.source_checkout() is not None, "home": str(model_release.project_home())}))
""")
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    site = str(core_venv.root.resolve())
    assert found["file"].startswith(site) and not found["file"].startswith(str(PROJECT)), found
    assert found["templates"].startswith(site) and found["templates"].endswith("model_release/templates"), found
    assert found["checkout"] is False and found["home"] == str(core_venv.home.resolve())
    assert found["triton"] is not None and "MODEL_RELEASE_TRITON_RUNTIME" in found["triton"], found
    assert "\n" not in found["triton"]  # one line


def test_airflow_lists_the_provider_and_its_connection_types(core_venv: Venv) -> None:
    providers = core_venv.run(core_venv.bin("airflow"), "providers", "list", "--output", "json", timeout=120)
    listed = {p["package_name"]: p for p in json.loads(providers.stdout[providers.stdout.index("["):])}
    import model_release

    assert "model-release" in listed and listed["model-release"]["version"] == model_release.__version__, sorted(listed)
    hooks = core_venv.run(core_venv.bin("airflow"), "providers", "hooks", "--output", "json", timeout=120)
    types = {h["connection_type"]: h for h in json.loads(hooks.stdout[hooks.stdout.index("["):])}
    for conn_type in CONNECTION_TYPES:
        assert conn_type in types and types[conn_type]["package_name"] == "model-release", sorted(types)
    assert types["mlflow"]["class"] == "model_release.airflow.hooks.MlflowHook"
    assert "model-release" not in (providers.stderr + hooks.stderr), "Airflow warned about the provider"
