"""Reading zoo checkpoint files without running code from them, in bounded memory and time.

* :func:`safe_yaml_load` parses a zoo ``config.yml``: a YAML safe loader that also reads the zoo's
  ``!!python/object/apply:collections.OrderedDict`` tag as a plain ``dict``; text size, nesting depth and
  the size after alias expansion ("billion laughs") are capped.
* :func:`restricted_loads` unpickles with a pure-Python unpickler that never sets state on a real object.
  It builds a tree of records ("an instance of class C was created with these arguments and given this
  state") from allow-listed names only, checks every state attribute against the names that class really
  has, and only then builds real objects through validated constructors (array and space sizes capped).
  Classes, functions and objects it did not create itself never receive state; persistent ids, extension
  codes and nested pickles are refused. Anything else raises :class:`UnsafeObjectError` (hostile content)
  or ``ValueError`` (malformed content), naming the file, the entry and what is allowed.
* :func:`pickle_globals` lists the globals a pickle would import, by reading its opcodes only.
* :func:`safe_literal_eval` is ``ast.literal_eval`` with a length and nesting cap.
"""

from __future__ import annotations

import ast
import io
import math
import pickle
import pickletools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

#: Largest number of elements of an array, a space or a statistics vector built from a checkpoint
#: (an 84x84x4 frame stack is 28k; a 1024x1024x3 image is 3.1M).
MAX_ELEMENTS = 2**22
#: Largest nesting of containers in a pickle, a JSON document, a YAML document or a literal.
MAX_DEPTH = 64
#: Largest YAML / literal text, and largest YAML document after expanding aliases (in nodes).
MAX_TEXT = 1 << 20
MAX_YAML_NODES = 100_000
MAX_LITERAL = 10_000


class UnsafeObjectError(pickle.UnpicklingError):
    """A checkpoint file asked for something sb3ext refuses to do (run code, change a class, exhaust memory)."""


# ---------------------------------------------------------------------------------------------------- YAML
class _ZooYamlLoader(yaml.SafeLoader):
    pass


def _construct_ordered_dict(loader: yaml.SafeLoader, node: yaml.Node) -> dict[Any, Any]:
    # The zoo writes OrderedDict([...]) as  !!python/object/apply:collections.OrderedDict [[[k, v], ...]]
    if not isinstance(node, yaml.SequenceNode):
        raise _MalformedYaml(f"malformed OrderedDict tag at {node.start_mark.line + 1}: expected a list of [key, value] pairs")
    items = loader.construct_sequence(node, deep=True)
    if len(items) != 1 or not isinstance(items[0], list) or not all(isinstance(p, list) and len(p) == 2 for p in items[0]):
        raise _MalformedYaml(
            f"malformed OrderedDict tag at line {node.start_mark.line + 1}: expected one list of [key, value] pairs"
        )
    if not all(isinstance(key, (str, int, float, bool, type(None))) for key, _ in items[0]):
        raise _MalformedYaml(f"malformed OrderedDict tag at line {node.start_mark.line + 1}: keys must be scalars")
    return {key: value for key, value in items[0]}


class _MalformedYaml(ValueError):
    pass


_ZooYamlLoader.add_constructor("tag:yaml.org,2002:python/object/apply:collections.OrderedDict", _construct_ordered_dict)

#: module prefixes whose classes a zoo config.yml may name with ``!!python/name:`` (the zoo writes the optimizer it
#: adds to an Atari DQN / QR-DQN's ``policy_kwargs`` that way); torch's own modules, imported only by full name
_NAMED_CLASS_MODULES = ("torch.optim.", "torch.nn.modules.activation")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")


