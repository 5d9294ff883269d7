"""The Jinja templates of the python-backend ``model.py`` files (README.md beside this file).

This folder is the templates' source in the clone and, installed, the package
``model_release.templates`` (pyproject.toml maps it there), so the assembler finds them with
``importlib.resources`` in a wheel, an sdist's build and an editable install alike
(:func:`model_release.repository.render.template_root`). It holds no code.
"""
