"""How big a delivery is on the delivery queue: serialised without ASCII escapes, cut into SQS batches by bytes
as well as by count, and past the inline limit carrying the job without its payload and result."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from offpath.adapters.deliveries import byte_batches
from offpath.domain.webhooks import (
    INLINE_LIMIT_BYTES,
    SQS_BATCH_BYTES,
    SQS_MESSAGE_BYTES,
    Delivery,
    inlined,
    json_text,
    utf8_bytes,
)

EMOJI = "\U0001f600"  # 4 bytes in UTF-8; 12 as json.dumps' default \ud83d\ude00


def test_sqs_limits_are_256_kib_for_a_message_and_for_a_batch() -> None:
    assert (SQS_MESSAGE_BYTES, SQS_BATCH_BYTES) == (262_144, 262_144)
    assert INLINE_LIMIT_BYTES == 196_608


def test_a_four_byte_character_costs_four_bytes_not_twelve() -> None:
    delivery = Delivery(
        "acme", "hook", "evt_1", "job.succeeded", datetime(2026, 12, 2, tzinfo=UTC), {"p": EMOJI * 1000}
    )

    body = delivery.to_json()

    assert 4000 < utf8_bytes(body) < 4400
    assert Delivery.from_json(body) == delivery


def test_characters_sqs_refuses_are_escaped_and_read_back() -> None:
    value = {"text": "a\ud800b\ufffec\uffff\x00" + EMOJI}

    text = json_text(value)

    assert all(not ("\ud800" <= ch <= "\udfff" or ch in "\ufffe\uffff\x00") for ch in text)
    assert json.loads(text) == value


def test_batches_hold_at_most_ten_messages_and_their_byte_limit_in_order() -> None:
    kib = 1024
    sizes = [100 * kib, 100 * kib, 100 * kib, 256 * kib, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 60 * kib]

    batches = byte_batches(sizes, count=10, limit=256 * kib)

    assert batches == [[0, 1], [2], [3], [4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [14, 15, 16]]
    assert all(sum(sizes[i] for i in batch) <= 256 * kib and len(batch) <= 10 for batch in batches)
    assert [i for batch in batches for i in batch] == list(range(len(sizes)))


def test_ten_deliveries_of_a_64_kb_payload_of_four_byte_characters_fit_sqs_batches() -> None:
    """The fan-out that once made one ~2 MB SendMessageBatch: ten of 64 KB each, in batches SQS takes."""
    payload = {"text": EMOJI * 16_000}  # 64,000 bytes as stored
    view = inlined({"job_id": "j1", "status": "SUCCEEDED", "payload": payload, "result": None})
    bodies = [
        Delivery("acme", f"hook{n}", "evt_1", "job.succeeded", datetime(2026, 12, 2, tzinfo=UTC), view).to_json()
        for n in range(10)
    ]
    sizes = [utf8_bytes(body) for body in bodies]

    batches = byte_batches(sizes, count=10, limit=SQS_BATCH_BYTES)

    assert all(size < 65_000 for size in sizes) and view["payload"] == payload
    assert [len(batch) for batch in batches] == [4, 4, 2]


def test_a_job_view_past_the_inline_limit_is_carried_without_its_payload_and_result() -> None:
    view = {"job_id": "j1", "status": "SUCCEEDED", "payload": {"text": EMOJI * 60_000}, "result": {"n": 1}}

    carried = inlined(view)

    assert carried == {
        "job_id": "j1",
        "status": "SUCCEEDED",
        "payload": None,
        "result": None,
        "omitted": ["payload", "result"],
    }
    small = {"job_id": "j1", "payload": {"text": "hi"}, "result": None}
    assert inlined(small) is small
