"""Messages for bad hyperparameters, shared by every sb3ext algorithm."""

from __future__ import annotations

import difflib
import inspect
import numbers
from typing import Any


def unknown_kwargs_message(cls: type, unknown: dict[str, Any]) -> str:
    """``Algo: unknown hyperparameter(s) 'x' (did you mean 'y'?); allowed: ...`` for ``cls.__init__``."""
    init = cls.__init__  # type: ignore[misc]
    allowed = [name for name in inspect.signature(init).parameters if name not in {"self", "unknown_kwargs"}]
    parts = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name, allowed, n=1)
        parts.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"{cls.__name__}: unknown hyperparameter(s) {', '.join(parts)}; allowed: {', '.join(allowed)}"


def invalid(algo: str, name: str, value: Any, allowed: str) -> ValueError:
    """``ValueError`` naming the algorithm, the bad setting, its value and what is allowed."""
    return ValueError(f"{algo}: invalid {name}={value!r}; allowed: {allowed}")


def check_ranges(algo: str, owner: Any, ranges: dict[str, tuple[bool, float, float, str]]) -> None:
    """Each ``name: (an integer?, lowest, highest, what is allowed)`` of ``ranges`` is an attribute of ``owner`` in
    range (NaN is not); otherwise :func:`invalid` names it."""
    for name, (integer, low, high, allowed) in ranges.items():
        value = getattr(owner, name)
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise invalid(algo, name, value, allowed)
        if (integer and not float(value).is_integer()) or not low <= float(value) <= high:
            raise invalid(algo, name, value, allowed)