def _construct_name(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> type:
    module_name, _, attr = suffix.rpartition(".")
    if (
        _NAME.match(suffix)
        and "._" not in suffix
        and module_name.startswith(_NAMED_CLASS_MODULES)
        and not loader.construct_scalar(node)  # type: ignore[arg-type]
    ):
        import importlib

        try:
            found = getattr(importlib.import_module(module_name), attr, None)
        except ImportError:
            found = None
        if isinstance(found, type) and found.__module__ == module_name:
            return found
    raise yaml.constructor.ConstructorError(
        None, None, f"refused class name {suffix[:120]!r} (allowed: torch optimizers and activations)", node.start_mark
    )


_ZooYamlLoader.add_multi_constructor("tag:yaml.org,2002:python/name:", _construct_name)


def _expanded_size(root: yaml.Node, source: str) -> None:
    """Raise if the YAML graph, with every alias expanded, is too large or too deep (alias bombs)."""
    sizes: dict[int, int] = {}
    depth_of: dict[int, int] = {}
    # iterative post-order walk over the node graph (aliases are shared nodes)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            depth_of[key] = 1 + max((depth_of[id(c)] for c in children), default=0)
            if sizes[key] > MAX_YAML_NODES:
                raise UnsafeObjectError(
                    f"{source}: refused YAML that expands to more than {MAX_YAML_NODES} nodes through aliases "
                    "(an alias bomb); zoo configs are small mappings"
                )
            if depth_of[key] > MAX_DEPTH:
                raise ValueError(f"{source}: YAML nested deeper than {MAX_DEPTH} levels; zoo configs are flat mappings")
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise UnsafeObjectError(f"{source}: refused recursive YAML alias")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)


