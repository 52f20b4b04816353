"""Interpreter-start hook that plugs sb3ext into an unmodified rl-zoo3.

``sb3ext-zoo.pth`` (installed at the root of site-packages) imports this module at every
interpreter start. It only installs a ``sys.meta_path`` finder: standard library only, no import
of rl_zoo3, torch or gymnasium. When one of the zoo modules in ``_TARGETS`` finishes executing,
the finder calls :func:`sb3ext.zoo.on_zoo_import`, which registers our algorithms, samplers,
default hyperparameter files and environments in it.

The hook is idempotent (installing it twice keeps one finder) and never breaks the zoo: any
error in the registration is turned into a warning.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

_TARGETS = frozenset(
    {"rl_zoo3.utils", "rl_zoo3.hyperparams_opt", "rl_zoo3.exp_manager", "rl_zoo3.import_envs", "huggingface_sb3"}
)


def _after_import(module: ModuleType) -> None:
    try:
        from sb3ext.zoo import on_zoo_import

        on_zoo_import(module)
    except Exception as exc:  # never break the zoo
        warnings.warn(f"sb3ext could not register itself in {module.__name__}: {exc!r}", RuntimeWarning, stacklevel=2)


class _LoaderProxy(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _after_import(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class ZooImportHook(importlib.abc.MetaPathFinder):
    """Wraps the loaders of the zoo modules in ``_TARGETS`` to run sb3ext's registration."""

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None) -> Any:
        if fullname not in _TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and not isinstance(spec.loader, _LoaderProxy):
                    spec.loader = _LoaderProxy(spec.loader)
                return spec
        return None


def install() -> None:
    """Install the finder once, and register in zoo modules that are already imported."""
    if not any(isinstance(finder, ZooImportHook) for finder in sys.meta_path):
        sys.meta_path.insert(0, ZooImportHook())
    for name in sorted(_TARGETS):
        module = sys.modules.get(name)
        if module is not None:
            _after_import(module)


try:
    install()
except Exception as exc:  # pragma: no cover - defensive: a .pth line must never fail
    warnings.warn(f"sb3ext could not install its rl_zoo3 hook: {exc!r}", RuntimeWarning, stacklevel=1)
