"""sb3ext algorithms: one sub-package per algorithm, named after its rl_zoo3 key."""
