#!/usr/bin/env python3
"""The CDK app: `make synth`, `make diff`, `make deploy`, `make destroy` (context options: infra/options.py).

cdk-nag's AwsSolutions and Serverless packs run on every synth; an unacknowledged finding fails it.
"""

from infra.stack import build_app

if __name__ == "__main__":
    build_app()[0].synth()
