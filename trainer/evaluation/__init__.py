"""Fixed-protocol tracking evaluation (docs/evaluation.md): protocol, metrics, runner, the
``evaluation.json`` document, the in-run stage of ``train`` and the ``evaluate`` command."""
