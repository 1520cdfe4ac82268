"""`python -m offpath_local` is the `offpath` command."""

from __future__ import annotations

from offpath_local.cli import entry

entry()