def safe_yaml_load(text: str | bytes, source: str = "<string>") -> Any:
    """Parse zoo YAML safely: no python tags but the zoo's OrderedDict, bounded size, depth and aliases."""
    if isinstance(text, bytes):
        if len(text) > MAX_TEXT:
            raise ValueError(f"{source}: {len(text)} bytes, larger than the {MAX_TEXT}-byte limit for a zoo YAML file")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start}); zoo YAML files are UTF-8"
            ) from None
    if len(text) > MAX_TEXT:
        raise ValueError(f"{source}: {len(text)} characters, larger than the {MAX_TEXT}-character limit for a zoo YAML file")
    try:
        loader = _ZooYamlLoader(text)
    except yaml.YAMLError as exc:  # the reader refuses control characters before parsing
        raise ValueError(f"{source}: not YAML text ({' '.join(str(exc).split())})") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, source)
        return loader.construct_document(node)
    except _MalformedYaml as exc:
        raise ValueError(f"{source}: {exc}") from None
    except yaml.constructor.ConstructorError as exc:
        raise UnsafeObjectError(
            f"{source}: refused YAML object ({exc.problem}); allowed: plain YAML, the zoo's OrderedDict tag and "
            "torch optimizer / activation class names"
        ) from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{source}: malformed YAML ({' '.join(str(exc).split())})") from None
    except RecursionError:
        raise ValueError(f"{source}: YAML nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise ValueError(f"{source}: unreadable value ({' '.join(str(exc).split())[:200]})") from None
    finally:
        loader.dispose()


class LiteralTooComplex(ValueError):
    """A literal longer or deeper than sb3ext parses."""


def safe_literal_eval(text: str, source: str) -> Any:
    """``ast.literal_eval`` of a short Python literal (a zoo hyperparameter string), length and nesting capped.

    :raises LiteralTooComplex: too long or too deep (checked before parsing); ``ValueError`` naming ``source`` for
        text that is not a literal
    """
    if len(text) > MAX_LITERAL:
        raise LiteralTooComplex(f"{source}: literal of {len(text)} characters, longer than the {MAX_LITERAL}-character limit")
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    if deepest > MAX_DEPTH:
        raise LiteralTooComplex(f"{source}: literal nested {deepest} levels deep, more than the limit of {MAX_DEPTH}")
    try:
        return ast.literal_eval(text)
    except (MemoryError, RecursionError):
        raise LiteralTooComplex(f"{source}: literal too complex to parse") from None
    except (ValueError, SyntaxError, TypeError):
        raise ValueError(
            f"{source}: {text[:80]!r} is not a Python literal (numbers, strings, booleans, None, lists, tuples, dicts)"
        ) from None


# ---------------------------------------------------------------------------------------------------- pickle
@dataclass(frozen=True)
class Recipe:
    """How the restricted unpickler may use one allow-listed global.

    :param name: ``module.name`` for messages
    :param value: the real object when the pickle names the global as a plain value (a class in
        ``policy_kwargs``); ``None``: it may not appear as a value
    :param call: builds the result of calling the global (pickle ``REDUCE``) from validated arguments:
        returns a real object or an :class:`_Instance` to be given state and finished later
    :param new: instances may be created without arguments (``NEWOBJ``) and given state (``BUILD``)
    :param attrs: the attribute names the class really has (``BUILD`` state keys); ``None``: the state is
        opaque and dropped (a space's random generator)
    :param finish: turns a finished :class:`_Instance` (arguments and state already real) into the object
    """

    name: str
    value: Any = None
    call: Callable[[_Instance, tuple[Any, ...]], Any] | None = None
    new: bool = False
    attrs: frozenset[str] | None = frozenset()
    finish: Callable[[_Instance, str], Any] | None = None


class _Global:
    __slots__ = ("recipe",)

    def __init__(self, recipe: Recipe):
        self.recipe = recipe


class _Instance:
    """An object the unpickler created itself: its recipe, arguments and state, not yet a real object."""

    __slots__ = ("recipe", "args", "kwargs", "state", "built")

    def __init__(self, recipe: Recipe, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None):
        self.recipe = recipe
        self.args = args
        self.kwargs = kwargs or {}
        self.state: Any = None
        self.built = False


_NUMERIC_KINDS = "biuf?"


def _check_dtype(dtype: Any, source: str) -> np.dtype:
    if not isinstance(dtype, np.dtype) or dtype.kind not in _NUMERIC_KINDS or dtype.fields is not None or dtype.subdtype:
        raise UnsafeObjectError(
            f"{source}: refused array dtype {dtype!r}; allowed: plain numeric dtypes (bool, int, uint, float)"
        )
    return dtype


def check_shape(shape: Any, source: str, what: str = "array") -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    if not isinstance(shape, tuple) or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
        raise ValueError(f"{source}: {what} shape {shape!r} is not a tuple of integers")
    if len(shape) > 32 or any(d < 0 for d in shape):
        raise ValueError(f"{source}: {what} shape {shape!r} is invalid (negative or more than 32 dimensions)")
    size = math.prod(int(d) for d in shape)
    if size > MAX_ELEMENTS:
        raise UnsafeObjectError(
            f"{source}: refused {what} of shape {tuple(int(d) for d in shape)} ({size} elements); "
            f"at most {MAX_ELEMENTS} elements are allowed"
        )
    return tuple(int(d) for d in shape)


def _array_from_bytes(data: Any, dtype: np.dtype, shape: tuple[int, ...], order: str, source: str) -> np.ndarray:
    if not isinstance(data, (bytes, bytearray)):
        raise UnsafeObjectError(f"{source}: refused array data of type {type(data).__name__}; allowed: raw bytes")
    count = math.prod(shape)
    if len(data) != count * dtype.itemsize:
        raise ValueError(
            f"{source}: array of shape {shape} and dtype {dtype} needs {count * dtype.itemsize} bytes, got {len(data)}"
        )
    return np.frombuffer(bytes(data), dtype=dtype, count=count).reshape(shape, order="F" if order == "F" else "C").copy()


# numpy pieces ------------------------------------------------------------------------------------
def _dtype_call(inst: _Instance, args: tuple[Any, ...]) -> _Instance:
    if not args or not isinstance(args[0], str) or len(args) > 3:
        raise ValueError(f"numpy.dtype called with {args!r}")
    inst.args = args
    return inst


def _dtype_finish(inst: _Instance, source: str) -> np.dtype:
    code = inst.args[0]
    try:
        dtype = np.dtype(code)
    except TypeError:
        raise ValueError(f"{source}: unknown numpy dtype {code!r}") from None
    _check_dtype(dtype, source)
    state = inst.state
    if state is not None:
        if not isinstance(state, tuple) or len(state) not in (8, 9) or any(part is not None for part in state[2:5]):
            raise UnsafeObjectError(f"{source}: refused numpy dtype state {state!r}; allowed: plain numeric dtypes")
        if state[1] in ("<", ">"):
            dtype = dtype.newbyteorder(state[1])
        elif state[1] not in ("|", "="):
            raise ValueError(f"{source}: numpy dtype byte order {state[1]!r} is not one of <, >, |, =")
    return dtype


def _reconstruct_call(inst: _Instance, args: tuple[Any, ...]) -> _Instance:
    if len(args) != 3 or not (isinstance(args[0], _Global) and args[0].recipe.name == "numpy.ndarray"):
        raise UnsafeObjectError(f"numpy _reconstruct of {args[:1]!r}; allowed: numpy.ndarray only")
    return inst


def _reconstruct_finish(inst: _Instance, source: str) -> np.ndarray:
    state = inst.state
    if state is None:
        return np.empty((0,), dtype=np.uint8)
    if not isinstance(state, tuple) or len(state) != 5:
        raise ValueError(f"{source}: numpy array state is not (version, shape, dtype, fortran, data)")
    _version, shape, dtype, fortran, data = state
    dtype = _check_dtype(dtype, source)
    return _array_from_bytes(data, dtype, check_shape(shape, source), "F" if fortran else "C", source)


def _frombuffer_finish(inst: _Instance, source: str) -> np.ndarray:
    if len(inst.args) != 4:
        raise ValueError(f"{source}: numpy _frombuffer takes (buffer, dtype, shape, order)")
    data, dtype, shape, order = inst.args
    return _array_from_bytes(data, _check_dtype(dtype, source), check_shape(shape, source), str(order), source)


def _scalar_finish(inst: _Instance, source: str) -> Any:
    if len(inst.args) != 2:
        raise ValueError(f"{source}: numpy scalar takes (dtype, data)")
    dtype = _check_dtype(inst.args[0], source)
    return _array_from_bytes(inst.args[1], dtype, (), "C", source)[()]


def record_args(inst: _Instance, args: tuple[Any, ...]) -> _Instance:
    """A :class:`Recipe` ``call`` that only records the arguments (the ``finish`` step validates and builds)."""
    inst.args = args
    return inst


def _ordered_dict_call(inst: _Instance, args: tuple[Any, ...]) -> dict[Any, Any]:
    if not args:
        return {}
    if len(args) == 1 and isinstance(args[0], list) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in args[0]):
        return {_check_key(k): v for k, v in args[0]}
    raise ValueError(f"OrderedDict called with {type(args[0]).__name__}; allowed: no argument or a list of pairs")


