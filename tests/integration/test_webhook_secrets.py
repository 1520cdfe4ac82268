"""Webhook signing secrets at rest, against moto (DynamoDB and KMS): the endpoints' item holds them sealed (KMS,
bound to their tenant and endpoint), deliveries still verify with `standardwebhooks`, a rotation keeps the old
secret signing, and the notifier reads endpoints without ever opening a secret. The embedded runtime's key file
seals the same way."""

from __future__ import annotations

import json
import random
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook

from offpath.adapters.dynamodb_store import key_of
from offpath.adapters.kms_secrets import KmsSecretCipher
from offpath.adapters.webhook_store import DynamoDbWebhookStore, endpoints_key
from offpath.domain.errors import StoreUnavailableError
from offpath.domain.webhooks import Delivery, Endpoint, Secret, SecretCipher, new_secret
from offpath.logic.webhooks import DeliveryPorts, ReceiverPolicy, deliver, rotate_secret
from offpath_local.resources import Resources
from offpath_local.secret_key import LocalKeyCipher, key_path
from offpath_tools.clocks import ManualClock
from offpath_tools.webhook_fakes import RecordingDeliveryQueue, ScriptedSender
from tests.integration.conftest import SESSION

NOW = datetime.now(UTC)


@pytest.fixture
def kms(aws: None) -> KmsSecretCipher:
    client = SESSION.client("kms")
    key = client.create_key(Description="offpath webhook secrets")["KeyMetadata"]["KeyId"]
    return KmsSecretCipher(key, client=client)


@pytest.fixture(params=["kms", "local"])
def cipher(request: pytest.FixtureRequest, tmp_path: Path) -> SecretCipher:
    if request.param == "kms":
        return request.getfixturevalue("kms")  # type: ignore[no-any-return]
    return LocalKeyCipher(key_path(tmp_path / "offpath"))


def stored_text(resources: Resources, clients: dict[str, Any], tenant: str) -> str:
    item = clients["dynamodb"].get_item(TableName=resources.table_name, Key=key_of(endpoints_key(tenant)))
    return json.dumps(item["Item"])


def test_the_stored_item_holds_no_secret_in_clear_and_the_endpoint_reads_back(
    resources: Resources, clients: dict[str, Any], cipher: SecretCipher
) -> None:
    store = DynamoDbWebhookStore(resources.table_name, client=clients["dynamodb"], cipher=cipher)
    secret = new_secret()
    hook = Endpoint("orders", "https://example.com/h", ("job.succeeded",), secrets=(Secret(secret),))

    store.put_endpoint("acme", hook, limit=10)

    text = stored_text(resources, clients, "acme")
    assert secret not in text and secret.removeprefix("whsec_") not in text and "sealed" in text
    fresh = DynamoDbWebhookStore(resources.table_name, client=clients["dynamodb"], cipher=cipher)
    assert fresh.endpoint("acme", "orders") == hook


def test_a_sealed_secret_opens_only_for_its_own_tenant_and_endpoint(cipher: SecretCipher) -> None:
    context = {"offpath:tenant": "acme", "offpath:endpoint": "orders"}
    sealed = cipher.seal("whsec_c2VjcmV0", context)
    # Another environment, with the same key and none of this one's opened secrets.
    other = (
        KmsSecretCipher(cipher.key_id, cipher.client)
        if isinstance(cipher, KmsSecretCipher)
        else LocalKeyCipher(cipher.path)  # type: ignore[attr-defined]
    )

    assert other.open(sealed, context) == "whsec_c2VjcmV0"
    for wrong in ({**context, "offpath:tenant": "other"}, {**context, "offpath:endpoint": "invoices"}):
        with pytest.raises(StoreUnavailableError):
            other.open(sealed, wrong)


