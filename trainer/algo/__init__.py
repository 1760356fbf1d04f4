"""FlashSAC learning algorithm as pure tensor code (docs/flashsac.md).

Modules, one concept each: ``config`` (``FlashSacCfg``), ``networks`` (actor, twin
distributional critic), ``losses`` (pure loss maths), ``norms`` (weight/BN/RMS
renormalisation), ``replay`` (device ring), ``exploration`` (repeated noise),
``reward_scaler`` (return-based reward scale), ``schedule`` (cosine lr) and ``learner``
(``FlashSacLearner``, the orchestration). Nothing here imports mujoco or warp.
"""

from __future__ import annotations