def _deque_call(inst: _Instance, args: tuple[Any, ...]) -> list[Any]:
    if args and isinstance(args[0], list):
        return list(args[0])
    return []


def _check_key(key: Any) -> Any:
    if not isinstance(key, (str, int, float, bool, type(None))):
        raise UnsafeObjectError(f"refused dictionary key of type {type(key).__name__}; allowed: str, int, float, bool, None")
    return key


def _numpy_recipes() -> dict[tuple[str, str], Recipe]:
    recipes: dict[tuple[str, str], Recipe] = {
        ("numpy", "dtype"): Recipe("numpy.dtype", call=_dtype_call, attrs=None, finish=_dtype_finish),
        ("numpy", "ndarray"): Recipe("numpy.ndarray", value=np.ndarray),
    }
    for core in ("numpy.core", "numpy._core"):
        recipes[(f"{core}.multiarray", "_reconstruct")] = Recipe(
            "numpy.ndarray", call=_reconstruct_call, attrs=None, finish=_reconstruct_finish
        )
        recipes[(f"{core}.numeric", "_frombuffer")] = Recipe("numpy._frombuffer", call=record_args, finish=_frombuffer_finish)
        recipes[(f"{core}.multiarray", "scalar")] = Recipe("numpy scalar", call=record_args, finish=_scalar_finish)
    for name in (
        "float16",
        "float32",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool_",
    ):
        recipes[("numpy", name)] = Recipe(f"numpy.{name}", value=getattr(np, name))
    recipes[("collections", "OrderedDict")] = Recipe("collections.OrderedDict", call=_ordered_dict_call)
    recipes[("collections", "deque")] = Recipe("collections.deque", call=_deque_call)
    return recipes


# spaces -----------------------------------------------------------------------------------------
_LEGACY_SPACE_ATTRS = frozenset({"shape", "np_random", "_np_random", "_shape", "dtype"})


def _space_attrs(name: str) -> frozenset[str]:
    import gymnasium.spaces as gs

    reference = {
        "Box": lambda: gs.Box(0, 1, (1,)),
        "Discrete": lambda: gs.Discrete(2),
        "MultiDiscrete": lambda: gs.MultiDiscrete([2]),
        "MultiBinary": lambda: gs.MultiBinary(1),
        "Dict": lambda: gs.Dict({"a": gs.Discrete(2)}),
    }[name]()
    return frozenset(vars(reference)) | _LEGACY_SPACE_ATTRS


