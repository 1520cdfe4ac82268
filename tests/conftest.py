"""Every test runs without real AWS credentials: nothing can reach a real account."""

from __future__ import annotations

import os

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
