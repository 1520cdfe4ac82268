"""EventBridge Scheduler expressions: parsing, validation and the next firing time in a time zone.

`cron(minutes hours day-of-month month day-of-week year)`: six fields; exactly one of day-of-month and
day-of-week is `?`. Supported per field: `*`, numbers, `a-b`, lists `a,b`, steps `*/n` and `a/n` or
`a-b/n`, month names JAN-DEC, day names SUN-SAT (SUN=1), `L` (last day of the month) in
day-of-month, `L` and `n#k` (k-th weekday n of the month) in day-of-week.

Daylight saving time, as the Scheduler does it: a local time that does not exist (clocks go forward)
is skipped; a local time that happens twice (clocks go back) fires once, at its first occurrence.
`rate(n unit)` is elapsed time from an anchor (when the schedule was created), not calendar time.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from offpath.domain.errors import RegistryError

MONTHS = {name: i for i, name in enumerate(calendar.month_abbr) if name}
MONTHS = {name.upper(): i for name, i in MONTHS.items()}
DAYS = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}
RATE_UNITS = {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}
# How far ahead `next_after` looks before deciding an expression never fires (e.g. 30 FEB).
SEARCH_YEARS = 8


@dataclass(frozen=True)
class CronExpression:
    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int] | None  # None: `?`
    last_day_of_month: bool
    months: frozenset[int]
    days_of_week: frozenset[int] | None  # 1 = Sunday ... 7 = Saturday; None: `?`
    last_weekday: int | None  # `nL`: the last weekday n of the month
    nth_weekday: tuple[int, int] | None  # `n#k`
    years: frozenset[int] | None  # None: every year
    text: str

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months or (self.years is not None and day.year not in self.years):
            return False
        if self.days_of_week is None and self.last_weekday is None and self.nth_weekday is None:
            last = calendar.monthrange(day.year, day.month)[1]
            return (self.last_day_of_month and day.day == last) or (
                self.days_of_month is not None and day.day in self.days_of_month
            )
        weekday = (day.isoweekday() % 7) + 1  # Sunday = 1
        if self.last_weekday is not None:
            last = calendar.monthrange(day.year, day.month)[1]
            return weekday == self.last_weekday and day.day + 7 > last
        if self.nth_weekday is not None:
            wanted, nth = self.nth_weekday
            return weekday == wanted and (day.day - 1) // 7 + 1 == nth
        return self.days_of_week is not None and weekday in self.days_of_week

    def next_after(self, after: datetime, zone: ZoneInfo) -> datetime | None:
        """The first firing strictly after `after`, as an aware UTC datetime (None: never again)."""
        local_after = after.astimezone(zone)
        day = local_after.date()
        end = (
            day.replace(year=day.year + SEARCH_YEARS)
            if not (day.month == 2 and day.day == 29)
            else day + timedelta(days=365 * SEARCH_YEARS)
        )
        while day <= end:
            if self.years is not None and day.year > max(self.years):
                return None
            if self.matches_day(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        fire = _local_instant(day, hour, minute, zone)
                        if fire is not None and fire > after:
                            return fire
            day += timedelta(days=1)
        return None


def _local_instant(day: date, hour: int, minute: int, zone: ZoneInfo) -> datetime | None:
    """The UTC instant of a local wall time; None when it does not exist (skipped by a DST change).
    A repeated wall time (fold) resolves to its first occurrence (fold=0)."""
    naive = datetime.combine(day, time(hour, minute))
    local = naive.replace(tzinfo=zone, fold=0)
    utc = local.astimezone(UTC)
    if utc.astimezone(zone).replace(tzinfo=None) != naive:
        return None
    return utc


@dataclass(frozen=True)
class RateExpression:
    seconds: int
    text: str

    def next_after(self, after: datetime, anchor: datetime) -> datetime:
        if after < anchor:
            return anchor
        periods = int((after - anchor).total_seconds() // self.seconds) + 1
        return anchor + timedelta(seconds=periods * self.seconds)


def parse_rate(text: str) -> RateExpression:
    match = re.fullmatch(r"\s*(\d+)\s+([a-z]+)\s*", text)
    if not match or match.group(2) not in RATE_UNITS or int(match.group(1)) < 1:
        raise ValueError("rate must look like '5 minutes', '1 hour' or '2 days'")
    value, unit = int(match.group(1)), match.group(2)
    if (value == 1) != unit.endswith(("minute", "hour", "day")):
        raise ValueError(f"rate({value} {unit}): use the singular unit for 1 and the plural otherwise")
    return RateExpression(value * RATE_UNITS[unit], f"rate({value} {unit})")


def parse_cron(text: str) -> CronExpression:
    fields = text.split()
    if len(fields) != 6:
        raise ValueError(f"cron needs 6 fields (minutes hours day-of-month month day-of-week year), got {len(fields)}")
    minute_f, hour_f, dom_f, month_f, dow_f, year_f = fields
    if (dom_f == "?") == (dow_f == "?"):
        raise ValueError("exactly one of day-of-month and day-of-week must be '?'")
    last_day = False
    days_of_month = None
    if dom_f != "?":
        if dom_f == "L":
            last_day = True
        else:
            days_of_month = _field(dom_f, 1, 31, {}, "day-of-month")
    days_of_week = None
    last_weekday = None
    nth_weekday = None
    if dow_f != "?":
        upper = dow_f.upper()
        if re.fullmatch(r"([1-7]|[A-Z]{3})L", upper):
            last_weekday = _value(upper[:-1], 1, 7, DAYS, "day-of-week")
        elif "#" in upper:
            day_text, _, nth_text = upper.partition("#")
            if not nth_text.isdigit() or not 1 <= int(nth_text) <= 5:
                raise ValueError("day-of-week n#k needs k from 1 to 5")
            nth_weekday = (_value(day_text, 1, 7, DAYS, "day-of-week"), int(nth_text))
        elif upper == "L":
            last_weekday = 7
        else:
            days_of_week = _field(upper, 1, 7, DAYS, "day-of-week")
    return CronExpression(
        minutes=_field(minute_f, 0, 59, {}, "minutes"),
        hours=_field(hour_f, 0, 23, {}, "hours"),
        days_of_month=days_of_month,
        last_day_of_month=last_day,
        months=_field(month_f.upper(), 1, 12, MONTHS, "month"),
        days_of_week=days_of_week,
        last_weekday=last_weekday,
        nth_weekday=nth_weekday,
        years=None if year_f == "*" else _field(year_f, 1970, 2199, {}, "year"),
        text=f"cron({' '.join(fields)})",
    )


def _value(text: str, low: int, high: int, names: dict[str, int], field: str) -> int:
    number = names.get(text.upper()) if not text.isdigit() else int(text)
    if number is None or not low <= number <= high:
        raise ValueError(f"{field}: {text[:20]!r} is not a value from {low} to {high}")
    return number


def _field(text: str, low: int, high: int, names: dict[str, int], field: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ValueError(f"{field}: the step after '/' must be a positive number")
            step = int(step_text)
        if base == "*":
            start, stop = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, stop = _value(first, low, high, names, field), _value(last, low, high, names, field)
            if start > stop:
                raise ValueError(f"{field}: range {base!r} runs backwards")
        else:
            start = _value(base, low, high, names, field)
            stop = high if step_text else start
        values.update(range(start, stop + 1, step))
    return frozenset(values)


def load_zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise RegistryError(f"unknown time zone {name!r}") from None
