"""The pluggable trainer: FlashSAC for Unitree G1 motion tracking on MuJoCo / MuJoCo Warp."""
