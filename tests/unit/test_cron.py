"""Next-firing times of EventBridge Scheduler expressions, across Prague's daylight saving changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offpath.domain.cron import parse_cron, parse_rate
from offpath.domain.errors import RegistryError
from offpath.domain.registry import Registry, Schedule, schedule

PRAGUE = ZoneInfo("Europe/Prague")
# 2026: clocks go forward on 29 March at 02:00 (to 03:00), back on 25 October at 03:00 (to 02:00).
SPRING = datetime(2026, 3, 29, 0, 0, tzinfo=UTC)
AUTUMN = datetime(2026, 10, 25, 0, 0, tzinfo=UTC)


def reference_next(hours: set[int], minutes: set[int], after: datetime, zone: ZoneInfo) -> datetime:
    """Walk UTC minute by minute; a local time seen for the second time (fold=1) does not fire again,
    and a local time that never shows on the wall clock cannot match."""
    t = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    for _ in range(60 * 24 * 4):
        local = t.astimezone(zone)
        if local.fold == 0 and local.hour in hours and local.minute in minutes:
            return t
        t += timedelta(minutes=1)
    raise AssertionError("no firing within four days")


@settings(max_examples=60, deadline=None)
@given(
    hours=st.sets(st.integers(0, 23), min_size=1, max_size=4),
    minutes=st.sets(st.integers(0, 59), min_size=1, max_size=3),
    around=st.sampled_from([SPRING, AUTUMN]),
    offset_min=st.integers(-36 * 60, 36 * 60),
)
def test_daily_cron_matches_zoneinfo_reference_across_dst(
    hours: set[int], minutes: set[int], around: datetime, offset_min: int
) -> None:
    expression = parse_cron(f"{','.join(map(str, sorted(minutes)))} {','.join(map(str, sorted(hours)))} * * ? *")
    after = around + timedelta(minutes=offset_min)

    assert expression.next_after(after, PRAGUE) == reference_next(hours, minutes, after, PRAGUE)


def firings(cron: str, start: datetime, count: int) -> list[datetime]:
    expression = parse_cron(cron)
    times, after = [], start
    for _ in range(count):
        nxt = expression.next_after(after, PRAGUE)
        assert nxt is not None
        times.append(nxt)
        after = nxt
    return times


def test_time_in_the_skipped_spring_hour_is_skipped() -> None:
    local_days = [t.astimezone(PRAGUE) for t in firings("30 2 * * ? *", datetime(2026, 3, 27, tzinfo=UTC), 3)]

    assert [(d.day, d.hour, d.minute) for d in local_days] == [(27, 2, 30), (28, 2, 30), (30, 2, 30)]


def test_time_in_the_repeated_autumn_hour_fires_once() -> None:
    utc = firings("30 2 * * ? *", datetime(2026, 10, 24, 12, tzinfo=UTC), 2)

    assert utc[0] == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST, the first of the two
    assert utc[1] == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)  # next day, 02:30 CET


def test_nightly_0300_prague_stays_at_0300_local_across_both_changes() -> None:
    utc = firings("0 3 * * ? *", datetime(2026, 3, 27, tzinfo=UTC), 4) + firings(
        "0 3 * * ? *", datetime(2026, 10, 23, tzinfo=UTC), 4
    )

    assert {t.astimezone(PRAGUE).strftime("%H:%M") for t in utc} == {"03:00"}
    assert {t.hour for t in utc} == {1, 2}  # 03:00 is 02:00 UTC in winter, 01:00 UTC in summer


@pytest.mark.parametrize(
    ("cron", "after", "expected_local"),
    [
        ("0 6 1 * ? *", datetime(2026, 11, 29, tzinfo=UTC), "2026-12-01T06:00:00+01:00"),
        ("0 9 ? * MON-FRI *", datetime(2026, 11, 28, 12, tzinfo=UTC), "2026-11-30T09:00:00+01:00"),
        ("0 12 L * ? *", datetime(2026, 2, 1, tzinfo=UTC), "2026-02-28T12:00:00+01:00"),
        ("0 8 ? * 2#1 *", datetime(2026, 12, 8, tzinfo=UTC), "2027-01-04T08:00:00+01:00"),
        ("0 8 ? * 6L *", datetime(2026, 12, 1, tzinfo=UTC), "2026-12-25T08:00:00+01:00"),
        ("*/15 * * * ? *", datetime(2026, 12, 1, 10, 7, tzinfo=UTC), "2026-12-01T11:15:00+01:00"),
        ("0 0 1 1 ? 2027", datetime(2026, 12, 1, tzinfo=UTC), "2027-01-01T00:00:00+01:00"),
    ],
)
def test_cron_fields(cron: str, after: datetime, expected_local: str) -> None:
    nxt = parse_cron(cron).next_after(after, PRAGUE)

    assert nxt is not None
    assert nxt.astimezone(PRAGUE).isoformat() == expected_local


def test_cron_with_a_year_in_the_past_never_fires_again() -> None:
    assert parse_cron("0 0 1 1 ? 2020").next_after(datetime(2026, 1, 1, tzinfo=UTC), PRAGUE) is None


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 3 * * *", "6 fields"),
        ("0 3 * * * *", "exactly one of day-of-month and day-of-week"),
        ("0 3 ? * ? *", "exactly one of day-of-month and day-of-week"),
        ("61 3 * * ? *", "minutes"),
        ("0 25 * * ? *", "hours"),
        ("0 3 * FOO ? *", "month"),
        ("0 3 5-1 * ? *", "runs backwards"),
        ("0 3 */0 * ? *", "step"),
    ],
)
def test_invalid_cron_is_rejected_with_a_reason(cron: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_cron(cron)


def test_rate_counts_elapsed_time_from_its_anchor_not_the_calendar() -> None:
    rate = parse_rate("1 day")
    anchor = datetime(2026, 3, 28, 10, 0, tzinfo=UTC)

    nxt = rate.next_after(datetime(2026, 3, 29, 12, 0, tzinfo=UTC), anchor)

    assert nxt == anchor + timedelta(days=2)  # 24 h steps, even across the DST change


@pytest.mark.parametrize("text", ["0 minutes", "5 weeks", "1 minutes", "5 minute", "soon"])
def test_invalid_rate_is_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rate(text)


def test_invalid_schedule_declaration_names_the_schedule() -> None:
    with pytest.raises(RegistryError, match=r"schedule 'broken-nightly'.*6 fields"):
        schedule("broken-nightly", cron="0 3 * *", job="demo.echo")


def test_schedule_for_an_unregistered_job_type_is_rejected() -> None:
    registry = Registry()
    parsed = parse_cron("0 3 * * ? *")

    with pytest.raises(RegistryError, match="not registered"):
        registry.add_schedule(Schedule("x", parsed.text, "Europe/Prague", job="missing", payload={}, parsed=parsed))


def test_schedule_with_an_unknown_time_zone_is_rejected() -> None:
    with pytest.raises(RegistryError, match="time zone"):
        schedule("bad-zone", cron="0 3 * * ? *", timezone="Mars/Olympus", job="demo.echo")


@pytest.mark.parametrize("name", ["job-cleanup", "offpath-sweeper"])
def test_schedule_names_reserved_for_one_time_schedules_and_the_sweeper_are_rejected(name: str) -> None:
    with pytest.raises(RegistryError, match="reserved"):
        schedule(name, cron="0 3 * * ? *", job="demo.echo")
