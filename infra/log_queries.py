"""The saved CloudWatch Logs Insights queries of the stack (AWS::Logs::QueryDefinition, folder `offpath/`), over the
functions' log groups, in the keys the functions write (offpath/observability.py's JSON lines, Powertools Logger's
keys, and the worker's attempt lines, logic/process.py). Plain data, so a test reads them without the CDK:
tests/unit/test_log_queries.py proves every key a query names is one the functions write.

`JOB_ID` and `TENANT` in a query are placeholders: replace them in the console before running it. A saved query
keeps no time range: the console's (one hour unless changed) applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FOLDER = "offpath"
ALL_FUNCTIONS = "all"
WORKERS = "workers"


@dataclass(frozen=True)
class SavedQuery:
    """A query in the parts aws_logs.QueryString takes; `query` is the text the stack saves."""

    name: str  # shown as <prefix>/<name> in the Logs Insights console
    log_groups: str  # ALL_FUNCTIONS or WORKERS
    fields: tuple[str, ...] = ()
    filter: str | None = None
    stats: str | None = None
    sort: str | None = None
    limit: int | None = None

    @property
    def query(self) -> str:
        """The text, as aws_logs.QueryString writes it (one command a line, `| ` before all but the first)."""
        parts = [f"fields {', '.join(self.fields)}"] if self.fields else []
        parts += [f"filter {self.filter}"] if self.filter else []
        parts += [f"stats {self.stats}"] if self.stats else []
        parts += [f"sort {self.sort}"] if self.sort else []
        parts += [f"limit {self.limit}"] if self.limit is not None else []
        return "\n| ".join(parts)

    @property
    def keys(self) -> frozenset[str]:
        """The log keys the query names (its fields, filters and groupings; not Insights' own words)."""
        text = re.sub(r'"[^"]*"|/[^/]*/', " ", self.query)  # string and regex literals
        words = set(re.findall(r"(?<![@\w.])[A-Za-z_][A-Za-z0-9_]*", text))
        aliases = set(re.findall(r"\bas\s+([A-Za-z_][A-Za-z0-9_]*)", self.query))
        return frozenset(words - INSIGHTS_WORDS - aliases)


# Logs Insights' commands, functions and keywords a query here uses.
INSIGHTS_WORDS = frozenset(
    {
        "fields", "filter", "stats", "sort", "limit", "by", "as", "asc", "desc", "and", "or", "not", "like", "in",
        "count", "avg", "max", "min", "sum", "pct", "ispresent", "display", "bin", "count_distinct", "earliest",
        "latest",
    }
)  # fmt: skip

QUERIES = (
    SavedQuery(
        "job-life",
        ALL_FUNCTIONS,
        fields=("@timestamp", "service", "level", "message", "attempt", "error", "trace_id"),
        filter='job_id = "JOB_ID"',
        sort="@timestamp asc",
        limit=1000,
    ),
    SavedQuery(
        "failures-by-job-type",
        WORKERS,
        filter='level = "ERROR" and message like /^job failed/ and ispresent(job_type)',
        stats="count(*) as failed, count_distinct(job_id) as jobs by job_type",
        sort="failed desc",
    ),
    SavedQuery(
        "slowest-job-types",
        WORKERS,
        filter="ispresent(duration_ms)",
        stats="count(*) as attempts, avg(duration_ms) as avg_ms, pct(duration_ms, 95) as p95_ms, "
        "max(duration_ms) as max_ms by job_type",
        sort="p95_ms desc",
        limit=25,
    ),
    SavedQuery(
        "tenant-activity",
        ALL_FUNCTIONS,
        fields=("@timestamp", "service", "level", "message", "job_id", "job_type", "attempt"),
        filter='tenant = "TENANT"',
        sort="@timestamp desc",
        limit=1000,
    ),
)
