"""Writers of the run directory (CONTRACTS §3-§5): run_summary.json (``summary``), the
schema-v1 TensorBoard event file (``metrics``), progress.jsonl (``progress``) and
checkpoints (``checkpoint``)."""
