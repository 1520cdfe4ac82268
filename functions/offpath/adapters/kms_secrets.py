"""Webhook signing secrets sealed with AWS KMS: each secret (a 32-byte key, well under KMS's 4 KiB) is encrypted
directly with the stack's key, under an encryption context naming its tenant and endpoint, so a sealed secret
opens only for the endpoint it belongs to (and CloudTrail names it). An environment opens each sealed secret
once and keeps it while it lives (a delivery costs no Decrypt call once its endpoint's secrets are known)."""

from __future__ import annotations

import base64
import threading
from typing import Any

import botocore.exceptions

from offpath.domain.errors import StoreUnavailableError

PREFIX = "kms:"


class KmsSecretCipher:
    def __init__(self, key_id: str, client: Any = None) -> None:
        self.key_id = key_id
        if client is None:
            import boto3

            client = boto3.client("kms")
        self.client = client
        self._opened: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
        self._lock = threading.Lock()

    def seal(self, secret: str, context: dict[str, str]) -> str:
        answer = self._call(
            self.client.encrypt, KeyId=self.key_id, Plaintext=secret.encode(), EncryptionContext=dict(context)
        )
        sealed = PREFIX + base64.b64encode(answer["CiphertextBlob"]).decode()
        with self._lock:
            self._opened[(sealed, tuple(sorted(context.items())))] = secret
        return sealed

    def open(self, sealed: str, context: dict[str, str]) -> str:
        key = (sealed, tuple(sorted(context.items())))
        with self._lock:
            known = self._opened.get(key)
        if known is not None:
            return known
        if not sealed.startswith(PREFIX):
            raise StoreUnavailableError("a webhook secret is not sealed with KMS")
        answer = self._call(
            self.client.decrypt,
            KeyId=self.key_id,
            CiphertextBlob=base64.b64decode(sealed[len(PREFIX) :]),
            EncryptionContext=dict(context),
        )
        secret = bytes(answer["Plaintext"]).decode()
        with self._lock:
            self._opened[key] = secret
        return secret

    @staticmethod
    def _call(operation: Any, **request: Any) -> Any:
        try:
            return operation(**request)
        except botocore.exceptions.ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            raise StoreUnavailableError(f"KMS {code or 'error'}") from error
        except botocore.exceptions.BotoCoreError as error:
            raise StoreUnavailableError(f"KMS unreachable: {type(error).__name__}") from error
