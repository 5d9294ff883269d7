"""The references generated from the code, never written twice (``docs/reference/``):

- :mod:`.spec`: every spec field with its type, default, allowed values and description;
- :mod:`.cli`: every command of ``model-release`` with its flags, from the parsers themselves.

    python -m model_release.reference --write docs/reference   # after changing the spec or a command
    python -m model_release.reference --check docs/reference   # what the tests check: exit 1 when stale
"""
