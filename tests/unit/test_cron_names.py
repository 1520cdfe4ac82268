"""Schedule expressions, field by field, with the firing times spelled out: day and month names, steps, the
last and n-th weekdays, field bounds, zones west of UTC, 29 February, and `rate()` units."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from offpath.domain.cron import load_zone, parse_cron, parse_rate
from offpath.domain.errors import RegistryError

WEDNESDAY = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)  # Wednesday 2 December 2026, 07:00 UTC


def fires(cron: str, after: datetime = WEDNESDAY, zone: str = "UTC") -> str | None:
    """The next firing after `after`, as the local time in `zone` with its weekday."""
    tz = ZoneInfo(zone)
    when = parse_cron(cron).next_after(after, tz)
    return None if when is None else f"{when.astimezone(tz):%a %Y-%m-%d %H:%M %z}"


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        ("0 9 ? * SUN *", "Sun 2026-12-06 09:00 +0000"),
        ("0 9 ? * sun *", "Sun 2026-12-06 09:00 +0000"),
        ("0 9 ? * 1 *", "Sun 2026-12-06 09:00 +0000"),
        ("0 9 ? * SAT *", "Sat 2026-12-05 09:00 +0000"),
        ("0 9 ? * 7 *", "Sat 2026-12-05 09:00 +0000"),
        ("0 9 ? * MON-FRI *", "Wed 2026-12-02 09:00 +0000"),
        ("0 9 ? * THU,TUE *", "Thu 2026-12-03 09:00 +0000"),
        ("0 9 1 DEC ? *", "Wed 2027-12-01 09:00 +0000"),
        ("0 9 1 dec ? *", "Wed 2027-12-01 09:00 +0000"),
        ("0 9 1 12 ? *", "Wed 2027-12-01 09:00 +0000"),
        ("0 9 1 JAN ? *", "Fri 2027-01-01 09:00 +0000"),
        ("0 9 1 NOV-DEC ? *", "Mon 2027-11-01 09:00 +0000"),
        ("0 9 15 6 ? *", "Tue 2027-06-15 09:00 +0000"),  # a month field, every year
        ("0 9 15 6 ? 2027", "Tue 2027-06-15 09:00 +0000"),
        ("0 9 15 6 ? 2028-2030", "Thu 2028-06-15 09:00 +0000"),
        ("0 9 15 6 ? 2026", None),  # June 2026 has passed
        ("59 23 31 12 ? *", "Thu 2026-12-31 23:59 +0000"),
        ("0 0 1 1 ? 2027", "Fri 2027-01-01 00:00 +0000"),
    ],
)
def test_names_and_numbers_of_days_months_and_years(cron: str, expected: str | None) -> None:
    assert fires(cron) == expected


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        ("0 9 ? * 2#1 *", "Mon 2026-12-07 09:00 +0000"),
        ("0 9 ? * 2#2 *", "Mon 2026-12-14 09:00 +0000"),
        ("0 9 ? * 3#2 *", "Tue 2026-12-08 09:00 +0000"),  # the 8th: the second of its weekday
        ("0 9 ? * 6#1 2027", "Fri 2027-01-01 09:00 +0000"),  # the 1st
        ("0 9 ? * MON#2 *", "Mon 2026-12-14 09:00 +0000"),
        ("0 9 ? * 6#3 *", "Fri 2026-12-18 09:00 +0000"),
        ("0 9 ? * 5#5 *", "Thu 2026-12-31 09:00 +0000"),
        ("0 9 ? * 1#5 *", "Sun 2027-01-31 09:00 +0000"),  # December 2026 has four Sundays
        ("0 9 ? * 5L *", "Thu 2026-12-31 09:00 +0000"),
        ("0 9 ? * 1L *", "Sun 2026-12-27 09:00 +0000"),
        ("0 9 ? * THUL *", "Thu 2026-12-31 09:00 +0000"),
        ("0 9 ? * 2L *", "Mon 2026-12-28 09:00 +0000"),
        ("0 9 ? * L *", "Sat 2026-12-26 09:00 +0000"),  # bare L: the last Saturday
        ("0 9 L * ? *", "Thu 2026-12-31 09:00 +0000"),
        ("0 9 L 2 ? *", "Sun 2027-02-28 09:00 +0000"),
        ("0 9 L 2 ? 2028", "Tue 2028-02-29 09:00 +0000"),
    ],
)
def test_the_nth_and_last_weekdays_and_the_last_day(cron: str, expected: str) -> None:
    assert fires(cron) == expected


@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("5/20 * * * ? *", {"minutes": {5, 25, 45}}),
        ("*/15 * * * ? *", {"minutes": {0, 15, 30, 45}}),
        ("10-40/15 * * * ? *", {"minutes": {10, 25, 40}}),
        ("0 3/8 * * ? *", {"minutes": {0}, "hours": {3, 11, 19}}),
        ("0 0 1/10 * ? *", {"days_of_month": {1, 11, 21, 31}}),
        ("0 0 ? 2/5 MON *", {"months": {2, 7, 12}, "days_of_week": {2}}),
        ("0 0 ? * 2/2 *", {"days_of_week": {2, 4, 6}}),
        ("0 0 ? * * *", {"days_of_week": {1, 2, 3, 4, 5, 6, 7}}),
        ("0 0 * * ? *", {"days_of_month": set(range(1, 32)), "months": set(range(1, 13))}),
        ("0,30 0-23/12 * * ? *", {"minutes": {0, 30}, "hours": {0, 12}}),
    ],
)
def test_steps_ranges_and_lists(field: str, values: dict[str, set[int]]) -> None:
    expression = parse_cron(field)
    for name, expected in values.items():
        assert getattr(expression, name) == expected, name


def test_a_step_from_a_start_fires_at_the_start_then_every_step() -> None:
    assert fires("5/20 * * * ? *") == "Wed 2026-12-02 07:05 +0000"
    assert fires("0 3/8 * * ? *") == "Wed 2026-12-02 11:00 +0000"


@pytest.mark.parametrize(
    "cron",
    [
        "59 23 31 12 ? 2199",
        "0 0 ? 1 7 1970",
        "0 0 ? 1 1 *",
        "0 0 1 1 ? *",
        "0 0 ? 1 1#5 *",
        "0 0 ? 1 7L *",
    ],
)
def test_the_bounds_of_each_field_are_accepted(cron: str) -> None:
    assert parse_cron(cron).text == f"cron({cron})"


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("60 0 * * ? *", "minutes: '60' is not a value from 0 to 59"),
        ("0 24 * * ? *", "hours: '24' is not a value from 0 to 23"),
        ("0 0 0 * ? *", "day-of-month: '0' is not a value from 1 to 31"),
        ("0 0 32 * ? *", "day-of-month: '32' is not a value from 1 to 31"),
        ("0 0 1 0 ? *", "month: '0' is not a value from 1 to 12"),
        ("0 0 1 13 ? *", "month: '13' is not a value from 1 to 12"),
        ("0 0 ? * 0 *", "day-of-week: '0' is not a value from 1 to 7"),
        ("0 0 ? * 8 *", "day-of-week: '8' is not a value from 1 to 7"),
        ("0 0 1 * ? 1969", "year: '1969' is not a value from 1970 to 2199"),
        ("0 0 1 * ? 2200", "year: '2200' is not a value from 1970 to 2199"),
        ("0 0 ? * 2#0 *", "day-of-week n#k needs k from 1 to 5"),
        ("0 0 ? * 2#6 *", "day-of-week n#k needs k from 1 to 5"),
        ("0 0 ? * 8#2 *", "day-of-week: '8' is not a value from 1 to 7"),
        ("0 0 ? * 8L *", "day-of-week: '8L' is not a value from 1 to 7"),
        ("0 0 ? * XYZL *", "day-of-week: 'XYZ' is not a value from 1 to 7"),
        ("0 0 FOO * ? *", "day-of-month: 'FOO' is not a value from 1 to 31"),
        ("X 0 * * ? *", "minutes: 'X' is not a value from 0 to 59"),
        ("0 X * * ? *", "hours: 'X' is not a value from 0 to 23"),
        ("0 0 1 * ? X", "year: 'X' is not a value from 1970 to 2199"),
        ("0 0 ? * 2#2#3 *", "day-of-week n#k needs k from 1 to 5"),
        ("0 1-5-7 * * ? *", "hours: '5-7' is not a value from 0 to 23"),
        ("0 1-99 * * ? *", "hours: '99' is not a value from 0 to 23"),
        ("0 99-1 * * ? *", "hours: '99' is not a value from 0 to 23"),
        ("0 0 ? * FOO *", "day-of-week: 'FOO' is not a value from 1 to 7"),
        ("0 0 1 FOO ? *", "month: 'FOO' is not a value from 1 to 12"),
        ("*/0 0 * * ? *", "minutes: the step after '/' must be a positive number"),
        ("*/x 0 * * ? *", "minutes: the step after '/' must be a positive number"),
        ("0 10-5 * * ? *", "hours: range '10-5' runs backwards"),
        ("0 0 * * * *", "exactly one of day-of-month and day-of-week must be '?'"),
        ("0 0 ? * ? *", "exactly one of day-of-month and day-of-week must be '?'"),
        ("0 0 * * ?", "cron needs 6 fields (minutes hours day-of-month month day-of-week year), got 5"),
    ],
)
def test_values_outside_a_fields_bounds_are_refused_naming_the_field(cron: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_cron(cron)
    assert str(refused.value) == message


# -- time zones west of UTC -----------------------------------------------------------------------


def test_a_zone_west_of_utc_fires_on_its_own_local_day() -> None:
    """03:00 UTC on 2 December is still 1 December, 22:00, in New York: 23:00 local comes first that evening."""
    after = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)

    assert fires("0 23 * * ? *", after, "America/New_York") == "Tue 2026-12-01 23:00 -0500"
    assert fires("0 0 * * ? *", WEDNESDAY, "America/Los_Angeles") == "Wed 2026-12-02 00:00 -0800"
    assert fires("30 8 * * ? *", WEDNESDAY, "America/New_York") == "Wed 2026-12-02 08:30 -0500"
    assert fires("0 9 ? * TUE *", after, "America/New_York") == "Tue 2026-12-08 09:00 -0500"


def test_next_after_an_instant_on_29_february() -> None:
    leap = datetime(2028, 2, 29, 10, 0, tzinfo=UTC)

    assert fires("0 9 29 2 ? *", leap) == "Sun 2032-02-29 09:00 +0000"
    assert fires("0 11 29 2 ? *", leap) == "Tue 2028-02-29 11:00 +0000"
    assert fires("0 9 L 2 ? *", leap) == "Wed 2029-02-28 09:00 +0000"
    assert fires("0 9 30 2 ? *", leap) is None  # never: the search gives up rather than loop


def test_a_firing_is_strictly_after_the_instant_given() -> None:
    at_nine = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)

    assert fires("0 9 * * ? *", at_nine) == "Thu 2026-12-03 09:00 +0000"
    assert fires("0,1 9 * * ? *", at_nine) == "Wed 2026-12-02 09:01 +0000"


# -- rate ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds", "shown"),
    [
        ("1 minute", 60, "rate(1 minute)"),
        ("90 minutes", 5400, "rate(90 minutes)"),
        ("1 hour", 3600, "rate(1 hour)"),
        ("2 hours", 7200, "rate(2 hours)"),
        ("1 day", 86400, "rate(1 day)"),
        ("3 days", 259200, "rate(3 days)"),
        (" 5 minutes ", 300, "rate(5 minutes)"),
    ],
)
def test_rate_units(text: str, seconds: int, shown: str) -> None:
    rate = parse_rate(text)

    assert (rate.seconds, rate.text) == (seconds, shown)


def test_rate_fires_at_the_anchor_then_every_period() -> None:
    anchor = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
    rate = parse_rate("2 hours")

    assert rate.next_after(datetime(2026, 12, 2, 5, 0, tzinfo=UTC), anchor) == anchor
    assert rate.next_after(anchor, anchor) == datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
    assert rate.next_after(WEDNESDAY, anchor) == datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
    assert rate.next_after(datetime(2026, 12, 2, 8, 0, tzinfo=UTC), anchor) == datetime(2026, 12, 2, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2 hour", "rate(2 hour): use the singular unit for 1 and the plural otherwise"),
        ("1 hours", "rate(1 hours): use the singular unit for 1 and the plural otherwise"),
        ("1 days", "rate(1 days): use the singular unit for 1 and the plural otherwise"),
        ("0 hours", "rate must look like '5 minutes', '1 hour' or '2 days'"),
        ("5 seconds", "rate must look like '5 minutes', '1 hour' or '2 days'"),
    ],
)
def test_rate_refusals(text: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_rate(text)
    assert str(refused.value) == message


def test_the_search_ends_eight_years_ahead_on_the_same_day() -> None:
    assert fires("0 0 2 12 ? 2034") == "Sat 2034-12-02 00:00 +0000"  # the last day searched
    assert fires("0 0 3 12 ? 2034") is None  # one day beyond it
    leap = datetime(2028, 2, 29, 10, 0, tzinfo=UTC)
    assert fires("0 0 26 2 ? 2036", leap) == "Tue 2036-02-26 00:00 +0000"  # 2,920 days on: the last day searched
    assert fires("0 0 1 3 ? 2036", leap) is None


def test_a_year_list_fires_in_its_later_years_too() -> None:
    assert fires("0 9 15 6 ? 2026,2029") == "Fri 2029-06-15 09:00 +0000"


@pytest.mark.parametrize(
    ("cron", "values"),
    [
        ("*/1 5-5 * * ? *", {"minutes": set(range(60)), "hours": {5}}),
        ("0 0 ? * SUN-TUE *", {"days_of_week": {1, 2, 3}}),
    ],
)
def test_a_step_of_one_and_a_range_of_one(cron: str, values: dict[str, set[int]]) -> None:
    expression = parse_cron(cron)
    for name, expected in values.items():
        assert getattr(expression, name) == expected, name


def test_a_long_wrong_value_is_shown_cut_to_20_characters() -> None:
    with pytest.raises(ValueError) as refused:
        parse_cron("0 0 1 " + "Z" * 30 + " ? *")
    assert str(refused.value) == f"month: {'Z' * 20!r} is not a value from 1 to 12"


def test_an_unknown_time_zone_is_refused_by_name() -> None:
    assert load_zone("America/New_York") == ZoneInfo("America/New_York")
    for name in ("Mars/Olympus_Mons", "../etc/passwd", ""):
        with pytest.raises(RegistryError) as refused:
            load_zone(name)
        assert str(refused.value) == f"unknown time zone {name!r}"


def test_the_next_firing_is_an_aware_utc_datetime() -> None:
    when = parse_cron("30 8 * * ? *").next_after(WEDNESDAY, ZoneInfo("America/New_York"))

    assert when is not None and when.tzinfo is UTC
    assert when == datetime(2026, 12, 2, 13, 30, tzinfo=UTC)


def test_the_search_from_29_february_counts_days_and_from_any_other_day_years() -> None:
    """Eight years after 29 February 2092 is 2100, which has no 29 February: that search counts 2,920 days. From
    the 29th of another month it runs eight calendar years, to the same day."""
    assert fires("0 9 1 3 ? *", datetime(2092, 2, 29, 10, 0, tzinfo=UTC)) == "Sat 2092-03-01 09:00 +0000"
    assert fires("0 0 29 12 ? 2034", datetime(2026, 12, 29, 10, 0, tzinfo=UTC)) == "Fri 2034-12-29 00:00 +0000"


def test_an_expression_without_l_has_no_last_day_and_one_for_every_year_no_years() -> None:
    assert parse_cron("0 0 1 * ? *").years is None
    assert parse_cron("0 0 1 * ? 2030").years == {2030}
    assert parse_cron("0 0 1 * ? *").last_day_of_month is False
    assert parse_cron("0 0 L * ? *").last_day_of_month is True
