"""The package list, which pyproject.toml cannot say in one place: every package under plugins/, and
model_repository_template/ installed as ``model_release.templates`` (its templates are package data)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages("plugins"), "model_release.templates"],
    package_dir={"": "plugins", "model_release.templates": "model_repository_template"},
)
