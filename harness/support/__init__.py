"""``support-matrix``: evidence levels per owner and platform facts per backend (docs/contracts.md §support-matrix),
generated from checked-in files without importing the trainer."""
