"""The SnapStart hook: after a restore every generator draws anew and every client opens new connections."""

from __future__ import annotations

import random
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from offpath import snapstart


@pytest.fixture(autouse=True)
def fresh_hook_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(snapstart, "_clients", [])
    monkeypatch.setattr(snapstart, "_generators", [])
    monkeypatch.setattr(snapstart, "_registered", False)
    yield


class PooledClient:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_after_a_restore_the_generators_draw_differently_and_the_clients_drop_their_connections() -> None:
    # Two environments restored from one snapshot hold the same generator state.
    snapshot = random.Random(42)
    first, second = random.Random(), random.Random()
    first.setstate(snapshot.getstate())
    second.setstate(snapshot.getstate())
    client = PooledClient()
    snapstart.track_generator(first)
    snapstart.track_client(client)
    snapstart.track_client(None)  # a store without a client of its own is left alone

    snapstart.after_restore()

    assert [first.random() for _ in range(4)] != [second.random() for _ in range(4)]
    assert client.closed == 1


def test_the_hook_is_installed_once_with_the_runtime_and_not_at_all_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "snapshot_restore_py", raising=False)
    assert snapstart.register() is False

    installed: list[Callable[..., Any]] = []
    runtime = types.ModuleType("snapshot_restore_py")
    runtime.register_after_restore = installed.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", runtime)
    assert snapstart.register() is True
    assert snapstart.register() is True
    assert installed == [snapstart.after_restore]


def test_the_default_services_of_a_worker_are_tracked(monkeypatch: pytest.MonkeyPatch) -> None:
    from offpath.handlers.composition import build_worker_ports
    from offpath.settings import Settings

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    settings = Settings(table_name="t", queue_urls={"default": "q"}, dlq_urls={"default": "d"}, queue_class="default")
    ports = build_worker_ports(settings)
    assert snapstart._generators == [ports.rng]
    assert snapstart._clients == [ports.store.client]  # type: ignore[attr-defined]


def test_the_default_services_of_the_api_are_tracked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The api shares one Overrides between its adapters; its store's client, made at init, is still tracked and
    the hooks installed (a runtime with SnapStart's module)."""
    from offpath.handlers.api import build_services
    from offpath.settings import Settings

    installed: list[Callable[..., Any]] = []
    runtime = types.ModuleType("snapshot_restore_py")
    runtime.register_after_restore = installed.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", runtime)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    services = build_services(Settings(table_name="t", queue_urls={"default": "q"}, dlq_urls={"default": "d"}))
    assert snapstart._clients == [services.ports.store.client]  # type: ignore[attr-defined]
    assert installed == [snapstart.after_restore]


def test_injected_clients_and_generators_are_not_tracked(monkeypatch: pytest.MonkeyPatch) -> None:
    from offpath.handlers.composition import Overrides, build_worker_ports
    from offpath.settings import Settings

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    settings = Settings(table_name="t", queue_urls={"default": "q"}, dlq_urls={"default": "d"}, queue_class="default")
    build_worker_ports(settings, Overrides(dynamodb=PooledClient(), rng=lambda: random.Random(7)))  # type: ignore[arg-type]
    assert snapstart._clients == []
    assert snapstart._generators == []
