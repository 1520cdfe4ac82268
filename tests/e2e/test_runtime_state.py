"""The embedded runtime keeps its state and stops cleanly (TESTPLAN 40): jobs, messages and one-time schedules
survive a clean restart, a second instance on the same data directory refuses without touching it, SIGTERM
with a job in flight exits 0 without a traceback and the interrupted job is recovered at the next start.

Each test runs `offpath local` in child processes on one data directory, stopped with SIGTERM as a user's
Ctrl-C or a service manager would.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from offpath_tools.launcher import wait_until_serving
from tests.e2e.conftest import ROOT, Local, wait_for

TENANT, TOKEN = "state", "state-token-0123456789"
FINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
# Test timings: an interrupted 60 s job holds a 9 s lease and its message an 11 s visibility.
TEST_TIMINGS = ("--timeout-scale", "0.1", "--visibility-scale", "0.025")


@dataclass
class Instance:
    process: subprocess.Popen[bytes]
    local: Local

    @property
    def console(self) -> str:
        return self.local.log.read_text(errors="replace")

    def stop(self, timeout_s: float = 30) -> tuple[int, float]:
        """SIGTERM; the exit status and how long it took."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
            raise AssertionError(f"offpath local did not stop on SIGTERM:\n{self.console[-4000:]}") from None
        return code, time.monotonic() - started


def command(data_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "offpath_local",
        "local",
        "--port",
        "0",
        "--data",
        str(data_dir),
        "--token",
        f"{TENANT}:{TOKEN}",
        "--alarm-interval",
        "0.5",
        *extra,
    ]


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **extra}


