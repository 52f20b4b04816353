"""Hostile checkpoints crafted from the shared zoo experts, one per threat class of docs/experts.md.

Each :class:`Hostile` is a zoo folder written by :func:`build_all`, with the error that loading it must
raise (``None``: it must load, harmlessly, because the hostile part is never read). Payloads that would run
code write a marker file; the tests check the marker never appears.
"""

from __future__ import annotations

import base64
import collections
import copyreg
import io
import json
import os
import pickle
import shutil
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch as th

PENDULUM = "sac/Pendulum-v1_1"
WALKER = "ppo/BipedalWalker-v3_1"


@dataclass
class Hostile:
    name: str
    threat: str  # the class of docs/experts.md's table
    base: str  # shared expert it was made from
    error: str | None  # "UnsafeObjectError" / "ValueError" / None (loads, the hostile part is never read)
    match: str  # regex the one-line message must match (after the file name)
    folder: Path | None = None
    cli: bool = False  # also run through the zoo CLI


class As:
    """Pickles as ``NEWOBJ cls`` + ``BUILD state`` (or ``REDUCE cls(*args)``), whatever ``cls`` is."""

    def __init__(self, cls, state=None, args=(), call: bool = False):
        self.cls, self.state, self.args, self.call = cls, state, args, call

    @property  # type: ignore[misc]
    def __class__(self):  # pickle checks NEWOBJ's class against obj.__class__
        return self.cls if not self.call else As

    def __reduce__(self):
        if self.call:
            return (self.cls, self.args) if self.state is None else (self.cls, self.args, self.state)
        return (copyreg.__newobj__, (self.cls, *self.args), self.state)


def marker_path(root: Path) -> Path:
    """The file every payload of the fixtures under ``root`` writes when it runs."""
    return root / "MARKER"


def marker_code(marker: Path) -> str:
    return f"open({str(marker)!r}, 'w').write('pwned')\n"


def build_on_class(module: str, name: str, attr: str, value_module: str, value_name: str) -> bytes:
    """A pickle that sets ``module.name.attr = value_module.value_name`` on the class itself (BUILD slot state)."""
    global_op = lambda m, n: f"c{m}\n{n}\n".encode()  # noqa: E731
    key = attr.encode()
    return (
        b"\x80\x02"
        + global_op(module, name)
        + b"N}"
        + b"X"
        + struct.pack("<I", len(key))
        + key
        + global_op(value_module, value_name)
        + b"s\x86b."
    )


def persistent_id_pickle() -> bytes:
    return b"\x80\x02X\x04\x00\x00\x00evilQ."


def memo_bomb(levels: int = 9) -> bytes:
    """A list of 10 references to a list of 10 references ... (10**levels leaves when expanded)."""
    out = b"\x80\x02]q\x00"  # PROTO 2, EMPTY_LIST, BINPUT 0
    for level in range(levels):  # MARK, 10 x BINGET level, LIST, BINPUT level + 1
        out += b"(" + (b"h" + bytes([level])) * 10 + b"l" + b"q" + bytes([level + 1])
    return out + b"."


