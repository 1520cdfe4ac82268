"""The embedded runtime's sealing of webhook signing secrets (the stand-in for the stack's KMS key): AES-256-GCM
with a key of its own, kept in a file beside the data directory, never in it: `.offpath.key` next to `.offpath/`
(`<data directory>.key`), made on first use, readable by its owner only (0600). `state.json`, a copy of the
data directory or its backups hold the secrets sealed; the key file is what opens them (keep it, apart from
them: without it the endpoints' secrets cannot be read)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from offpath.domain.errors import StoreUnavailableError

PREFIX = "local:"
KEY_BYTES = 32
NONCE_BYTES = 12


def key_path(data_dir: Path) -> Path:
    """Where the key of a data directory is kept: beside it, `<name>.key`."""
    resolved = Path(data_dir).resolve()
    return resolved.parent / f"{resolved.name}.key"


class LocalKeyCipher:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._aead = AESGCM(self._key())

    def _key(self) -> bytes:
        try:
            descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            key = base64.b64decode(self.path.read_text().strip())
            if len(key) != KEY_BYTES:
                raise ValueError(f"{self.path} does not hold a {KEY_BYTES}-byte key") from None
            return key
        key = AESGCM.generate_key(bit_length=KEY_BYTES * 8)
        with os.fdopen(descriptor, "w") as out:
            out.write(base64.b64encode(key).decode() + "\n")
        return key

    def seal(self, secret: str, context: dict[str, str]) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, secret.encode(), _associated(context))
        return PREFIX + base64.b64encode(nonce + sealed).decode()

    def open(self, sealed: str, context: dict[str, str]) -> str:
        if not sealed.startswith(PREFIX):
            raise StoreUnavailableError("a webhook secret is not sealed with this runtime's key")
        raw = base64.b64decode(sealed[len(PREFIX) :])
        try:
            return self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _associated(context)).decode()
        except Exception:
            raise StoreUnavailableError(f"a webhook secret does not open with {self.path}") from None


def _associated(context: dict[str, str]) -> bytes:
    return json.dumps(context, sort_keys=True, separators=(",", ":")).encode()