def start(data_dir: Path, console: Path, *extra: str, env: dict[str, str] | None = None) -> Instance:
    with console.open("w") as out:
        process = subprocess.Popen(
            command(data_dir, *extra), cwd=ROOT, env=env or environment(), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        url = wait_until_serving(process, data_dir, console)
    except BaseException:
        process.kill()
        process.wait(timeout=10)
        raise
    return Instance(process, Local(url=url, data_dir=data_dir, log=console))


@pytest.fixture
def instances() -> Iterator[list[Instance]]:
    """Every instance a test starts is stopped at its end, whatever happened."""
    started: list[Instance] = []
    yield started
    for instance in started:
        if instance.process.poll() is None:
            instance.process.kill()
            instance.process.wait(timeout=10)


def submit(local: Local, job_type: str, payload: dict[str, Any], **body: Any) -> str:
    answer = local.call("POST", "/jobs", token=TOKEN, body={"type": job_type, "payload": payload, **body})
    assert answer.status == 202, answer.body
    return str(answer.body["job_id"])


def job(local: Local, job_id: str) -> dict[str, Any]:
    return local.job(job_id, token=TOKEN)


def final(local: Local, job_id: str, timeout_s: float = 60) -> dict[str, Any]:
    return local.wait_for_job(job_id, FINAL, timeout_s=timeout_s, token=TOKEN)


def queue(local: Local, name: str) -> dict[str, Any]:
    answer = local.call("GET", "/queues", token=TOKEN)
    assert answer.status == 200, answer.body
    return next(q for q in answer.body["queues"] if q["name"] == name)


def test_a_restart_keeps_every_accepted_job_its_message_and_its_one_time_schedule(
    tmp_path: Path, instances: list[Instance]
) -> None:
    data_dir = tmp_path / "data"
    # The scheduler clock at 60 times real speed: a job 30 minutes ahead is due 30 s after a start.
    clock = ("--clock-speed", "60", "--clock-tick", "0.2")
    first = start(data_dir, tmp_path / "console-1.txt", *clock)
    instances.append(first)
    local = first.local
    echo = submit(local, "demo.echo", {"kept": True})
    poison = submit(local, "demo.poison", {"reason": "kept in the DLQ"})
    assert final(local, echo)["status"] == "SUCCEEDED"
    assert final(local, poison)["status"] == "FAILED"
    now = datetime.now(UTC)
    # Beyond SQS's 15 minutes: a one-time schedule; within them: a delayed message.
    scheduled = submit(local, "demo.echo", {"scheduled": True}, run_at=_iso(now + timedelta(minutes=30)))
    delayed = submit(local, "demo.echo", {"delayed": True}, run_at=_iso(now + timedelta(seconds=40)))
    in_flight = submit(local, "demo.sleep", {"ms": 2000})
    local.wait_for_job(in_flight, {"RUNNING"}, token=TOKEN)
    # Accepted just before the stop: queued, or received by a worker, when SIGTERM arrives.
    last = [submit(local, "demo.sleep", {"ms": 300, "n": n}) for n in range(6)]
    assert (job(local, scheduled)["status"], job(local, delayed)["status"]) == ("SCHEDULED", "QUEUED")

    code, _ = first.stop()

    assert code == 0, first.console[-4000:]
    assert "Traceback" not in first.console
    state = json.loads((data_dir / "state.json").read_text())
    assert [s["Name"] for s in state["schedules"]] == [f"job-{scheduled}"]
    assert not (data_dir / "local.json").exists()

    second = start(data_dir, tmp_path / "console-2.txt", *clock)
    instances.append(second)
    local = second.local
    assert "restored" in second.console
    kept = job(local, echo)
    assert (kept["status"], kept["result"]) == ("SUCCEEDED", {"kept": True})
    assert job(local, poison)["status"] == "FAILED"
    assert queue(local, "default")["dlq_depth"] == 1
    # Finished within the grace period, recorded before the stop: not run again.
    assert (job(local, in_flight)["status"], job(local, in_flight)["attempts"]) == ("SUCCEEDED", 1)
    assert [final(local, j)["status"] for j in last] == ["SUCCEEDED"] * len(last)
    # The delayed message and the one-time schedule survived the restart: each job runs at its time.
    assert job(local, delayed)["status"] == "QUEUED"
    assert final(local, delayed, timeout_s=90)["result"] == {"delayed": True}
    # (The functions keep real time: the job the fast clock enqueues early waits in its queue for its run_at.)
    assert local.wait_for_job(scheduled, {"QUEUED"}, timeout_s=90, token=TOKEN)["status"] == "QUEUED"
    firings = [json.loads(line) for line in (data_dir / "schedules.jsonl").read_text().splitlines()]
    assert f"job-{scheduled}" in {f["schedule"] for f in firings}
    assert second.stop()[0] == 0

    third = start(data_dir, tmp_path / "console-3.txt", "--fresh")
    instances.append(third)
    assert third.local.call("GET", f"/jobs/{echo}", token=TOKEN).status == 404
    assert third.stop()[0] == 0


def test_a_second_instance_on_the_same_data_directory_refuses_and_changes_nothing(
    tmp_path: Path, instances: list[Instance]
) -> None:
    data_dir = tmp_path / "data"
    running = start(data_dir, tmp_path / "console-1.txt")
    instances.append(running)
    wait_for(lambda: (data_dir / "state.json").exists() or None, timeout_s=20)
    server_file = (data_dir / "local.json").read_bytes()
    before = {p.name: p.stat().st_mtime_ns for p in data_dir.iterdir() if p.name in {"local.json", "token", "lock"}}
    log_inode = (data_dir / "offpath.log").stat().st_ino
    port = running.local.url.rsplit(":", 1)[1]

    second = subprocess.run(
        [*command(data_dir), "--port", port], cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=60
    )

    assert second.returncode == 1
    assert f"the data directory {data_dir} is in use by another offpath local" in second.stderr
    assert running.local.url in second.stderr
    assert "Traceback" not in second.stderr
    assert (data_dir / "local.json").read_bytes() == server_file
    after = {p.name: p.stat().st_mtime_ns for p in data_dir.iterdir() if p.name in {"local.json", "token", "lock"}}
    assert after == before
    assert (data_dir / "offpath.log").stat().st_ino == log_inode
    assert not (data_dir / "offpath.log.1").exists()
    # The command line still reaches the instance that runs.
    from offpath_local.cli import main

    assert main(["jobs", "--data", str(data_dir)]) == 0
    assert running.stop()[0] == 0


def test_sigterm_with_a_job_running_exits_0_after_the_grace_period_and_the_next_start_finishes_the_job(
    tmp_path: Path, instances: list[Instance]
) -> None:
    data_dir = tmp_path / "data"
    timings = (*TEST_TIMINGS, "--clock-speed", "60", "--clock-tick", "0.2")
    env = environment(OFFPATH_SWEEP_GRACE_S="2")
    first = start(data_dir, tmp_path / "console-1.txt", *timings, "--stop-grace", "1", env=env)
    instances.append(first)
    # 4 s of work: still running when the 1 s grace period ends.
    job_id = submit(first.local, "demo.sleep", {"ms": 4000})
    first.local.wait_for_job(job_id, {"RUNNING"}, token=TOKEN)

    code, took_s = first.stop()

    assert code == 0, first.console[-4000:]
    assert took_s < 8, f"stopping took {took_s:.1f} s"
    assert "Traceback" not in first.console
    assert "Error" not in first.console.split("offpath local: stopping", 1)[1]
    assert "1 batch(es) still running after 1 s" in first.console
    state = json.loads((data_dir / "state.json").read_text())
    saved = next(i for i in state["table"]["items"] if job_id in json.dumps(i))
    assert saved["status"]["S"] == "RUNNING"
    assert [m["approximate_receive_count"] for m in state["queues"]["offpath-default"]] == [1]

    second = start(data_dir, tmp_path / "console-2.txt", *timings, env=env)
    instances.append(second)
    view = final(second.local, job_id, timeout_s=90)

    assert view["status"] == "SUCCEEDED"
    assert view["attempts"] >= 2
    assert second.stop()[0] == 0


def test_the_banner_prints_a_command_line_that_works_as_printed(tmp_path: Path, instances: list[Instance]) -> None:
    data_dir = tmp_path / "data"
    running = start(data_dir, tmp_path / "console.txt")
    instances.append(running)
    printed = wait_for(
        lambda: next((line.strip() for line in running.console.splitlines() if " submit demo.echo" in line), None)
    )

    assert f"--data {data_dir}" in printed
    done = subprocess.run(
        ["bash", "-c", printed], cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert "SUCCEEDED" in done.stdout
    assert running.stop()[0] == 0


def test_an_empty_queue_has_no_oldest_message_age(local: Local) -> None:
    """The age is that of a message that exists: none once the queue is empty again, not the last one measured."""
    # Long enough for a loaded machine's reads to find it running (at 1.5 s, one CI run's reads did not).
    job_id = local.submit("demo.sleep", {"ms": 6000}).body["job_id"]
    local.wait_for_job(job_id, {"RUNNING"})
    assert wait_for(lambda: _age(local, "default"), timeout_s=10) >= 0  # its message is in flight: it has an age
    local.wait_for_job(job_id, {"SUCCEEDED"})

    # Before, the age of the last minute's oldest message was read for a minute and more.
    assert wait_for(lambda: _age(local, "default") is None or None, timeout_s=5)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _age(local: Local, name: str) -> float | None:
    for q in local.call("GET", "/queues").body["queues"]:
        if q["name"] == name:
            age = q["oldest_age_s"]
            return None if age is None else float(age)
    return None


def test_sigkill_under_load_loses_no_accepted_job_runs_no_finished_job_again_and_keeps_every_once_mark(
    tmp_path: Path, instances: list[Instance]
) -> None:
    """A 202 means durable, a crash included: 4 clients submit 60 jobs (half record each run, half send an e-mail
    guarded by `ctx.once`); SIGKILL when half are accepted; the restart on the same data directory finds every
    accepted job and finishes it, runs none that had finished again, and sends no e-mail twice."""
    from offpath_tools.ledger import EFFECTS_ENV, EFFECTS_FILE, timing_options

    data_dir = tmp_path / "data"
    env = environment(**{EFFECTS_ENV: str(data_dir / EFFECTS_FILE), "OFFPATH_SWEEP_GRACE_S": "2"})
    # The fault ledger's timings: a batch the kill left in flight comes back after ~23 s (default), not 74 s.
    load = ("--load", "offpath_tools.ledger_jobs", *timing_options(), "--quiet")
    first = start(data_dir, tmp_path / "console-1.txt", *load, env=env)
    instances.append(first)
    accepted: dict[str, str] = {}  # job id -> the tag or e-mail address its effect names
    killed = threading.Event()

    def client(number: int) -> None:
        for n in range(15):
            name = f"c{number}-{n}"
            job_type, payload = (
                ("e2e.batch_effect", {"tag": name})
                if n % 2
                else ("send_welcome_email", {"user_id": name, "email": f"{name}@example.com"})
            )
            try:
                answer = first.local.call("POST", "/jobs", token=TOKEN, body={"type": job_type, "payload": payload})
            except (OSError, http.client.HTTPException):
                return  # the runtime is gone: this submit was never answered (or its answer was cut off)
            if killed.is_set():
                return
            if answer.status == 202:
                accepted[str(answer.body["job_id"])] = payload.get("tag") or payload["email"]

    finished: set[str] = set()  # jobs a caller saw SUCCEEDED before the crash (what it reads is on disk)

    def watcher() -> None:
        while not killed.is_set():
            for j in [j for j in list(accepted) if j not in finished]:
                with contextlib.suppress(OSError, http.client.HTTPException):
                    if job(first.local, j)["status"] == "SUCCEEDED" and not killed.is_set():
                        finished.add(j)

    threads = [threading.Thread(target=client, args=(number,)) for number in range(4)]
    threads.append(threading.Thread(target=watcher))
    for thread in threads:
        thread.start()
    wait_for(lambda: (len(accepted) >= 30 and len(finished) >= 5) or None, timeout_s=60)
    killed.set()
    first.process.kill()
    first.process.wait(timeout=10)
    for thread in threads:
        thread.join(timeout=30)
    effects_before = len((data_dir / EFFECTS_FILE).read_text().splitlines())

    second = start(data_dir, tmp_path / "console-2.txt", *load, env=env)
    instances.append(second)
    local = second.local
    views = {j: final(local, j, timeout_s=90) for j in accepted}

    assert len(accepted) >= 30
    assert {j: v["status"] for j, v in views.items()} == dict.fromkeys(accepted, "SUCCEEDED")
    effects = [json.loads(line) for line in (data_dir / EFFECTS_FILE).read_text().splitlines()]
    ran_again = [e["tag"] for e in effects[effects_before:] if e.get("effect") == "run"]
    assert [accepted[j] for j in finished if accepted[j] in ran_again] == []
    emails = Counter(e["to"] for e in effects if e.get("effect") == "welcome-email")
    assert [to for to, sent in emails.items() if sent > 1] == []
    assert second.stop()[0] == 0
    print(f"accepted {len(accepted)}, finished before the kill {len(finished)}, e-mails {sum(emails.values())}")


def test_a_truncated_snapshot_stops_the_start_with_an_error_naming_it_and_fresh(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    damaged = '{"format": 1, "queues": {}, "table": {"name": "offpath-jobs", "items": [{"pk": '
    (data_dir / "state.json").write_text(damaged)

    refused = subprocess.run(command(data_dir), cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=60)

    assert refused.returncode == 1
    assert f"the saved state {data_dir / 'state.json'} cannot be read" in refused.stderr
    assert "--fresh" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (data_dir / "state.json").read_text() == damaged
    assert not (data_dir / "local.json").exists()  # nothing was served


def test_the_data_directory_is_private_and_the_emulator_answers_only_the_runtime(
    tmp_path: Path, instances: list[Instance]
) -> None:
    import http.client

    data_dir = tmp_path / "data"
    running = start(data_dir, tmp_path / "console-1.txt")
    instances.append(running)
    job_id = submit(running.local, "demo.echo", {"private": True})
    assert final(running.local, job_id)["status"] == "SUCCEEDED"
    wait_for(lambda: (data_dir / "events.jsonl").exists() or None)
    emulator = running.console.split("emulator   http://", 1)[1].split()[0]
    host, port = emulator.split(":")

    answers = []
    for method, path, headers in (
        ("POST", "/moto-api/reset", {}),
        ("POST", "/", {"X-Amz-Target": "DynamoDB_20120810.DeleteTable", "Content-Type": "application/x-amz-json-1.0"}),
    ):
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request(method, path, body=b'{"TableName": "offpath-jobs"}', headers=headers)
        response = connection.getresponse()
        answers.append((response.status, json.loads(response.read())["error"]["code"]))
        connection.close()

    assert answers == [(403, "forbidden"), (403, "forbidden")]
    assert job(running.local, job_id)["status"] == "SUCCEEDED"  # nothing changed
    assert oct(data_dir.stat().st_mode & 0o777) == "0o700"
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in data_dir.iterdir() if p.is_file()}
    assert {"events.jsonl", "offpath.log", "local.json", "lock"} <= set(modes)
    assert {name: mode for name, mode in modes.items() if mode != "0o600"} == {}
    assert running.stop()[0] == 0


def test_a_job_left_running_by_a_killed_runtime_is_recovered_at_the_next_start_not_at_its_lease_end(
    tmp_path: Path, instances: list[Instance]
) -> None:
    """Real timings: the job's lease is the worker's 12 minutes and more. After kill -9 the next start ends the
    leases the dead run held (no worker of its own can hold one) and the sweeper requeues the job at once."""
    data_dir = tmp_path / "data"
    first = start(data_dir, tmp_path / "console-1.txt")
    instances.append(first)
    job_id = submit(first.local, "demo.sleep", {"ms": 20_000})
    running = first.local.wait_for_job(job_id, {"RUNNING"}, token=TOKEN)
    lease_until = datetime.fromisoformat(running["lease_until"])
    assert lease_until - datetime.now(UTC) > timedelta(minutes=5)
    shown = subprocess.run(
        [sys.executable, "-m", "offpath_local", "status", job_id, "--data", str(data_dir)],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert f"lease_until      {running['lease_until']}" in shown.stdout.splitlines()
    first.process.kill()
    first.process.wait(timeout=10)

    second = start(data_dir, tmp_path / "console-2.txt")
    instances.append(second)
    # Long before the 12-minute lease would end: attempt 2 runs on a new lease, then the job succeeds.
    again = wait_for(
        lambda: ((j := job(second.local, job_id))["attempts"] == 2 and j["status"] == "RUNNING" and j) or None,
        timeout_s=90,
    )
    view = final(second.local, job_id, timeout_s=90)

    assert "1 job(s) left RUNNING by the previous run: leases ended, requeued now" in second.console
    assert datetime.fromisoformat(again["lease_until"]) > datetime.now(UTC)
    assert view["status"] == "SUCCEEDED"
    assert [a["outcome"] for a in view["attempt_history"]] == ["LEASE_EXPIRED", "SUCCEEDED"]
    assert view["lease_until"] is None
    assert second.stop()[0] == 0


def test_after_a_restart_each_alarm_keeps_the_reason_of_its_state_and_the_recent_changes(
    tmp_path: Path, instances: list[Instance]
) -> None:
    data_dir = tmp_path / "data"
    first = start(data_dir, tmp_path / "console-1.txt")
    instances.append(first)
    job_id = submit(first.local, "demo.poison", {"reason": "for the alarm"})
    assert final(first.local, job_id)["status"] == "FAILED"
    wait_for(lambda: first.local.alarm_state("offpath-default-dlq-depth") == "ALARM" or None, timeout_s=60)
    before = first.local.call("GET", "/alarms", token=TOKEN).body
    fired = next(a for a in before["alarms"] if a["name"] == "offpath-default-dlq-depth")
    assert first.stop()[0] == 0

    second = start(data_dir, tmp_path / "console-2.txt")
    instances.append(second)
    after = second.local.call("GET", "/alarms", token=TOKEN).body

    alarm = next(a for a in after["alarms"] if a["name"] == "offpath-default-dlq-depth")
    assert alarm["state"] == "ALARM"
    assert alarm["reason"].startswith(fired["reason"]) and "kept across a restart" in alarm["reason"]
    assert [a["name"] for a in after["alarms"] if not a["reason"] or "unknown" in a["reason"].lower()] == []
    assert any(
        c["alarm"] == "offpath-default-dlq-depth" and c["new_state"] == "ALARM" and c["reason"] == fired["reason"]
        for c in after["changes"]
    )
    assert second.stop()[0] == 0


def test_the_start_banner_lists_the_quotas_in_force(tmp_path: Path, instances: list[Instance]) -> None:
    quota = f"{TENANT}:submits_per_s=5,open_jobs=10"
    running = start(tmp_path / "data", tmp_path / "console.txt", "--quota", quota, "--quota", "*:open_jobs=100")
    instances.append(running)

    line = wait_for(lambda: next((x for x in running.console.splitlines() if x.strip().startswith("quotas ")), None))

    assert line.split(None, 1)[1] == f"*:open_jobs=100; {quota}"
    assert running.stop()[0] == 0


def test_a_start_on_a_busy_port_fails_naming_it_and_leaves_no_data_directory(tmp_path: Path) -> None:
    import socket

    from offpath_local.cli import REFUSED

    data_dir = tmp_path / "never-made"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = command(data_dir)
        args[args.index("--port") + 1] = str(port)
        done = subprocess.run(args, cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=120)

    assert done.returncode == REFUSED, done.stderr
    assert "offpath local: cannot start:" in done.stderr and "Address already in use" in done.stderr
    assert "is another program using this port? try --port" in done.stderr
    assert "Traceback" not in done.stderr
    assert not data_dir.exists()


def test_a_paused_queue_stays_paused_across_a_restart_and_runs_its_jobs_once_resumed(
    tmp_path: Path, instances: list[Instance]
) -> None:
    data_dir = tmp_path / "data"
    first = start(data_dir, tmp_path / "console-1.txt")
    instances.append(first)
    paused = first.local.call("POST", "/queues/default/pause", token=TOKEN, body={"reason": "restart"})
    assert paused.status == 200, paused.body
    waiting = submit(first.local, "demo.echo", {"waits": True})
    assert first.stop()[0] == 0

    second = start(data_dir, tmp_path / "console-2.txt")
    instances.append(second)
    local = second.local
    shown = queue(local, "default")
    time.sleep(2)  # the restarted pollers would have taken the job by now, were the queue not paused

    assert (shown["paused"], shown["paused_at"], shown["pause_reason"]) == (True, paused.body["paused_at"], "restart")
    assert (job(local, waiting)["status"], job(local, waiting)["attempts"]) == ("QUEUED", 0)
    assert local.call("POST", "/queues/default/resume", token=TOKEN).status == 200
    assert (final(local, waiting)["status"], job(local, waiting)["attempts"]) == ("SUCCEEDED", 1)
    assert second.stop()[0] == 0
