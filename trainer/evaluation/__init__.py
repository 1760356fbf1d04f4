"""Fixed-protocol tracking evaluation (docs/evaluation.md): protocol, metrics, runner, the
``evaluation.json`` document and the ``evaluate`` command. The in-run stage of ``train`` is
part of the runtime (``trainer.runtime.evaluation_stage``)."""