# ---------------------------------------------------------------------------------------------------- editing
def _entries(zip_path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(zip_path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _write(zip_path: Path, entries: list[tuple[str, bytes]] | dict[str, bytes], method=zipfile.ZIP_STORED) -> None:
    items = entries.items() if isinstance(entries, dict) else entries
    with zipfile.ZipFile(zip_path, "w", compression=method) as archive:
        for name, content in items:
            archive.writestr(zipfile.ZipInfo(name), content) if name.startswith("..") else archive.writestr(name, content)


def _edit_data(zip_path: Path, change: Callable[[dict], None]) -> None:
    entries = _entries(zip_path)
    data = json.loads(entries["data"])
    change(data)
    entries["data"] = json.dumps(data).encode()
    _write(zip_path, entries)


def _serialized(raw: bytes, type_name: str = "<class 'object'>") -> dict:
    return {":type:": type_name, ":serialized:": base64.b64encode(raw).decode()}


def _tensor_bytes(tensors: dict) -> bytes:
    buffer = io.BytesIO()
    th.save(tensors, buffer)
    return buffer.getvalue()


def _edit_tensors(zip_path: Path, entry: str, change: Callable[[dict], None]) -> None:
    entries = _entries(zip_path)
    tensors = th.load(io.BytesIO(entries[entry]), map_location="cpu", weights_only=True) if entry in entries else {}
    change(tensors)
    entries[entry] = _tensor_bytes(tensors)
    _write(zip_path, entries)


def _vecnormalize_state(folder: Path) -> dict:
    """The statistics of the walker expert, as plain arrays (for crafting variants)."""
    from sb3ext.experts import load_expert

    norm = load_expert(folder).normalization
    assert norm is not None and norm.obs_rms is not None and norm.ret_rms is not None
    return {"obs": (norm.obs_rms.mean, norm.obs_rms.var, norm.obs_rms.count), "ret": (norm.ret_rms.mean, norm.ret_rms.var)}


def _vecnormalize_pickle(obs_mean, obs_var, ret=None, state_extra=None, state=None) -> bytes:
    from stable_baselines3.common.running_mean_std import RunningMeanStd
    from stable_baselines3.common.vec_env.vec_normalize import VecNormalize

    ret = ret if ret is not None else (np.zeros(()), np.ones(()))
    if state is None:
        state = {
            "obs_rms": As(RunningMeanStd, {"mean": obs_mean, "var": obs_var, "count": 1000.0}),
            "ret_rms": As(RunningMeanStd, {"mean": ret[0], "var": ret[1], "count": 1000.0}),
            "clip_obs": 10.0,
            "clip_reward": 10.0,
            "gamma": 0.99,
            "epsilon": 1e-8,
            "training": False,
            "norm_obs": True,
            "norm_reward": True,
            **(state_extra or {}),
        }
    return pickle.dumps(As(VecNormalize, state), protocol=4)


# ---------------------------------------------------------------------------------------------------- fixtures
def build_all(root: Path, shared: Callable[[str], Path], only: set[str] | None = None) -> list[Hostile]:
    """Write every hostile fixture (or those named in ``only``) under ``root`` from the shared experts and return
    their descriptions."""
    marker = marker_path(root)
    made: list[Hostile] = []

    def make(spec: Hostile, edit: Callable[[Path, Path], None]) -> None:
        if only is not None and spec.name not in only:
            return
        folder = root / spec.name / spec.base
        shutil.copytree(shared(spec.base), folder)
        env = spec.base.split("/")[1].rsplit("_", 1)[0]
        edit(folder, folder / f"{env}.zip")
        spec.folder = folder
        made.append(spec)

    # 1. plain JSON fields SB3 acts on ------------------------------------------------------------------
    def env_module(folder: Path, zip_path: Path) -> None:
        (folder / "evil_env_module.py").write_text(marker_code(marker))
        _edit_data(zip_path, lambda d: d.__setitem__("env", "evil_env_module:Evil-v0"))

    make(
        Hostile(
            "env_module",
            "JSON fields",
            PENDULUM,
            "UnsafeObjectError",
            r"field env: refused 'evil_env_module:Evil-v0'",
            cli=True,
        ),
        env_module,
    )

    def policy_kwargs(value) -> Callable[[Path, Path], None]:
        return lambda folder, zip_path: _edit_data(zip_path, lambda d: d.__setitem__("policy_kwargs", value))

    make(
        Hostile(
            "net_arch_huge",
            "JSON fields",
            PENDULUM,
            "UnsafeObjectError",
            r"policy_kwargs\]: net_arch\[1\]=40000 exceeds the \d+ numbers stored in policy.pth",
        ),
        policy_kwargs({"net_arch": [40000, 40000]}),
    )
    make(
        Hostile(
            "net_arch_wide",
            "JSON fields",
            PENDULUM,
            "UnsafeObjectError",
            r"policy_kwargs\]: describes a network of at least \d+ weights, but policy.pth stores \d+",
        ),
        policy_kwargs({"net_arch": [20000, 20000]}),
    )
    make(
        Hostile("n_critics_huge", "JSON fields", PENDULUM, "UnsafeObjectError", r"n_critics=1000000"),
        policy_kwargs({"net_arch": [256, 256], "n_critics": 10**6}),
    )
    make(
        Hostile(
            "policy_kwargs_unknown",
            "JSON fields",
            PENDULUM,
            "ValueError",
            r"key\(s\) evil not accepted by SACPolicy; allowed: ",
        ),
        policy_kwargs({"evil": 1}),
    )
    make(
        Hostile(
            "gamma_not_a_number",
            "JSON fields",
            PENDULUM,
            "ValueError",
            r"field gamma: 'nan'; allowed: a number in \[0.0, 1.0\]",
        ),
        lambda f, z: _edit_data(z, lambda d: d.__setitem__("gamma", "nan")),
    )
    # fields SB3 sizes its buffers from: never read by sb3ext, so harmless
    make(
        Hostile("buffer_sizes_huge", "JSON fields", PENDULUM, None, ""),
        lambda f, z: _edit_data(z, lambda d: d.update(buffer_size=10**12, n_envs=10**9, batch_size=10**12)),
    )

    # 2. pickle tricks on allow-listed names -------------------------------------------------------------
    def field(key: str, raw: bytes) -> Callable[[Path, Path], None]:
        return lambda folder, zip_path: _edit_data(zip_path, lambda d: d.__setitem__(key, _serialized(raw)))

    import gymnasium
    from stable_baselines3.common.noise import NormalActionNoise, VectorizedActionNoise
    from stable_baselines3.common.running_mean_std import RunningMeanStd

    make(
        Hostile(
            "build_on_space_class",
            "pickle tricks",
            PENDULUM,
            "UnsafeObjectError",
            r"\[data: observation_space\]: refused to set state on space Box",
            cli=True,
        ),
        field("observation_space", build_on_class("gymnasium.spaces.box", "Box", "sample", "numpy", "float32")),
    )
    # ConstantSchedule.__call__ = numpy.float32 in a schedule field: scanned, never built
    make(
        Hostile("build_on_schedule_class", "pickle tricks", PENDULUM, None, ""),
        field(
            "lr_schedule", build_on_class("stable_baselines3.common.utils", "ConstantSchedule", "__call__", "numpy", "float32")
        ),
    )

    def vecnormalize(raw_or_fn) -> Callable[[Path, Path], None]:
        def edit(folder: Path, zip_path: Path) -> None:
            raw = raw_or_fn(folder) if callable(raw_or_fn) else raw_or_fn
            (folder / "BipedalWalker-v3" / "vecnormalize.pkl").write_bytes(raw)

        return edit

    make(
        Hostile(
            "build_on_rms_class",
            "pickle tricks",
            WALKER,
            "UnsafeObjectError",
            r"vecnormalize.pkl: refused to set state on RunningMeanStd",
        ),
        vecnormalize(
            build_on_class("stable_baselines3.common.running_mean_std", "RunningMeanStd", "update", "collections", "deque")
        ),
    )
    make(
        Hostile(
            "rms_unknown_attribute",
            "pickle tricks",
            WALKER,
            "UnsafeObjectError",
            r"refused attribute\(s\) update on RunningMeanStd \(it has: count, mean, var\)",
        ),
        vecnormalize(pickle.dumps(As(RunningMeanStd, {"mean": np.zeros(24), "update": collections.deque}), protocol=4)),
    )
    make(
        Hostile(
            "reduce_box_huge", "pickle tricks", PENDULUM, "UnsafeObjectError", r"refused Box space of shape \(40000, 40000\)"
        ),
        field(
            "observation_space", pickle.dumps(As(gymnasium.spaces.Box, call=True, args=(0.0, 1.0, (40000, 40000))), protocol=4)
        ),
    )
    make(
        Hostile(
            "reduce_rms_huge",
            "pickle tricks",
            WALKER,
            "UnsafeObjectError",
            r"refused RunningMeanStd of shape \(40000, 40000\)",
        ),
        vecnormalize(
            _vecnormalize_pickle(None, None, state={"obs_rms": As(RunningMeanStd, call=True, args=(1e-4, (40000, 40000)))})
        ),
    )
    noise = As(VectorizedActionNoise, call=True, args=(NormalActionNoise(np.zeros(1), np.ones(1)), 10**9))
    make(
        Hostile(
            "vectorized_noise",
            "pickle tricks",
            PENDULUM,
            "UnsafeObjectError",
            r"policy_kwargs\]: refused to load stable_baselines3.common.noise.VectorizedActionNoise",
        ),
        field("policy_kwargs", pickle.dumps({"net_arch": [256, 256], "noise": noise}, protocol=4)),
    )
    make(
        Hostile("persistent_id", "pickle tricks", PENDULUM, "UnsafeObjectError", r"refused a pickle persistent id"),
        field("observation_space", persistent_id_pickle()),
    )
    nested = np.array([pickle.dumps(As(exec, call=True, args=(marker_code(marker),)))], dtype=object)
    make(
        Hostile("nested_pickle", "pickle tricks", PENDULUM, "UnsafeObjectError", r"refused array dtype dtype\('O'\)"),
        field("observation_space", pickle.dumps(nested, protocol=4)),
    )
    make(
        Hostile("memo_bomb", "pickle tricks", PENDULUM, "ValueError", r"\[data: observation_space\]: a list, not a Box"),
        field("observation_space", memo_bomb()),
    )

    # 3. tensor entries ----------------------------------------------------------------------------------
    def tensors(entry: str, change: Callable[[dict], None]) -> Callable[[Path, Path], None]:
        return lambda folder, zip_path: _edit_tensors(zip_path, entry, change)

    def rename_variable(t: dict) -> None:
        t["policy.actor.log_std.__class__"] = th.zeros(1)

    make(
        Hostile(
            "variable_walks_attributes",
            "tensor entries",
            PENDULUM,
            "UnsafeObjectError",
            r"\[tensors.pth\]: refused variable 'policy.actor.log_std.__class__'",
            cli=True,
        ),
        tensors("tensors.pth", rename_variable),
    )
    make(
        Hostile(
            "parameter_walks_attributes",
            "tensor entries",
            PENDULUM,
            "UnsafeObjectError",
            r"\[policy.pth\]: refused parameter name 'actor.mu.weight.__class__'",
        ),
        tensors("policy.pth", lambda t: t.__setitem__("actor.mu.weight.__class__", th.zeros(1))),
    )
    make(
        Hostile(
            "zero_stride_variable",
            "tensor entries",
            PENDULUM,
            "ValueError",
            r"\[tensors.pth\]: log_ent_coef has shape \(50000, 50000\)",
        ),
        tensors("tensors.pth", lambda t: t.__setitem__("log_ent_coef", th.zeros(1).expand(50000, 50000))),
    )
    make(
        Hostile(
            "zero_stride_parameter",
            "tensor entries",
            PENDULUM,
            "ValueError",
            r"\[policy.pth\]: actor.latent_pi.0.weight has shape \(50000, 50000\)",
        ),
        tensors("policy.pth", lambda t: t.__setitem__("actor.latent_pi.0.weight", th.zeros(1).expand(50000, 50000))),
    )
    make(
        Hostile(
            "shape_mismatch",
            "tensor entries",
            PENDULUM,
            "ValueError",
            r"\[policy.pth\]: actor.latent_pi.0.weight has shape \(64, 10\), the policy built from the checkpoint needs \(64, 3\)",
        ),
        tensors("policy.pth", lambda t: t.__setitem__("actor.latent_pi.0.weight", th.zeros(64, 10))),
    )

    # 4. containers ---------------------------------------------------------------------------------------
    def zip_bomb(folder: Path, zip_path: Path) -> None:
        entries = _entries(zip_path)
        with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for name, content in entries.items():
                if name != "policy.pth":
                    archive.writestr(name, content)
            with archive.open("policy.pth", "w", force_zip64=True) as handle:
                chunk = bytes(1 << 24)
                for _ in range(64):  # 1 GiB of zeros, ~1 MB compressed
                    handle.write(chunk)

    make(
        Hostile(
            "zip_bomb",
            "containers",
            PENDULUM,
            "UnsafeObjectError",
            r"\[policy.pth\]: declares 1073741824 bytes uncompressed",
            cli=True,
        ),
        zip_bomb,
    )

    def truncated(folder: Path, zip_path: Path) -> None:
        zip_path.write_bytes(zip_path.read_bytes()[: zip_path.stat().st_size // 2])

    make(Hostile("truncated", "containers", PENDULUM, "ValueError", r"not a readable zip archive"), truncated)

    def encrypted(folder: Path, zip_path: Path) -> None:
        raw = bytearray(zip_path.read_bytes())
        for signature, offset in ((b"PK\x01\x02", 8), (b"PK\x03\x04", 6)):  # general-purpose flags, bit 0
            position = raw.find(signature)
            raw[position + offset] |= 0x1
        zip_path.write_bytes(bytes(raw))

    make(Hostile("encrypted", "containers", PENDULUM, "ValueError", r"\[data\]: encrypted entry"), encrypted)
    make(
        Hostile("duplicate_entry", "containers", PENDULUM, "UnsafeObjectError", r"duplicate entry 'data'"),
        lambda f, z: _write(z, [*_entries(z).items(), ("data", b"{}")]),
    )
    make(
        Hostile("path_traversal", "containers", PENDULUM, "UnsafeObjectError", r"refused entry name '../../evil.py'"),
        lambda f, z: _write(z, [*_entries(z).items(), ("../../evil.py", marker_code(marker).encode())]),
    )
    make(
        Hostile("missing_policy", "containers", PENDULUM, "ValueError", r"the checkpoint has no 'policy.pth' entry"),
        lambda f, z: _write(z, {k: v for k, v in _entries(z).items() if k != "policy.pth"}),
    )
    make(
        Hostile("missing_optimizers", "containers", PENDULUM, None, ""),
        lambda f, z: _write(z, {k: v for k, v in _entries(z).items() if "optimizer" not in k}),
    )

    def data_bytes(raw: bytes) -> Callable[[Path, Path], None]:
        return lambda folder, zip_path: _write(zip_path, {**_entries(zip_path), "data": raw})

    make(
        Hostile("data_not_object", "containers", PENDULUM, "ValueError", r"\[data\]: a JSON list, not an object"),
        data_bytes(b"[1, 2]"),
    )
    make(
        Hostile("data_deep", "containers", PENDULUM, "ValueError", r"\[data\]: JSON nested too deeply"),
        data_bytes(b"[" * 100_000 + b"]" * 100_000),
    )
    make(
        Hostile("data_not_utf8", "containers", PENDULUM, "ValueError", r"\[data\]: not UTF-8"),
        data_bytes(b'{"a": "\xff\xfe"}'),
    )
    make(
        Hostile(
            "bad_base64", "containers", PENDULUM, "ValueError", r"field observation_space: ':serialized:' is not valid base64"
        ),
        lambda f, z: _edit_data(
            z, lambda d: d.__setitem__("observation_space", {":type:": "x", ":serialized:": "!!not base64!!"})
        ),
    )

    # 5. YAML and literals ---------------------------------------------------------------------------------
    def config(text: bytes | str) -> Callable[[Path, Path], None]:
        def edit(folder: Path, zip_path: Path) -> None:
            path = folder / "Pendulum-v1" / "config.yml"
            path.write_bytes(text if isinstance(text, bytes) else text.encode())

        return edit

    laughs = (
        "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(9))
        + "frame_stack: *j\n"
    )
    make(
        Hostile(
            "yaml_alias_bomb",
            "YAML and literals",
            PENDULUM,
            "UnsafeObjectError",
            r"config.yml: refused YAML that expands to more than",
            cli=True,
        ),
        config(laughs),
    )
    make(
        Hostile(
            "literal_deep", "YAML and literals", PENDULUM, "ValueError", r"config.yml: normalize: literal of \d+ characters"
        ),
        config("normalize: '" + "[" * 200_000 + "'\n"),
    )
    make(
        Hostile(
            "ordered_dict_malformed", "YAML and literals", PENDULUM, "ValueError", r"config.yml: malformed OrderedDict tag"
        ),
        config("!!python/object/apply:collections.OrderedDict [5]\n"),
    )
    make(
        Hostile("config_not_utf8", "YAML and literals", PENDULUM, "ValueError", r"config.yml: not UTF-8"),
        config(b"policy: \xff\xfe\n"),
    )

    # 6. VecNormalize statistics -----------------------------------------------------------------------------
    def walker_stats(change: Callable[[dict], None]) -> Callable[[Path], bytes]:
        def raw(folder: Path) -> bytes:
            stats = _vecnormalize_state(shared(WALKER))
            mean, var, _ = stats["obs"]
            parts = {"mean": mean.copy(), "var": var.copy()}
            change(parts)
            return _vecnormalize_pickle(parts["mean"], parts["var"], stats["ret"])

        return raw

    make(
        Hostile(
            "vn_shape",
            "VecNormalize",
            WALKER,
            "ValueError",
            r"obs_rms.mean has shape \(5,\), the expert's observations need \(24,\)",
        ),
        vecnormalize(walker_stats(lambda p: p.__setitem__("mean", p["mean"][:5]))),
    )
    make(
        Hostile("vn_negative_var", "VecNormalize", WALKER, "ValueError", r"obs_rms.var holds negative values"),
        vecnormalize(walker_stats(lambda p: p["var"].__setitem__(3, -1.0))),
    )
    make(
        Hostile("vn_nan_var", "VecNormalize", WALKER, "ValueError", r"obs_rms.var holds non-finite values"),
        vecnormalize(walker_stats(lambda p: p["var"].__setitem__(0, np.nan))),
    )
    make(
        Hostile("vn_object_dtype", "VecNormalize", WALKER, "UnsafeObjectError", r"refused array dtype dtype\('O'\)"),
        vecnormalize(walker_stats(lambda p: p.__setitem__("mean", p["mean"].astype(object)))),
    )
    make(
        Hostile("vn_state_not_dict", "VecNormalize", WALKER, "ValueError", r"state of VecNormalize is a list, not a mapping"),
        vecnormalize(
            lambda folder: pickle.dumps(
                As(
                    __import__("stable_baselines3.common.vec_env.vec_normalize", fromlist=["VecNormalize"]).VecNormalize,
                    [1, 2],
                ),
                protocol=4,
            )
        ),
    )

    # 7. symlinks -----------------------------------------------------------------------------------------------
    outside = root / "outside-config.yml"
    outside.write_text("policy: MlpPolicy\n")

    def symlinked_config(folder: Path, zip_path: Path) -> None:
        config_path = folder / "Pendulum-v1" / "config.yml"
        config_path.unlink()
        os.symlink(outside, config_path)

    make(
        Hostile(
            "config_symlink_outside",
            "symlinks",
            PENDULUM,
            "UnsafeObjectError",
            r"config.yml: refused to read it; it resolves to .*outside the expert's folder",
        ),
        symlinked_config,
    )
    return made
