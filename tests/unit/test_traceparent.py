"""W3C `traceparent` headers as offpath reads them: the trace id of a valid one, nothing of an invalid one."""

from __future__ import annotations

import pytest

from offpath.observability import trace_id_of, traceparent_of

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    "header",
    [
        f"00-{TRACE}-{PARENT}-01",
        f"00-{TRACE}-{PARENT}-00",
        f" 00-{TRACE}-{PARENT}-01 ",  # optional whitespace around a header's value
        f"01-{TRACE}-{PARENT}-01",  # a later version
        f"cc-{TRACE}-{PARENT}-01-what-the-future-adds",  # a later version may add fields
    ],
)
def test_a_valid_traceparent_gives_its_trace_id(header: str) -> None:
    assert trace_id_of(header) == TRACE


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "garbage",
        f"00-{TRACE}-{PARENT}",  # no flags
        f"00-{TRACE}-{PARENT}-01-extra",  # version 00 has exactly four fields
        f"ff-{TRACE}-{PARENT}-01",  # the forbidden version
        f"00-{TRACE.upper()}-{PARENT}-01",  # upper-case hex
        f"00-{'0' * 32}-{PARENT}-01",  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # all-zero parent id
        f"00-{TRACE[:-1]}-{PARENT}-01",  # short trace id
        f"00-{TRACE}-{PARENT}0-01",  # long parent id
        f"00-{TRACE[:-1]}g-{PARENT}-01",  # not hex
        f"0-{TRACE}-{PARENT}-01",
        f"00-{TRACE}-{PARENT}-1",
        f"00_{TRACE}_{PARENT}_01",
    ],
)
def test_an_invalid_traceparent_is_ignored(header: str | None) -> None:
    assert trace_id_of(header) is None


def test_the_traceparent_offpath_writes_reads_back() -> None:
    assert trace_id_of(traceparent_of(TRACE, PARENT)) == TRACE
