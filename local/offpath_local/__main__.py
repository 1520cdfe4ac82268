"""`python -m offpath_local` is the `offpath` command."""

from __future__ import annotations

import sys

from offpath_local.cli import main

sys.exit(main())
