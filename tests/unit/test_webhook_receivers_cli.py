"""`offpath local --webhook-port`: the ports of 127.0.0.1 where webhook receivers may listen, checked at the
command line (the API's own port can never be one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offpath.settings import Settings
from offpath_local.cli import USAGE, main
from offpath_local.runtime import LocalConfig, LocalRuntime, ReceiverPortTaken


@pytest.mark.parametrize(
    "args", [["--webhook-port", "8000"], ["--port", "9000", "--webhook-port", "9000"], ["--webhook-port", "0"]]
)
def test_the_apis_port_or_no_port_is_refused_as_a_receiver_port(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["local", *args])

    assert code == USAGE
    err = capsys.readouterr().err
    assert "--webhook-port must be a port from 1 to 65535, other than the API's --port" in err
    assert "Traceback" not in err


def test_the_named_ports_reach_the_functions_settings() -> None:
    settings = Settings(table_name="t", loopback_receiver_ports="9000,9001")

    assert settings.loopback_receiver_ports == frozenset({9000, 9001})
    assert Settings(table_name="t", loopback_receiver_ports="").loopback_receiver_ports == set()


def test_the_emulators_port_can_never_be_named_for_receivers(tmp_path: Path) -> None:
    runtime = LocalRuntime(LocalConfig(data_dir=tmp_path / "offpath", port=0, webhook_ports=(9000, 5555)))
    runtime.emulator.port = 5555  # the port the emulator took

    with pytest.raises(ReceiverPortTaken, match="--webhook-port 5555 is one of the runtime's own ports"):
        runtime._receiver_ports(runtime.config)
    runtime.emulator.port = 5556
    assert runtime._receiver_ports(runtime.config) == "5555,9000"
