"""The CDK stack that deploys offpath: constructs per concern, composed by `OffpathStack`."""

from infra.options import StackOptions
from infra.stack import OffpathStack

__all__ = ["OffpathStack", "StackOptions"]
