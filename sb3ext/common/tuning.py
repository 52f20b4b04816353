"""Optuna samplers and converters for sb3ext algorithms, registered in rl_zoo3 by :mod:`sb3ext.zoo`."""

from collections.abc import Callable
from typing import Any

SAMPLERS: dict[str, Callable[..., dict[str, Any]]] = {}
CONVERTERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
