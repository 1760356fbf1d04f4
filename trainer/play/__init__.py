"""``play``: watch a trained policy track its reference, and export it to ONNX (docs/play.md).

One module per step: :mod:`~trainer.play.source` (run directory or checkpoint → the recorded
configs and the actor), :mod:`~trainer.play.rollout` (the deterministic policy over the whole
clip on CPU MuJoCo), :mod:`~trainer.play.render` and :mod:`~trainer.play.video` (offscreen
frames with the reference ghost, H.264 MP4 and filmstrip PNG), :mod:`~trainer.play.export`
(the ONNX actor with its deployment metadata, verified against torch),
:mod:`~trainer.play.record` (the ``play`` section of ``run_summary.json``),
:mod:`~trainer.play.session` (the steps in order, each failure recorded) and
:mod:`~trainer.play.hook` (what ``train`` runs after a completed run).
"""