def test_deliveries_verify_with_both_secrets_after_a_rotation(
    resources: Resources, clients: dict[str, Any], kms: KmsSecretCipher
) -> None:
    # Now, not when the module was collected: a receiver checks the signature's time against its clock (5 minutes).
    now = datetime.now(UTC)
    api_store = DynamoDbWebhookStore(resources.table_name, client=clients["dynamodb"], cipher=kms)
    old = new_secret()
    api_store.put_endpoint(
        "acme", Endpoint("orders", "https://example.com/h", ("job.succeeded",), secrets=(Secret(old),)), limit=10
    )
    new = rotate_secret("acme", "orders", store=api_store, clock=ManualClock(now)).secret
    # The delivery function: its own store and its own KMS client (it only decrypts).
    delivery_store = DynamoDbWebhookStore(
        resources.table_name, client=clients["dynamodb"], cipher=KmsSecretCipher(kms.key_id, SESSION.client("kms"))
    )
    sender = ScriptedSender()
    ports = DeliveryPorts(delivery_store, RecordingDeliveryQueue(), sender, ManualClock(now), random.Random(1))
    message = Delivery("acme", "orders", "evt_1", "job.succeeded", now, {"job_id": "j1"})

    assert deliver(message, ports, ReceiverPolicy()).result == "delivered"

    (_, headers, body) = sender.posted[0]
    for secret in (old, new):
        assert Webhook(secret).verify(body, headers)["data"] == {"job_id": "j1"}
    text = stored_text(resources, clients, "acme")
    assert old not in text and new not in text


def test_the_notifier_reads_endpoints_without_their_secrets_and_never_writes(
    resources: Resources, clients: dict[str, Any], kms: KmsSecretCipher
) -> None:
    DynamoDbWebhookStore(resources.table_name, client=clients["dynamodb"], cipher=kms).put_endpoint(
        "acme",
        Endpoint("orders", "https://example.com/h", ("job.succeeded",), secrets=(Secret(new_secret()),)),
        limit=10,
    )
    notifier_store = DynamoDbWebhookStore(resources.table_name, client=clients["dynamodb"], with_secrets=False)

    (endpoint,) = notifier_store.endpoints("acme")

    assert endpoint.name == "orders" and endpoint.secrets == ()
    with pytest.raises(RuntimeError):
        notifier_store.put_endpoint("acme", endpoint, limit=10)


def test_the_local_key_is_made_once_beside_the_data_directory_readable_by_its_owner_only(tmp_path: Path) -> None:
    data = tmp_path / "offpath"
    first = LocalKeyCipher(key_path(data))
    sealed = first.seal("whsec_c2VjcmV0", {"offpath:tenant": "acme", "offpath:endpoint": "orders"})

    again = LocalKeyCipher(key_path(data))

    assert key_path(data) == tmp_path / "offpath.key"
    assert stat.S_IMODE(key_path(data).stat().st_mode) == 0o600
    assert again.open(sealed, {"offpath:tenant": "acme", "offpath:endpoint": "orders"}) == "whsec_c2VjcmV0"


def test_a_rotation_racing_a_delete_on_dynamodb_leaves_the_endpoint_deleted(
    resources: Resources, clients: dict[str, Any]
) -> None:
    store = DynamoDbWebhookStore(resources.table_name, client=clients["dynamodb"])
    other = DynamoDbWebhookStore(resources.table_name, client=clients["dynamodb"])
    hook = Endpoint("orders", "https://example.com/h", ("job.succeeded",), secrets=(Secret(new_secret()),))
    store.put_endpoint("acme", hook, limit=10)
    seen: list[str] = []

    def rotate_after_a_delete(current: Endpoint) -> Endpoint:
        if not seen:
            other.delete_endpoint("acme", "orders")  # lands between this write's read and its write
        seen.append(current.secret)
        return Endpoint(current.name, current.url, current.events, secrets=(Secret(new_secret()),))

    assert store.update_endpoint("acme", "orders", rotate_after_a_delete) is None

    assert len(seen) == 1  # the conflicting write was read again: the endpoint was gone, nothing was written
    assert store.endpoints("acme") == []
    assert other.endpoint("acme", "orders") is None
