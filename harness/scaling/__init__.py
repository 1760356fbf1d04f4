"""``python -m harness.scaling``: the scaling sweep (docs/benchmarks.md "Scaling sweep")."""
