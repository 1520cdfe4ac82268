"""The local runtime's data directory: its lock, its snapshot file, and the command line the banner prints."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from offpath_local.runtime import cli_command
from offpath_local.state import DataDirectoryInUse, DataLock, Snapshot, StateSources, restore


def test_a_second_lock_on_a_data_directory_is_refused_naming_the_instance_that_holds_it(tmp_path: Path) -> None:
    (tmp_path / "local.json").write_text(json.dumps({"url": "http://127.0.0.1:8123", "pid": 4242}))
    first = DataLock(tmp_path)
    first.acquire()
    try:
        with pytest.raises(DataDirectoryInUse) as refused:
            DataLock(tmp_path).acquire()
    finally:
        first.release()

    assert str(tmp_path) in str(refused.value)
    assert "http://127.0.0.1:8123 (pid 4242)" in str(refused.value)
    second = DataLock(tmp_path)
    second.acquire()  # free again once released
    second.release()


def test_the_snapshot_is_replaced_whole_and_an_unreadable_one_is_kept_aside(tmp_path: Path) -> None:
    snapshot = Snapshot(tmp_path)
    snapshot.write({"format": 1, "table": {"items": [1]}})
    snapshot.write({"format": 1, "table": {"items": [1, 2]}})

    assert snapshot.load() == {"format": 1, "table": {"items": [1, 2]}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]

    snapshot.path.write_text("{truncated")
    assert snapshot.load() is None
    assert [p.name.startswith("state.json.unreadable-") for p in tmp_path.iterdir()] == [True]


def test_the_banner_command_is_the_venvs_entry_point_unless_it_is_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    for name in ("offpath", "activate", "python"):
        (venv_bin / name).write_text("#!/bin/sh\n")
        (venv_bin / name).chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.chdir(tmp_path)

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert cli_command() == (".venv/bin/offpath", "source .venv/bin/activate")

    monkeypatch.setenv("PATH", f"{venv_bin}{os.pathsep}/usr/bin")
    assert cli_command() == ("offpath", "")


def test_a_snapshot_made_before_the_tables_sort_key_restores_only_the_items_that_fit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    written: list[dict[str, Any]] = []
    sources = StateSources(
        scheduler=None,
        table_name="jobs",
        queue_names=(),
        schedule_group="g",
        declared_schedules=frozenset(),
        read_items=lambda table: [],
        write_items=lambda table, items: written.extend(items) or len(items),
        read_messages=lambda name: None,
        write_messages=lambda name, records: 0,
        alarm_states=dict,
    )
    fits = {"pk": {"S": "JOB#tenant-a#3"}, "sk": {"S": "0" * 32}}
    old = {"pk": {"S": "JOB#" + "0" * 32}}

    restore(sources, {"table": {"items": [fits, old]}})

    assert written == [fits]
    assert "1 items of a snapshot made before the table's sort key were left out" in caplog.text
