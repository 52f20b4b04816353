"""Reading zoo checkpoints without running code from them.

* :func:`safe_yaml_load` parses a zoo ``config.yml``: a YAML safe loader that also reads the zoo's
  ``!!python/object/apply:collections.OrderedDict`` tag as a plain ``dict`` (nothing is eval'ed).
* :class:`RestrictedUnpickler` unpickles only allow-listed globals: numpy arrays and scalars, a
  few containers, SB3 value types, and old ``gym`` spaces mapped to their gymnasium twins.
  Anything else raises :class:`UnsafeObjectError`, naming the file, the entry and the global.
* :func:`pickle_globals` lists the globals a pickle would import, by reading its opcodes only.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from typing import Any

import yaml


class UnsafeObjectError(pickle.UnpicklingError):
    """A pickle or YAML file asked for an object that sb3ext refuses to build."""


class _ZooYamlLoader(yaml.SafeLoader):
    pass


def _construct_ordered_dict(loader: yaml.SafeLoader, node: yaml.Node) -> dict[Any, Any]:
    # The zoo writes OrderedDict([...]) as  !!python/object/apply:collections.OrderedDict [[[k, v], ...]]
    (pairs,) = loader.construct_sequence(node, deep=True)  # type: ignore[arg-type]
    return {key: value for key, value in pairs}


_ZooYamlLoader.add_constructor("tag:yaml.org,2002:python/object/apply:collections.OrderedDict", _construct_ordered_dict)


def safe_yaml_load(text: str, source: str = "<string>") -> Any:
    """Parse zoo YAML safely; any other python tag is refused with the file named."""
    try:
        return yaml.load(text, Loader=_ZooYamlLoader)
    except yaml.constructor.ConstructorError as exc:
        raise UnsafeObjectError(f"{source}: refused YAML object ({exc.problem})") from None


class _Opaque:
    """Stand-in for objects whose state we only read (old gym spaces inside VecNormalize, ...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state


def _randomstate_ctor(*args: Any, **kwargs: Any) -> _Opaque:
    return _Opaque()


def _gymnasium_space(name: str) -> Any:
    import gymnasium.spaces

    return getattr(gymnasium.spaces, name)


_NUMPY = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "float32"),
    ("numpy", "float64"),
    ("numpy", "int64"),
    ("numpy", "bool_"),
}
_BUILTINS = {("collections", "OrderedDict"), ("collections", "deque"), ("builtins", "set"), ("builtins", "frozenset")}
_SPACES = {"Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple"}


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that builds only allow-listed objects.

    :param file: binary stream
    :param source: name of the file and entry, used in error messages
    :param extra: extra allowed globals ``{(module, name): object}``
    """

    def __init__(
        self,
        file: io.BufferedIOBase | io.BytesIO,
        source: str,
        extra: dict[tuple[str, str], Any] | None = None,
        allow_any: bool = False,
    ):
        super().__init__(file)
        self.source = source
        self.extra = extra or {}
        self.allow_any = allow_any

    def find_class(self, module: str, name: str) -> Any:
        key = (module, name)
        if key in self.extra:
            return self.extra[key]
        if key in _NUMPY or key in _BUILTINS:
            return super().find_class(module.replace("numpy.core.", "numpy._core."), name)
        if module.startswith(("gym.spaces", "gymnasium.spaces")) and name in _SPACES:
            return _gymnasium_space(name)
        if module == "numpy.random" or module.startswith("numpy.random."):
            return _randomstate_ctor  # a space's RNG (Generator, bit generator, seed sequence) is not needed
        if self.allow_any:  # explicit trust (trust_remote_code): anything goes, as with plain pickle
            return super().find_class(module, name)
        raise UnsafeObjectError(f"{self.source}: refused to load {module}.{name} (not on sb3ext's allow-list)")


def restricted_loads(
    data: bytes, source: str, extra: dict[tuple[str, str], Any] | None = None, allow_any: bool = False
) -> Any:
    """Unpickle ``data`` with :class:`RestrictedUnpickler` (``allow_any``: trust it, mapping only old gym names)."""
    loaded = RestrictedUnpickler(io.BytesIO(data), source, extra, allow_any).load()
    _reset_space_rngs(loaded)
    return loaded


def _reset_space_rngs(obj: Any) -> None:
    """Give unpickled gymnasium spaces a fresh RNG (created lazily) instead of the opaque stand-in."""
    import gymnasium.spaces

    if isinstance(obj, gymnasium.spaces.Space):
        if isinstance(getattr(obj, "_np_random", None), _Opaque):
            obj._np_random = None  # type: ignore[assignment]
        for child in (
            getattr(obj, "spaces", {}).values() if isinstance(obj, gymnasium.spaces.Dict) else getattr(obj, "spaces", ())
        ):
            _reset_space_rngs(child)


def pickle_globals(data: bytes) -> list[tuple[str, str]]:
    """Globals (module, name) referenced by a pickle, read from its opcodes without executing it."""
    found: list[tuple[str, str]] = []
    strings: list[str] = []
    memo: dict[int, Any] = {}
    last: Any = None
    arg: Any
    for opcode, arg, _pos in pickletools.genops(data):
        name = opcode.name
        if name in {"SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8", "STRING", "SHORT_BINSTRING", "BINSTRING"}:
            strings.append(arg)
            last = arg
        elif name in {"MEMOIZE"}:
            memo[len(memo)] = last
        elif name in {"PUT", "BINPUT", "LONG_BINPUT"}:
            memo[arg] = last
        elif name in {"GET", "BINGET", "LONG_BINGET"}:
            last = memo.get(arg)
            if isinstance(last, str):
                strings.append(last)
        elif name in {"GLOBAL", "INST"}:
            module, qualname = arg.split(" ", 1)
            found.append((module, qualname))
        elif name == "STACK_GLOBAL":
            found.append((strings[-2], strings[-1]) if len(strings) >= 2 else ("?", "?"))
    return found


__all__ = ["UnsafeObjectError", "RestrictedUnpickler", "restricted_loads", "pickle_globals", "safe_yaml_load"]