def _space_fields(inst: _Instance, names: tuple[str, ...], source: str) -> dict[str, Any]:
    """Constructor arguments of a space from its call arguments or its pickled state."""
    fields: dict[str, Any] = dict(zip(names, inst.args))
    fields.update({k: v for k, v in inst.kwargs.items() if k in names})
    state = inst.state
    if isinstance(state, tuple) and len(state) == 2:
        state = {**(state[0] or {}), **(state[1] or {})}
    if isinstance(state, dict):
        fields.update({k: v for k, v in state.items() if k in names})
        if "shape" in names and "shape" not in state and "_shape" in state:
            fields["shape"] = state["_shape"]
    elif state is not None:
        raise ValueError(f"{source}: space state of type {type(state).__name__}; expected a mapping")
    return fields


def _as_dtype(value: Any, source: str, default: Any) -> np.dtype:
    if value is None:
        return np.dtype(default)
    if isinstance(value, type) and issubclass(value, np.generic):
        value = np.dtype(value)
    return _check_dtype(value, source)


def _box_finish(inst: _Instance, source: str) -> Any:
    import gymnasium.spaces as gs

    fields = _space_fields(inst, ("low", "high", "shape", "dtype"), source)
    shape = fields.get("shape")
    low, high = fields.get("low"), fields.get("high")
    if shape is None and isinstance(low, np.ndarray):
        shape = low.shape
    shape = check_shape(shape, source, "Box space")
    dtype = _as_dtype(fields.get("dtype"), source, np.float32)
    for bound in (low, high):
        if isinstance(bound, np.ndarray):
            if bound.shape not in (shape, ()):
                raise ValueError(f"{source}: Box bound of shape {bound.shape} for a space of shape {shape}")
            _check_dtype(bound.dtype, source)
        elif not isinstance(bound, (int, float, np.number)) or isinstance(bound, bool):
            raise ValueError(f"{source}: Box bound {bound!r} is neither a number nor an array")
    return gs.Box(low=low, high=high, shape=shape, dtype=dtype)  # type: ignore[arg-type]  # both checked above


def _int_field(fields: dict[str, Any], key: str, source: str, default: Any = None) -> int:
    value = fields.get(key, default)
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise ValueError(f"{source}: space field {key}={value!r} is not an integer")
    return int(value)


def _discrete_finish(inst: _Instance, source: str) -> Any:
    import gymnasium.spaces as gs

    fields = _space_fields(inst, ("n", "seed", "start", "dtype"), source)
    n = _int_field(fields, "n", source)
    if n <= 0:
        raise ValueError(f"{source}: Discrete space with n={n}; n must be positive")
    return gs.Discrete(n, start=_int_field(fields, "start", source, 0))


def _multidiscrete_finish(inst: _Instance, source: str) -> Any:
    import gymnasium.spaces as gs

    fields = _space_fields(inst, ("nvec", "dtype", "seed", "start"), source)
    nvec = np.asarray(fields.get("nvec"))
    check_shape(nvec.shape, source, "MultiDiscrete space")
    if nvec.dtype.kind not in "iu" or nvec.size == 0 or np.any(nvec <= 0) or np.any(nvec > 1 << 31):
        raise ValueError(f"{source}: MultiDiscrete nvec {nvec!r} must be positive integers of at most 2**31")
    return gs.MultiDiscrete(nvec)


def _multibinary_finish(inst: _Instance, source: str) -> Any:
    import gymnasium.spaces as gs

    fields = _space_fields(inst, ("n",), source)
    n = fields.get("n")
    shape = check_shape(tuple(n) if isinstance(n, (list, tuple, np.ndarray)) else n, source, "MultiBinary space")
    return gs.MultiBinary(list(shape) if len(shape) > 1 else shape[0])


#: most keys of a Dict observation space
MAX_DICT_KEYS = 64


