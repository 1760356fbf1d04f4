"""cumps: a user-owned CUDA MPS control daemon lifecycle (docs/contracts.md §cumps).

``daemon`` starts and stops daemons and ``cli`` is the command; GPU discovery, the ownership
records and the read-only pipe checks the trainer shares live in ``contracts.mps``.
"""
