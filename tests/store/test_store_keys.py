"""The store's key map (store/keys.py): byte-compatible keys, the package docstring agrees, no module spells a prefix."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import model_release.store as store_package
from model_release.errors import SpecError
from model_release.store import keys
from tests.conftest import PROJECT

PACKAGE = PROJECT / "plugins" / "model_release"
#: the modules that build store keys: the store, the workspace mirror and the stack that names its root
WRITERS = sorted((PACKAGE / "store").glob("*.py")) + sorted((PACKAGE / "serve").glob("*.py")) + [PACKAGE / "workspace_mirror.py", PACKAGE / "local" / "distributed.py"]
_PREFIX = re.compile(r"(?:^|[/}])(?:" + "|".join(re.escape(p) for p in keys.PREFIXES) + ")")


def _documented_prefixes() -> list[str]:
    """The first path segment of each line of the layout block in the store package's docstring."""
    doc = store_package.__doc__ or ""
    block = doc.split("::", 1)[1].split("\nGuarantees:", 1)[0]
    return sorted({m.group(1) for m in re.finditer(r"^    ([a-z.]+/)", block, re.MULTILINE)})


def test_every_prefix_of_the_key_map_is_in_the_store_layout_and_no_other() -> None:
    assert _documented_prefixes() == sorted(keys.PREFIXES)


def test_the_keys_are_the_ones_stores_already_hold() -> None:
    assert keys.channel_key("production") == "channels/production.json"
    assert keys.page_key("production") == "channels/production.html"
    assert keys.history_key("production", 3) == "history/production/0000000003.json"
    assert keys.history_seq("history/production/0000000003.json") == 3 and keys.history_seq("history/p/x.json") is None
    assert keys.release_prefix("iris-1") + keys.MARKER == "releases/iris-1/_COMPLETE"
    assert keys.ledger_key("production", "iris", 4) == "ledger/production/iris/4.json"
    assert keys.rejected_prefix("iris-2") + keys.REJECTED_RECORD == "rejected/iris-2/rejected.json"
    assert keys.workspace_stage_prefix("iris-1", "export") + keys.WORKSPACE_INDEX == "iris-1/export/.published.json"
    assert keys.channel_of("channels/production.json") == "production" and keys.channel_of("channels/production.html") is None
    assert keys.serving_versions_key("production") == "serving/production/versions.json"
    assert keys.rollout_lock_key("production") == "serving/production/lock.json"
    assert keys.rollouts_prefix("production") == "rollouts/production/"


def test_a_bad_channel_never_becomes_a_key() -> None:
    with pytest.raises(SpecError, match="channel"):
        keys.channel_key("../production")


def _spelled_prefixes(path: Path) -> list[str]:
    """String literals (docstrings and comments aside) in ``path`` that spell a store prefix."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return [f"{path.name}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
            and _PREFIX.search(n.value)]


def test_no_module_but_the_key_map_spells_a_store_prefix() -> None:
    found = [hit for path in WRITERS if path.name != "keys.py" for hit in _spelled_prefixes(path)]
    assert found == [], "build these keys with model_release.store.keys: " + "; ".join(found)


def test_the_prefix_scan_finds_a_planted_prefix(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('"""history/ in a docstring is fine."""\nKEY = f"{root}/history/{channel}/"\nOTHER = "ledger/x"\n')
    assert sorted(hit.split(":")[1] for hit in _spelled_prefixes(planted)) == ["2", "3"]
