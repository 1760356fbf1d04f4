"""TensorBoard metrics: the v1 tag registry, a strict event-file reader and ``extract-metrics``.

``harness.metrics.registry`` loads ``schemas/metric_registry.v1.json`` (the trainer's writer
checks tags against it too); ``harness.metrics.events`` reads every scalar of an event file
and fails on a damaged record; ``harness.metrics.cli`` is the ``extract-metrics`` command.
Nothing here imports torch or tensorflow.
"""
