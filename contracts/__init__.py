"""The contracts both sides rely on: file formats, schemas, names and identities.

Pure Python (no torch, mujoco or warp). ``trainer/`` and ``harness/`` both import it;
it imports neither. docs/contracts.md describes what it holds.
"""
