"""The collector/learner runtime (docs/runtime.md).

``learner_loop.run_training(ctx)`` runs in the ``train`` process (the learner) and starts
one collector that owns the simulator: a spawned process (``collector.collector_main``) or,
with ``training.collector_placement=thread``, a thread of ``train``
(``collector.collector_thread_main``). They share a
control block of sequence counters (``control``), the inference ring (``inference_ring``)
and the bounded replay ingress (``replay_ingress``); ``liveness`` waits on the peer and
``shutdown`` records how the run ended. The learner's side is split by concept
(docs/runtime.md, "Code layout"); ``protocols`` types the learner and the env it drives.
"""