def _dict_finish(inst: _Instance, source: str) -> Any:
    import gymnasium.spaces as gs

    fields = _space_fields(inst, ("spaces", "seed"), source)
    subspaces = fields.get("spaces")
    if not isinstance(subspaces, dict) or not 0 < len(subspaces) <= MAX_DICT_KEYS:
        raise ValueError(f"{source}: Dict space of {type(subspaces).__name__}; allowed: 1 to {MAX_DICT_KEYS} named spaces")
    flat = (gs.Box, gs.Discrete, gs.MultiDiscrete, gs.MultiBinary)
    for key, sub in subspaces.items():
        if not isinstance(key, str) or len(key) > 64 or not isinstance(sub, flat):
            raise ValueError(
                f"{source}: Dict space entry {str(key)[:64]!r}: {type(sub).__name__}; allowed: text keys of Box, "
                "Discrete, MultiDiscrete or MultiBinary spaces (no nesting)"
            )
    return gs.Dict(dict(subspaces))


def _space_recipes(prefixes: Iterable[str] = ("gym.spaces", "gymnasium.spaces")) -> dict[str, Recipe]:
    finishers = {
        "Box": _box_finish,
        "Discrete": _discrete_finish,
        "MultiDiscrete": _multidiscrete_finish,
        "MultiBinary": _multibinary_finish,
        "Dict": _dict_finish,
    }
    return {
        name: Recipe(f"space {name}", call=record_args, new=True, attrs=_space_attrs(name), finish=finish)
        for name, finish in finishers.items()
    }


def _opaque_finish(inst: _Instance, source: str) -> None:
    return None  # a space's random generator: not needed, dropped


_OPAQUE = Recipe("numpy.random state", value="<numpy.random>", call=record_args, new=True, attrs=None, finish=_opaque_finish)


# the unpickler ----------------------------------------------------------------------------------
#: The pure-Python unpickler: its opcode handlers can be replaced one by one (the C one's cannot).
_PyUnpickler: Any = pickle._Unpickler  # type: ignore[attr-defined]


def printable(text: str, limit: int = 120) -> str:
    """``text`` as it may appear in a one-line message: itself when short and printable, else its ``repr``, cut."""
    return text if len(text) <= limit and text.isprintable() else repr(text[:limit])


