"""Writers of the run directory (docs/contracts.md §run-directory, §run-summary, §metric-schema): run_summary.json (``summary``), the
schema-v1 TensorBoard event file (``metrics``), progress.jsonl (``progress``) and
checkpoints (``checkpoint``)."""
