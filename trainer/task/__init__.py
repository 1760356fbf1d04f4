"""The G1 motion-tracking task: reference motions, observation/reward/termination terms and the env."""
