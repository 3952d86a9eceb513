"""The Redis store's Lua scripts: files in the package, shipped with it, every one in use."""

from __future__ import annotations

import tomllib
from importlib.resources import files
from pathlib import Path

from broker.store.redis import scripts

ROOT = Path(__file__).resolve().parents[2]


def test_the_lua_files_ship_as_package_data() -> None:
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert "*.lua" in package_data["package-data"][scripts.__name__]


def test_every_lua_file_is_part_of_a_script() -> None:
    loaded = [
        scripts.CREATE,
        scripts.COMPARE_AND_SET,
        scripts.QUEUE,
        scripts.HEARTBEAT,
        scripts.LEAVE,
        scripts.PRESENCE,
        scripts.REVOKE,
        scripts.REVOCATIONS,
        scripts.INBOX,
        scripts.INDEX,
        scripts.PUSH_ADD,
        scripts.PUSH_REMOVE,
        scripts.PUSH_LIST,
        scripts.EVENTS,
        scripts.HISTORY,
        scripts.DELIVERY_ADD,
        scripts.DELIVERY_TAKE,
        scripts.DELIVERY_KEEP,
        scripts.DELIVERY_FINISH,
    ]
    lua = [entry for entry in files(scripts).iterdir() if entry.name.endswith(".lua")]
    assert len(lua) == 22
    for entry in lua:
        assert any(entry.read_text(encoding="utf-8") in script for script in loaded), entry.name


def test_a_write_script_starts_with_the_store_s_publish_command() -> None:
    script = scripts.write_script(scripts.CREATE, "SPUBLISH")
    assert script.startswith("local PUBLISH = 'SPUBLISH'\n") and "local function notice_of(" in script
