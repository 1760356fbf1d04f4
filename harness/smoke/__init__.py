"""The GPU smoke: one device call that runs the probe, the null and MPS soaks, their metrics
and the GPU tests, and prints one table (``cli``); ``steps`` says what runs and how it is
judged, ``parse`` reads the outputs."""
