"""Where the runtime's output goes.

In Lambda, a function's stdout is its log. Here the functions share one process, so its stdout is
routed to the log file under the data directory (or to the console with `--verbose`): the handlers'
structured JSON lines, their EMF metric lines and anything a job function prints. Each JSON line
names the function that wrote it in `service`, as its own log group would. The console keeps the
runtime's own messages: where it listens, one line per job state change, alarm changes.

The EMF metric lines the functions print are also handed, parsed, to the listeners given to
`on_metrics` (the runtime's aggregation behind `/metrics`), as CloudWatch extracts them from a log.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from offpath.observability import JsonFormatter

EMF_PREFIX = '{"_aws"'
MetricsListener = Callable[[dict[str, Any]], None]

FUNCTION: contextvars.ContextVar[str] = contextvars.ContextVar("offpath_local_function", default="local")


@contextlib.contextmanager
def invocation(function_name: str) -> Iterator[None]:
    """Marks the log lines written while a function runs as that function's."""
    token = FUNCTION.set(function_name)
    try:
        yield
    finally:
        FUNCTION.reset(token)


class _LockedWriter(io.TextIOBase):
    """A text stream several threads can write whole lines to."""

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            written = self.target.write(text)
            if text.endswith("\n"):
                self.target.flush()
            return written

    def flush(self) -> None:
        with self.lock:
            self.target.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.target.isatty()


class _MetricLines(io.TextIOBase):
    """The functions' stdout: written through to `target`; each EMF line (observability.EmfMetrics writes
    one whole line per write) is also parsed and given to the listeners."""

    def __init__(self, target: TextIO, listeners: list[MetricsListener]) -> None:
        self.target = target
        self.listeners = listeners

    def write(self, text: str) -> int:
        written = self.target.write(text)
        if text.startswith(EMF_PREFIX) and self.listeners:
            for line in text.splitlines():
                try:
                    document = json.loads(line)
                except ValueError:
                    continue
                for listener in self.listeners:
                    try:
                        listener(document)
                    except Exception:
                        logging.getLogger("offpath.local.output").exception("a metrics listener failed")
        return written

    def flush(self) -> None:
        self.target.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.target.isatty()


class _FunctionLogHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """JSON lines with the invoking function as `service`. The handlers' own `configure_logging` finds
    this handler (it carries the `offpath` mark) and would set one formatter for the whole process:
    the per-function formatters are kept instead."""

    offpath = True

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._formatters: dict[str, logging.Formatter] = {}

    def format(self, record: logging.LogRecord) -> str:
        name = FUNCTION.get()
        formatter = self._formatters.get(name)
        if formatter is None:
            formatter = JsonFormatter(name)
            formatter.converter = time.gmtime
            self._formatters[name] = formatter
        return formatter.format(record)

    def setFormatter(self, fmt: logging.Formatter | None) -> None:
        pass


class _ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        text = f"{stamp}  {record.levelname:<9}  {record.getMessage()}"
        if record.exc_info and record.levelno >= logging.ERROR:
            lines = self.formatException(record.exc_info).strip().splitlines()
            text += f"  ({lines[-1]})" if lines else ""
        return text


class Output:
    def __init__(self, data_dir: Path, *, verbose: bool = False, level: str = "INFO") -> None:
        self.data_dir = data_dir
        self.verbose = verbose
        self.level = level
        self.log_path = data_dir / "offpath.log"
        self.console: TextIO = sys.stdout
        self._saved_stdout: TextIO | None = None
        self._log_file: TextIO | None = None
        self._handlers: list[tuple[logging.Logger, logging.Handler]] = []
        self._saved_levels: dict[str, int] = {}
        self._metrics_listeners: list[MetricsListener] = []

    def on_metrics(self, listener: MetricsListener) -> None:
        """`listener` gets every EMF document the functions print from now on."""
        self._metrics_listeners.append(listener)

    def install(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.log_path.exists():
            self.log_path.replace(self.log_path.with_name(self.log_path.name + ".1"))
        self._saved_stdout = sys.stdout
        console = _LockedWriter(sys.stdout)
        self.console = console
        if self.verbose:
            sink: TextIO = console
        else:
            self._log_file = self.log_path.open("a", encoding="utf-8")
            sink = _LockedWriter(self._log_file)
        sys.stdout = _MetricLines(sink, self._metrics_listeners)
        root = logging.getLogger()
        self._saved_levels["root"] = root.level
        function_handler = _FunctionLogHandler(sink)
        self._add(root, function_handler)
        root.setLevel(self.level)
        # The runtime's own warnings also reach the console.
        local = logging.getLogger("offpath.local")
        console_handler = logging.StreamHandler(console)
        console_handler.setLevel(logging.WARNING)
        console_handler.setFormatter(_ConsoleFormatter())
        self._add(local, console_handler)

    def _add(self, logger: logging.Logger, handler: logging.Handler) -> None:
        logger.addHandler(handler)
        self._handlers.append((logger, handler))

    def say(self, text: str) -> None:
        """One line (or several) on the console."""
        self.console.write(text.rstrip("\n") + "\n")

    def restore(self, *, keep_function_log: bool = False) -> None:
        """Puts stdout and logging back as they were. With `keep_function_log`, the functions' log lines (of
        batches given up at stop, still running) keep going to the log file rather than to the console,
        until the process ends."""
        for logger, handler in self._handlers:
            if keep_function_log and isinstance(handler, _FunctionLogHandler):
                continue
            logger.removeHandler(handler)
        self._handlers.clear()
        if "root" in self._saved_levels and not keep_function_log:
            logging.getLogger().setLevel(self._saved_levels.pop("root"))
        if self._saved_stdout is not None:
            sys.stdout.flush()
            sys.stdout = self._saved_stdout
            self._saved_stdout = None
        if self._log_file is not None and not keep_function_log:
            self._log_file.close()
        self._log_file = None
