"""checkov over the synthesized templates (`make checkov`, part of `make test`), and the one place its skipped
checks are listed, each with its reason, as cdk-nag's acknowledgements are (infra/nag.py).

checkov runs from its own virtual environment (`.venv/checkov`): its pins (boto3 1.35, packaging 23) are
older than the project's. It reads the templates offline (`--skip-download`: no guideline download).

    python -m infra.checkov CHECKOV_EXECUTABLE
synthesizes the stack as `cdk deploy` would (cdk.json's context), with the optional budget and quotas on, and
fails on any finding that is not skipped here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from infra.monitoring import TOPIC_KEY_REASON
from infra.stack import ASYNC_DLQ_REASON, SYNC_DLQ_REASON

SKIPPED: dict[str, str] = {
    "CKV_AWS_115": (
        "Function-level concurrency: the api, read and enqueue functions have reserved concurrency (stack options "
        "api_reserved_concurrency, read_reserved_concurrency, enqueue_reserved_concurrency; "
        "tests/infra/test_guards.py asserts it); a worker's "
        "concurrency is bounded by its event source's MaximumConcurrency and the sweeper runs once a minute from one "
        "schedule, so reserving theirs would only lock account concurrency away. 0 turns a reservation off."
    ),
    "CKV_AWS_116": f"A function DLQ: {SYNC_DLQ_REASON} {ASYNC_DLQ_REASON}",
    "CKV_AWS_117": (
        "A VPC: the functions call only AWS APIs (DynamoDB, SQS, Scheduler, CloudWatch) over TLS with their own "
        "least-privilege roles and reach nothing private; a VPC would add interface endpoints or a NAT gateway "
        "(fixed monthly costs) and protect nothing more."
    ),
    "CKV_AWS_119": (
        "A customer managed KMS key on the table: it is encrypted at rest with the AWS managed key "
        "(TableEncryption.AWS_MANAGED); a customer managed key adds $1 a month and key administration, and only "
        "the stack's roles may read the table either way."
    ),
    "CKV_AWS_158": (
        "KMS on the log groups: CloudWatch Logs encrypts them at rest already; the functions log job ids and "
        "states, never payloads or results, and a customer managed key adds $1 a month and a key policy."
    ),
    "CKV_AWS_173": (
        "A customer managed key for environment variables: Lambda encrypts them at rest with its AWS managed key; "
        "they hold resource names and settings, no secret."
    ),
    "CKV_AWS_26": TOPIC_KEY_REASON,
    "CKV_AWS_27": (
        "The queues are encrypted at rest with SQS-managed keys (SqsManagedSseEnabled: true, cdk-nag's SQS2 "
        "passes); this check accepts a KMS key only."
    ),
}


# What the default stack leaves out, turned on so that checkov sees it too.
OPTIONAL_PARTS = {"monthly_budget_usd": "50", "budget_email": "billing@example.com", "quotas": "*:submits_per_s=50"}


def run_checkov(executable: str, templates: list[Path]) -> dict[str, object]:
    """checkov's JSON report over `templates`, with the skipped checks above."""
    command = [
        executable,
        "--framework",
        "cloudformation",
        "--skip-download",
        "--compact",
        "--quiet",
        "-o",
        "json",
        "--skip-check",
        ",".join(sorted(SKIPPED)),
    ]
    for template in templates:
        command += ["-f", str(template)]
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    report = json.loads(done.stdout or "[]")
    reports = report if isinstance(report, list) else [report]
    failed = [check for r in reports for check in r.get("results", {}).get("failed_checks", [])]
    return {"failed": failed, "returncode": done.returncode, "stderr": done.stderr[-2000:]}


def synthesized_template(outdir: Path) -> Path:
    from infra.stack import build_app

    root = Path(__file__).resolve().parents[1]
    context = {**json.loads((root / "cdk.json").read_text())["context"], **OPTIONAL_PARTS}
    app, stack = build_app(context, outdir=str(outdir))
    app.synth()
    return outdir / stack.template_file


def main(argv: list[str]) -> int:
    executable = argv[0] if argv else "checkov"
    with tempfile.TemporaryDirectory(prefix="offpath-checkov-") as directory:
        result = run_checkov(executable, [synthesized_template(Path(directory))])
    failed = result["failed"]
    assert isinstance(failed, list)
    for check in failed:
        print(f"checkov: {check['check_id']} {check['check_name']}: {check['resource']}")
    if failed or result["returncode"] not in (0, 1):
        print(f"checkov: {len(failed)} finding(s) not skipped in infra/checkov.py\n{result['stderr']}", file=sys.stderr)
        return 1
    print(f"checkov: no finding but the {len(SKIPPED)} checks skipped, each with its reason, in infra/checkov.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
