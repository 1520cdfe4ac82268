"""Measurement tooling and test support: for scripts and tests, never imported by the Lambda asset or the runtime."""
