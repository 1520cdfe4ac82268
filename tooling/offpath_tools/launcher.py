"""`offpath local` in a child process, as tests and benchmarks start it: on a free loopback port, with its data
directory of their choosing, serving once `GET /health` answers, stopped with SIGTERM (it must exit 0)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT_S = 45
STOP_TIMEOUT_S = 30


@dataclass
class OffpathLocal:
    process: subprocess.Popen[bytes]
    url: str
    data_dir: Path
    console: Path

    @classmethod
    def start(
        cls,
        data_dir: Path,
        *,
        tokens: Mapping[str, str] = {},
        admins: Sequence[str] = (),
        load: Sequence[str] = (),
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        webhook_ports: Sequence[int] = (),
    ) -> OffpathLocal:
        """`tokens`: tenant -> bearer token; `load`: modules imported for their job types and schedules;
        `args`: any other options of `offpath local`; `env`: added to this process's environment;
        `webhook_ports`: the 127.0.0.1 ports where its webhook receivers may listen (`--webhook-port`)."""
        data_dir.mkdir(parents=True, exist_ok=True)
        console = data_dir / "console.txt"
        command = [sys.executable, "-m", "offpath_local", "local", "--port", "0", "--data", str(data_dir)]
        for tenant, token in tokens.items():
            command += ["--token", f"{tenant}:{token}"]
        for tenant in admins:
            command += ["--admin", tenant]
        for module in load:
            command += ["--load", module]
        for port in webhook_ports:
            command += ["--webhook-port", str(port)]
        command += list(args)
        with console.open("w") as out:
            process = subprocess.Popen(
                command, cwd=cwd, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT
            )
        try:
            url = wait_until_serving(process, data_dir, console)
        except BaseException:
            process.kill()
            process.wait(timeout=10)
            raise
        return cls(process, url, data_dir, console)

    def stop(self) -> None:
        """SIGTERM; it must stop cleanly (exit status 0)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
                raise AssertionError(f"offpath local did not stop on SIGTERM:\n{self.tail()}") from None
        assert self.process.returncode == 0, f"offpath local exited with {self.process.returncode}:\n{self.tail()}"

    def tail(self, chars: int = 4000) -> str:
        return self.console.read_text(errors="replace")[-chars:] if self.console.exists() else ""


def free_loopback_port() -> int:
    """A port of 127.0.0.1 free now (for a receiver started after the runtime that must name it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_serving(process: subprocess.Popen[bytes], data_dir: Path, console: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    state = data_dir / "local.json"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"offpath local exited with {process.returncode}:\n{console.read_text()[-4000:]}")
        if state.exists():
            try:
                url = str(json.loads(state.read_text())["url"])
                connection = http.client.HTTPConnection(urllib.parse.urlsplit(url).netloc, timeout=5)
                try:
                    connection.request("GET", "/health")
                    if connection.getresponse().status == 200:
                        return url
                finally:
                    connection.close()
            except (ValueError, KeyError, OSError):
                pass
        time.sleep(0.05)
    raise RuntimeError(f"offpath local did not start within {START_TIMEOUT_S} s:\n{console.read_text()[-4000:]}")
