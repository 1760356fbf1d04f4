"""Benchmarks of trainer components (run as ``python -m trainer.bench.<name>``)."""
