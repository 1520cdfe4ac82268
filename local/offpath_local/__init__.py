"""The embedded runtime and the `offpath` command line (kept out of the Lambda asset)."""
