"""Simulation: the G1 scene (MjSpec) and the physics backends; the only trainer package that imports mujoco or warp."""
