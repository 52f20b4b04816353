"""sb3ext: algorithms, environments and rl-zoo3 plug-ins for Stable-Baselines3.

Importing ``sb3ext`` is cheap: the algorithms are imported on first attribute access, so the
interpreter-start hook (``sb3ext._hook``) costs nothing until gymnasium or rl_zoo3 is imported.
"""

__version__ = "0.1.0"

_LAZY = {
    "AggreVaTeD": "sb3ext.algos.aggrevated",
    "KLPPO": "sb3ext.algos.ppo_kl",
    "RPO": "sb3ext.algos.rpo",
    "TanhPPO": "sb3ext.algos.ppo_tanh",
    "Expert": "sb3ext.experts",
    "load_expert": "sb3ext.experts",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sb3ext' has no attribute {name!r}")
