"""The two-process collector/learner runtime (docs/runtime.md).

``learner_loop.run_training(ctx)`` runs in the ``train`` process (the learner) and spawns
one collector process (``collector.collector_main``) that owns the simulator. They share a
control block of sequence counters (``control``), the inference ring (``inference_ring``)
and the bounded replay ingress (``replay_ingress``); ``liveness`` waits on the peer and
``shutdown`` records how the run ended. The learner's side is split by concept
(docs/runtime.md, "Code layout"); ``protocols`` types the learner and the env it drives.
"""
