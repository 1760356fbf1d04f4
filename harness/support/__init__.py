"""``support-matrix``: evidence levels per owner and platform facts per backend (CONTRACTS §13),
generated from checked-in files without importing the trainer."""
