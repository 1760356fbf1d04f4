"""Motion clip asset ids and the short names the commands accept for them."""

from __future__ import annotations

MOTION_KEY = "env.commands.motion.motion_file"
"""The config key (contract spelling) that selects the reference clip."""

SYNTHETIC_MOTION_ID = "motions/g1/synthetic_dance.npz"
SYNTHETIC_MARCH_ID = "motions/g1/synthetic_march.npz"
DANCE_MOTION_ID = "motions/g1/dance1_subject2_part.npz"

MOTION_IDS: dict[str, str] = {
    "synthetic": SYNTHETIC_MOTION_ID,
    "march": SYNTHETIC_MARCH_ID,
    "dance": DANCE_MOTION_ID,
}
"""Short name -> asset id (``g1-soak --motion dance``, ``g1-motion``)."""