class RestrictedUnpickler(_PyUnpickler):
    """Pure-Python unpickler that builds records from allow-listed recipes only (see the module docstring).

    :param data: the pickle
    :param source: file and entry, for messages
    :param recipes: allowed globals ``{(module, name): Recipe}``; spaces (``gym.spaces`` / ``gymnasium.spaces``)
        and numpy's random-state constructors are added when ``spaces`` is true
    """

    dispatch: dict[int, Any] = dict(_PyUnpickler.dispatch)

    def __init__(self, data: bytes, source: str, recipes: Mapping[tuple[str, str], Recipe], spaces: bool = True):
        super().__init__(io.BytesIO(data))
        self.source = source
        self.recipes = recipes
        self.spaces = _space_recipes() if spaces else {}
        self.created: list[Any] = []

    def _allowed(self) -> str:
        names = sorted({r.name for r in self.recipes.values()} | {r.name for r in self.spaces.values()})
        return ", ".join(names)

    def find_class(self, module: str, name: str) -> _Global:
        recipe = self.recipes.get((module, name))
        if recipe is None and self.spaces and module.split(".")[0] in ("gym", "gymnasium") and ".spaces" in module:
            recipe = self.spaces.get(name)
        if recipe is None and self.spaces and (module == "numpy.random" or module.startswith("numpy.random.")):
            recipe = _OPAQUE
        if recipe is None:
            raise UnsafeObjectError(
                f"{self.source}: refused to load {printable(f'{module}.{name}')} (allowed here: {self._allowed()})"
            )
        return _Global(recipe)

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafeObjectError(f"{self.source}: refused a pickle persistent id ({str(pid)[:40]!r}); checkpoints hold none")

    def _create(self, target: Any, args: Any, kwargs: Any, how: str) -> Any:
        if not isinstance(target, _Global):
            raise UnsafeObjectError(
                f"{self.source}: refused to call a {type(target).__name__} ({how}); only allow-listed names"
            )
        if not isinstance(args, tuple):
            raise ValueError(f"{self.source}: {how} arguments of {target.recipe.name} are not a tuple")
        recipe = target.recipe
        if how == "NEWOBJ":
            if not recipe.new:
                raise UnsafeObjectError(f"{self.source}: refused to create {recipe.name} without calling it")
            return _Instance(recipe, args, kwargs)
        if recipe.call is None or kwargs:
            raise UnsafeObjectError(f"{self.source}: refused to call {recipe.name} (it may only be named)")
        result = recipe.call(_Instance(recipe), args)
        if not isinstance(result, (_Instance, list, dict, tuple)):
            self.created.append(result)  # a real object a recipe built from checked arguments (torch.device, ...)
        return result

    def load_reduce(self) -> None:
        args = self.stack.pop()
        self.stack[-1] = self._create(self.stack[-1], args, None, "REDUCE")

    def load_newobj(self) -> None:
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._create(cls, args, None, "NEWOBJ"))

    def load_newobj_ex(self) -> None:
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
            raise ValueError(f"{self.source}: NEWOBJ_EX keyword arguments are not a str-keyed mapping")
        self.append(self._create(cls, args, kwargs, "NEWOBJ"))

    def load_obj(self) -> None:
        args = self.pop_mark()
        cls = args.pop(0)
        self.append(self._create(cls, tuple(args), None, "REDUCE"))

    def load_inst(self) -> None:
        module = self.readline()[:-1].decode("ascii")
        name = self.readline()[:-1].decode("ascii")
        cls = self.find_class(module, name)
        self.append(self._create(cls, tuple(self.pop_mark()), None, "REDUCE"))

    def load_build(self) -> None:
        state = self.stack.pop()
        inst = self.stack[-1]
        if not isinstance(inst, _Instance):
            what = inst.recipe.name if isinstance(inst, _Global) else type(inst).__name__
            raise UnsafeObjectError(
                f"{self.source}: refused to set state on {what} (state may only go to an instance this file created)"
            )
        if inst.built:
            raise UnsafeObjectError(f"{self.source}: refused to set the state of {inst.recipe.name} twice")
        allowed = inst.recipe.attrs
        if allowed is not None:
            parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
            for part in parts:
                if part is None:
                    continue
                if not isinstance(part, dict):
                    raise ValueError(f"{self.source}: state of {inst.recipe.name} is a {type(part).__name__}, not a mapping")
                bad = sorted(str(k) for k in part if not isinstance(k, str) or k not in allowed)
                if bad:
                    raise UnsafeObjectError(
                        f"{self.source}: refused attribute(s) {', '.join(bad)} on {inst.recipe.name} "
                        f"(it has: {', '.join(sorted(allowed))})"
                    )
        inst.state = state
        inst.built = True

    def _container(self, kind: type | tuple[type, ...], opcode: str) -> Any:
        target = self.stack[-1]
        if not isinstance(target, kind):
            what = target.recipe.name if isinstance(target, (_Global, _Instance)) else type(target).__name__
            raise UnsafeObjectError(f"{self.source}: refused {opcode} on {what} (only on lists, dicts and sets)")
        return target

    def load_append(self) -> None:
        value = self.stack.pop()
        self._container(list, "APPEND").append(value)

    def load_appends(self) -> None:
        items = self.pop_mark()
        self._container(list, "APPENDS").extend(items)

    def load_setitem(self) -> None:
        value = self.stack.pop()
        key = self.stack.pop()
        self._container(dict, "SETITEM")[_check_key(key)] = value

    def load_setitems(self) -> None:
        items = self.pop_mark()
        target = self._container(dict, "SETITEMS")
        for i in range(0, len(items), 2):
            target[_check_key(items[i])] = items[i + 1]

    def load_additems(self) -> None:
        items = self.pop_mark()
        target = self._container(set, "ADDITEMS")
        for item in items:
            target.add(_check_key(item))

    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex
    dispatch[pickle.OBJ[0]] = load_obj
    dispatch[pickle.INST[0]] = load_inst
    dispatch[pickle.BUILD[0]] = load_build
    dispatch[pickle.APPEND[0]] = load_append
    dispatch[pickle.APPENDS[0]] = load_appends
    dispatch[pickle.SETITEM[0]] = load_setitem
    dispatch[pickle.SETITEMS[0]] = load_setitems
    dispatch[pickle.ADDITEMS[0]] = load_additems


