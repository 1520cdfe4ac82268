"""Every test runs without real AWS credentials: nothing can reach a real account.

The one exception is `make e2e URL=... SIGV4=1`, which exists to reach a real deployment: its requests are
signed with the shell's own AWS credentials, so they are left as they are (tests/e2e/target.py)."""

from __future__ import annotations

import os

if os.environ.get("OFFPATH_E2E_SIGV4", "").strip().lower() not in {"1", "true", "yes", "on"}:
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
        }
    )
    os.environ.pop("AWS_PROFILE", None)
