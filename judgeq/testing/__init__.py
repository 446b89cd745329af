"""Test helpers for judgeq (fake services for tests and benchmarks)."""