@dataclass
class _Finisher:
    source: str
    created: list[Any] = field(default_factory=list)
    done: dict[int, Any] = field(default_factory=dict)
    active: set[int] = field(default_factory=set)

    def __call__(self, obj: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise ValueError(f"{self.source}: pickle nested deeper than {MAX_DEPTH} levels")
        if obj is None or isinstance(
            obj, (bool, int, float, complex, str, bytes, bytearray, np.generic, np.ndarray, np.dtype)
        ):
            return obj
        key = id(obj)
        if key in self.done:
            return self.done[key]
        if key in self.active:
            raise UnsafeObjectError(f"{self.source}: refused a self-referencing pickle")
        self.active.add(key)
        try:
            result = self._finish(obj, depth)
        finally:
            self.active.discard(key)
        self.done[key] = result
        return result

    def _finish(self, obj: Any, depth: int) -> Any:
        if isinstance(obj, list):
            return [self(item, depth + 1) for item in obj]
        if isinstance(obj, tuple):
            return tuple(self(item, depth + 1) for item in obj)
        if isinstance(obj, dict):
            return {_check_key(self(k, depth + 1)): self(v, depth + 1) for k, v in obj.items()}
        if isinstance(obj, (set, frozenset)):
            return type(obj)(_check_key(item) for item in obj)
        if isinstance(obj, _Global):
            if obj.recipe.value is None:
                raise UnsafeObjectError(f"{self.source}: refused {obj.recipe.name} as a value (it may only be called)")
            return obj.recipe.value
        if any(obj is item for item in self.created):
            return obj
        if isinstance(obj, _Instance):
            obj.args = self(obj.args, depth + 1)
            obj.kwargs = {k: self(v, depth + 1) for k, v in obj.kwargs.items()}
            obj.state = self(obj.state, depth + 1)
            assert obj.recipe.finish is not None, obj.recipe.name
            return obj.recipe.finish(obj, self.source)
        raise UnsafeObjectError(f"{self.source}: refused object of type {type(obj).__name__}")


def restricted_loads(
    data: bytes, source: str, recipes: Mapping[tuple[str, str], Recipe] | None = None, spaces: bool = True
) -> Any:
    """Unpickle ``data`` from allow-listed recipes only (see :class:`RestrictedUnpickler`).

    :param recipes: allowed globals besides numpy arrays, scalars, dtypes and ``collections``
    :param spaces: also allow gym / gymnasium spaces (with their random-state objects, which are dropped)
    :raises UnsafeObjectError: hostile content; ``ValueError``: malformed content (both name ``source``)
    """
    allowed = {**_numpy_recipes(), **(recipes or {})}
    try:
        unpickler = RestrictedUnpickler(data, source, allowed, spaces)
        raw = unpickler.load()
        return _Finisher(source, unpickler.created)(raw)
    except (UnsafeObjectError, ValueError) as exc:
        message = " ".join(str(exc).split())  # one line, whatever a builder (gymnasium, numpy) wrote
        if message == str(exc) and message.startswith(source):
            raise
        kind = UnsafeObjectError if isinstance(exc, UnsafeObjectError) else ValueError
        prefix = "" if message.startswith(source) else f"{source}: "
        raise kind(f"{prefix}{message[:500]}") from None  # a refusal deep in the pickle names the file too
    except (
        pickle.UnpicklingError,
        EOFError,
        IndexError,
        KeyError,
        TypeError,
        AttributeError,
        OverflowError,
        MemoryError,
        RecursionError,
        UnicodeDecodeError,
    ) as exc:
        raise ValueError(f"{source}: malformed pickle ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None


class _TrustingUnpickler(pickle.Unpickler):
    """Plain unpickling (runs code from the file), mapping only old ``gym`` space names to gymnasium's."""

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("gym.spaces"):
            import gymnasium.spaces

            return getattr(gymnasium.spaces, name)
        return super().find_class(module.replace("numpy.core.", "numpy._core."), name)


def trusting_loads(data: bytes) -> Any:
    """Unpickle with full trust (``trust_remote_code``): runs code from the file."""
    return _TrustingUnpickler(io.BytesIO(data)).load()


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
        elif name in {"PERSID", "BINPERSID", "EXT1", "EXT2", "EXT4"}:
            found.append(("<pickle>", name))
    return found


__all__ = [
    "MAX_ELEMENTS",
    "Recipe",
    "check_shape",
    "record_args",
    "RestrictedUnpickler",
    "UnsafeObjectError",
    "pickle_globals",
    "restricted_loads",
    "LiteralTooComplex",
    "safe_literal_eval",
    "safe_yaml_load",
    "trusting_loads",
]
