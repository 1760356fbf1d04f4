"""cumps: a user-owned CUDA MPS control daemon lifecycle (CONTRACTS §11).

``gpus`` lists physical GPUs and parses ``--gpus`` selectors; ``records`` owns the ownership
records and their liveness; ``daemon`` starts and stops daemons; ``probe`` holds the
read-only checks the trainer shares (pure Python, torch-free); ``cli`` is the command.
"""
