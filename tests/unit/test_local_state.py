"""The local runtime's data directory: its lock, its snapshot file, and the command line the banner prints."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from offpath_local.journal import Journal, apply
from offpath_local.runtime import cli_command
from offpath_local.state import (
    DataDirectoryInUse,
    DataLock,
    Snapshot,
    StateSources,
    UnreadableSnapshot,
    empty_state,
    restore,
)


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


def test_the_snapshot_is_replaced_whole_and_an_unreadable_one_stops_the_start_naming_it_and_fresh(
    tmp_path: Path,
) -> None:
    snapshot = Snapshot(tmp_path)
    snapshot.write({"format": 1, "table": {"items": [1]}})
    snapshot.write({"format": 1, "table": {"items": [1, 2]}})

    assert snapshot.load() == {"format": 1, "table": {"items": [1, 2]}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]

    snapshot.path.write_text('{"format": 1, "table": {"items": [1, ')
    with pytest.raises(UnreadableSnapshot) as refused:
        snapshot.load()
    assert str(snapshot.path) in str(refused.value)
    assert "--fresh" in str(refused.value)
    # Left as it was, for its owner to repair.
    assert snapshot.path.read_text() == '{"format": 1, "table": {"items": [1, '


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


def _sources(written: list[dict[str, Any]]) -> StateSources:
    return StateSources(
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


def test_a_restore_counts_jobs_as_jobs_and_the_tables_other_items_as_records() -> None:
    job_item = {"pk": {"S": "JOB#tenant-a#3"}, "sk": {"S": "0" * 32}}
    once_mark = {"pk": {"S": "ONCE#tenant-a#job#welcome"}, "sk": {"S": "#"}}
    key = {"pk": {"S": "IDEM#tenant-a#k1"}, "sk": {"S": "#"}}

    restored = restore(_sources([]), {"table": {"items": [job_item, once_mark, key]}})

    assert (restored["jobs"], restored["records"]) == (1, 2)


KEY = ("pk", "sk")


def _message(message_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": message_id, "body": message_id, "approximate_receive_count": 0, "visible_at": 0.0, **fields}


def test_the_journal_replayed_over_a_snapshot_gives_the_last_state_of_each_item_message_and_schedule() -> None:
    item = {"pk": {"S": "JOB#t#1"}, "sk": {"S": "a"}, "status": {"S": "QUEUED"}}
    done = {**item, "status": {"S": "SUCCEEDED"}}
    snapshot = {
        **empty_state("jobs"),
        "table": {"name": "jobs", "items": [item]},
        "queues": {"q": [_message("m1")]},
        "schedules": [{"Name": "job-x", "ScheduleExpression": "at(2030-01-01T00:00:00)"}],
    }
    records = [
        {"k": "item", "table": "jobs", "key": {"pk": item["pk"], "sk": item["sk"]}, "item": done},
        {"k": "item", "table": "other", "key": {"pk": {"S": "x"}, "sk": {"S": "#"}}, "item": {"pk": {"S": "x"}}},
        {"k": "msg", "queue": "q", "m": _message("m2")},
        {"k": "recv", "id": "m2", "fields": {"approximate_receive_count": 1, "visible_at": 5.0}},
        {"k": "del", "queue": "q", "id": "m1"},
        {"k": "msg", "queue": "q-dlq", "m": _message("m2", approximate_receive_count=3)},  # moved to its DLQ
        {"k": "sched", "group": "g", "name": "job-x", "s": None},
        {"k": "sched", "group": "g", "name": "job-y", "s": {"Name": "job-y"}},
        {"k": "sched", "group": "other", "name": "job-z", "s": {"Name": "job-z"}},
    ]

    once = json.loads(json.dumps(snapshot))
    apply(once, records, KEY, "g")
    twice = json.loads(json.dumps(once))
    apply(twice, records, KEY, "g")  # a crash between a snapshot and the removal of the files it covers

    assert once["table"]["items"] == [done]
    assert once["queues"] == {"q": [], "q-dlq": [_message("m2", approximate_receive_count=3)]}
    assert once["schedules"] == [{"Name": "job-y"}]
    assert twice == once


def test_a_record_cut_short_by_a_crash_is_not_replayed_and_a_rotation_keeps_every_record(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.start()
    journal.wait(journal.append({"k": "del", "queue": "q", "id": "m1"}))
    segment = journal.rotate()
    journal.wait(journal.append({"k": "del", "queue": "q", "id": "m2"}))
    journal.stop()
    with open(journal.path(segment), "ab") as file:
        file.write(b'{"k":"del","queue":"q","id":"m3"')  # no end of line: never acknowledged

    assert [r["id"] for r in journal.records()] == ["m1", "m2"]
    journal.remove_before(segment)
    assert [r["id"] for r in journal.records()] == ["m2"]
    assert oct(journal.path(segment).stat().st_mode & 0o777) == "0o600"
