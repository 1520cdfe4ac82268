"""Lambda SnapStart (the stack's `-c snapstart=true`): what must not outlive a snapshot.

With SnapStart, Lambda runs a function's init once per published version, snapshots the execution environment
and restores every new environment from that snapshot. Whatever init made is then shared by every restored
environment: the random generators' state (every environment would draw the same jitter) and the SDK clients'
pooled connections (open sockets do not survive a restore). The Lambda Python runtime (3.12 and later) offers
`snapshot_restore_py.register_after_restore`; `register` installs `after_restore` there, which re-seeds the
generators and closes the clients' connection pools (a client opens new connections on its next call).
Outside SnapStart (the module is absent, or SnapStart is off and the hook never runs) nothing changes.
"""

from __future__ import annotations

import logging
import random
from typing import Any

logger = logging.getLogger("offpath.snapstart")

_clients: list[Any] = []
_generators: list[random.Random] = []
_registered = False


def track_client(client: Any) -> Any:
    """A client made at init: its pooled connections are dropped after a restore. Returns the client."""
    _clients.append(client)
    return client


def track_generator(generator: random.Random) -> random.Random:
    """A generator seeded at init: it is seeded again after a restore. Returns the generator."""
    _generators.append(generator)
    return generator


def after_restore() -> None:
    """Re-seed every generator (and `random`'s own) from the OS, and close every tracked client's connections."""
    random.seed()
    for generator in _generators:
        generator.seed()
    for client in _clients:
        close = getattr(client, "close", None)
        if close is not None:
            close()
    logger.debug("restored from a snapshot", extra={"clients": len(_clients), "generators": len(_generators)})


def register() -> bool:
    """Install `after_restore` with the runtime's SnapStart hooks, once; False where there are none."""
    global _registered
    if _registered:
        return True
    try:
        from snapshot_restore_py import register_after_restore  # type: ignore[import-not-found]
    except ImportError:
        return False
    register_after_restore(after_restore)
    _registered = True
    return True
