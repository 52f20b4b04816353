"""Interpreter-start hook that plugs sb3ext into gymnasium's registry and an unmodified rl-zoo3.

``sb3ext-zoo.pth`` (installed at the root of site-packages) imports this module at every
interpreter start. It only installs a ``sys.meta_path`` finder and imports nothing beyond ``sys``
(no rl_zoo3, torch, gymnasium, typing or importlib.abc: interpreter start stays as fast as it was).
When one of the modules in ``_TARGETS`` finishes executing, the finder calls
:func:`sb3ext.zoo.on_zoo_import`, which registers our environment ids in gymnasium's registry
(string entry points only, so ``gym.make("sb3ext/...")`` works in every process, SubprocVecEnv
workers included) and our algorithms, samplers and default hyperparameter files in the zoo.

The hook is idempotent (installing it twice keeps one finder) and never breaks the importing
program: any error in the registration is turned into a warning.
"""

from __future__ import annotations

import sys

_TARGETS = frozenset(
    {
        "gymnasium",
        "rl_zoo3.utils",
        "rl_zoo3.hyperparams_opt",
        "rl_zoo3.exp_manager",
        "rl_zoo3.import_envs",
        "rl_zoo3.enjoy",
        "rl_zoo3.record_video",
        "huggingface_sb3",
    }
)


def _after_import(module) -> None:  # type: ignore[no-untyped-def]
    try:
        from sb3ext.zoo import on_zoo_import

        on_zoo_import(module)
    except Exception as exc:  # never break the importing program
        import warnings

        warnings.warn(f"sb3ext could not register itself in {module.__name__}: {exc!r}", RuntimeWarning, stacklevel=2)


class _LoaderProxy:
    """Delegates to the real loader and runs the registration once the module has executed."""

    def __init__(self, loader) -> None:  # type: ignore[no-untyped-def]
        self._loader = loader

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:  # type: ignore[no-untyped-def]
        self._loader.exec_module(module)
        _after_import(module)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._loader, name)


class ZooImportHook:
    """``sys.meta_path`` finder wrapping the loaders of the modules in ``_TARGETS``."""

    def find_spec(self, fullname: str, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname not in _TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and not isinstance(spec.loader, _LoaderProxy):
                    spec.loader = _LoaderProxy(spec.loader)  # type: ignore[assignment]
                return spec
        return None


def install() -> None:
    """Install the finder once, and register in target modules that are already imported."""
    if not any(type(finder).__name__ == "ZooImportHook" for finder in sys.meta_path):
        sys.meta_path.insert(0, ZooImportHook())
    for name in sorted(_TARGETS):
        module = sys.modules.get(name)
        if module is not None:
            _after_import(module)


try:
    install()
except Exception as exc:  # pragma: no cover - defensive: a .pth line must never fail
    import warnings

    warnings.warn(f"sb3ext could not install its import hook: {exc!r}", RuntimeWarning, stacklevel=1)
