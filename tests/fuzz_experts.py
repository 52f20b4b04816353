"""A seeded mutation fuzzer for expert and learner loading (issue 46): mutants of real zoo experts and of sb3ext's own
saved learners, loaded by worker processes (``load_expert``, or the algorithm's safe ``load``).

``python -m tests.fuzz_experts --cases 1000 --seed 0`` prints the figures. Each mutant is a copy of a base expert
with one change at one layer: the zip's bytes, its entries, the inner torch zips, the ``data`` JSON, the pickle of a
serialized field, a field transplanted from another expert, ``config.yml`` or ``vecnormalize.pkl``.

A worker process loads mutants one after another under a memory cap (``RLIMIT_AS``) and a CPU-time limit per case
(``SIGALRM``); a worker that dies (a crash, the memory cap) is replaced and its case counted. Outcomes:

* ``refused``: one line, ``ValueError`` or ``UnsafeObjectError``, naming a file of the expert;
* ``loaded``: the expert acts with finite actions (``same`` as the original on fixed observations, or ``different``);
* ``unclear`` (another exception, or a message that names no file or spans lines), ``wrong`` (non-finite actions),
  ``crashed``, ``hung``, ``memory``: failures.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "sb3ext" / "experts"
#: base experts: (folder, env id for the observations); shared ones are used when present
BASES = [
    (SHIPPED / "sac" / "Pendulum-v1_1", "Pendulum-v1"),
    (SHIPPED / "ppo" / "sb3ext-CartPole-v0_1", None),
]
SHARED = [("dqn/CartPole-v1_1", "CartPole-v1"), ("ppo/BipedalWalker-v3_1", "BipedalWalker-v3"), ("tqc/Hopper-v3_1", None)]
#: sb3ext's algorithms whose own checkpoints are fuzzed too (saved after a few steps on Pendulum-v1)
LEARNERS = ("AggreVaTeD", "KLPPO", "stable_baselines3:SAC")
LAYERS = ("zip_bytes", "entries", "inner_torch", "json", "pickle", "transplant", "config", "vecnormalize", "weights",
          "legacy_torch", "classes")  # fmt: skip
FAILURES = ("unclear", "wrong", "crashed", "hung", "memory")


def bases(shared: Path | None, work: Path | None = None) -> list[tuple[Path, str | None]]:
    found = list(BASES)
    if shared is not None:
        found += [(shared / rel, env) for rel, env in SHARED if (shared / rel).is_dir()]
    if work is not None:
        found += [(learner, "Pendulum-v1") for learner in learner_bases(work)]
    return found


def learner_bases(work: Path) -> list[Path]:
    """A folder per algorithm of :data:`LEARNERS` with its checkpoint (``<algo>.zip``) and a ``learner.txt`` naming
    the class, made once per work folder."""
    from stable_baselines3.common.env_util import make_vec_env

    import sb3ext

    folders = []
    for name in LEARNERS:
        folder = work / "learners" / name.split(":")[-1]
        if not (folder / "learner.txt").exists():
            folder.mkdir(parents=True, exist_ok=True)
            if ":" in name:  # a stock algorithm, continued through the safe learner load (the zoo's train -i)
                module, cls = name.split(":")
                model = getattr(__import__(module, fromlist=[cls]), cls)("MlpPolicy", "Pendulum-v1", buffer_size=256,
                                                                        learning_starts=32, seed=0)  # fmt: skip
            else:
                extra = {"expert": "shipped:sac/Pendulum-v1_1"} if name == "AggreVaTeD" else {}
                model = getattr(sb3ext, name)("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=0), n_steps=16,
                                              batch_size=16, n_epochs=1, seed=0, **extra)  # fmt: skip
            model.learn(64)
            model.save(folder / f"{name.split(':')[-1]}.zip")
            (folder / "learner.txt").write_text(name)
        folders.append(folder)
    return folders


def zip_entries(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {n: archive.read(n) for n in archive.namelist()}


def write_zip(path: Path, content: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, raw in content.items():
            archive.writestr(name, raw)


def _flip(raw: bytes, rng: random.Random, count: int = 4) -> bytes:
    data = bytearray(raw)
    for _ in range(count):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


ODD_VALUES: list[Any] = [None, True, -1, 0, 2**63, 10**30, 1e308, -1e308, "nan", "", "x" * 300, [], {}, [1, [2, [3]]],
                         {"a": {"b": {"c": 1}}}, 0.5, -0.0, "auto", "auto_0", 3.5e-320]  # fmt: skip


def _torch_entry(raw: bytes, change: Any, legacy: bool = False) -> bytes:
    """A ``.pth`` entry with ``change`` applied to its tensors, saved again (in torch's legacy format if asked)."""
    import io

    import torch as th

    state = th.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    change(state)
    buffer = io.BytesIO()
    th.save(state, buffer, _use_new_zipfile_serialization=not legacy)
    return buffer.getvalue()


def _weights(state: dict, rng: random.Random) -> None:
    """One floating tensor made huge but finite (activations that overflow when used), or extreme."""
    import torch as th

    names = [k for k, v in state.items() if isinstance(v, th.Tensor) and v.dtype.is_floating_point and v.numel()]
    name = rng.choice(names)
    value = rng.choice([3e38, -3e38, 1e30, 1e20, -1e4, 1e-38])
    state[name] = th.full_like(state[name], value) if rng.random() < 0.5 else (state[name] * value).clamp(-3e38, 3e38)


def _legacy_ints(raw: bytes, rng: random.Random) -> bytes:
    """A legacy-format ``torch.save`` with one 4-byte integer of its pickles overwritten (sizes, counts, offsets)."""
    import struct

    data = bytearray(raw)
    starts = [i for i in range(min(len(data), 4096) - 5) if data[i] == ord("J")]  # BININT opcodes
    if starts:
        at = rng.choice(starts) + 1
        data[at : at + 4] = struct.pack("<i", rng.choice([0x7FFFFFFF, -1, 1 << 28, 0, 1 << 20]))
    return bytes(data)


#: policies and policy_kwargs classes that fit no base: multi-input, CNN, a layer that is no extractor, a wrong optimizer
_SWAPS = [
    ("policy_class", "stable_baselines3.common.policies", "MultiInputActorCriticPolicy"),
    ("policy_class", "stable_baselines3.common.policies", "ActorCriticCnnPolicy"),
    ("policy_class", "stable_baselines3.sac.policies", "MultiInputPolicy"),
    ("features_extractor_class", "torch.nn.modules.linear", "Identity"),
    ("features_extractor_class", "stable_baselines3.common.torch_layers", "NatureCNN"),
    ("activation_fn", "torch.optim.adam", "Adam"),
    ("optimizer_class", "torch.nn.modules.activation", "ReLU"),
]


def _swap_class(data: dict, rng: random.Random) -> str:
    import importlib
    import pickle

    key, module, name = rng.choice(_SWAPS)
    cls = getattr(importlib.import_module(module), name)
    if key == "policy_class":
        data[key] = {":type:": "<class 'type'>", ":serialized:": base64.b64encode(pickle.dumps(cls)).decode()}
    else:
        kwargs = dict(data.get("policy_kwargs") or {}) if isinstance(data.get("policy_kwargs"), dict) else {}
        kwargs = {k: v for k, v in kwargs.items() if not k.startswith(":")}
        kwargs[key] = cls
        data["policy_kwargs"] = {":type:": "<class 'dict'>", ":serialized:": base64.b64encode(pickle.dumps(kwargs)).decode()}
    return f"{key} = {name}"


def mutate(folder: Path, layer: str, rng: random.Random, donors: list[Path]) -> str:
    """Apply one mutation of ``layer`` to the expert in ``folder``; a short description."""
    model = next(folder.glob("*.zip"))
    content = zip_entries(model)
    if layer in ("weights", "legacy_torch"):
        name = "policy.pth"
        if layer == "weights":
            content[name] = _torch_entry(content[name], lambda state: _weights(state, rng))
        else:
            content[name] = _legacy_ints(_torch_entry(content[name], lambda state: None, legacy=True), rng)
        write_zip(model, content)
        return f"{layer} of {name}"
    if layer == "zip_bytes":
        model.write_bytes(_flip(model.read_bytes(), rng, rng.choice([1, 4, 16])))
        return "bytes flipped in the zip"
    if layer == "entries":
        name = rng.choice(sorted(content))
        action = rng.choice(["drop", "rename", "duplicate", "empty"])
        if action == "drop":
            content.pop(name)
        elif action == "rename":
            content[name + rng.choice(["x", "/../x", ".pth"])] = content.pop(name)
        elif action == "empty":
            content[name] = b""
        else:
            content["extra_" + name] = content[name]
        write_zip(model, content)
        return f"{action} {name}"
    if layer == "inner_torch":
        name = rng.choice([n for n in content if n.endswith(".pth")])
        content[name] = _flip(content[name], rng, rng.choice([1, 8, 64]))
        write_zip(model, content)
        return f"bytes flipped in {name}"
    data = json.loads(content["data"])
    if layer == "classes":
        description = _swap_class(data, rng)
        content["data"] = json.dumps(data).encode()
        write_zip(model, content)
        return description
    if layer == "json":
        key = rng.choice(sorted(data))
        data[key] = rng.choice(ODD_VALUES)
        content["data"] = json.dumps(data).encode()
        write_zip(model, content)
        return f"data {key} = {str(data[key])[:20]}"
    if layer == "pickle":
        keys = [k for k, v in data.items() if isinstance(v, dict) and ":serialized:" in v]
        key = rng.choice(keys)
        raw = base64.b64decode(data[key][":serialized:"])
        data[key][":serialized:"] = base64.b64encode(_flip(raw, rng, rng.choice([1, 3, 9]))).decode()
        content["data"] = json.dumps(data).encode()
        write_zip(model, content)
        return f"pickle of {key} flipped"
    if layer == "transplant":
        donor = json.loads(zip_entries(next(rng.choice(donors).glob("*.zip")))["data"])
        key = rng.choice(sorted(donor))
        data[key] = donor[key]
        content["data"] = json.dumps(data).encode()
        write_zip(model, content)
        return f"{key} transplanted"
    targets = list(folder.rglob("config.yml" if layer == "config" else "vecnormalize.pkl"))
    if not targets:
        return mutate(folder, "json", rng, donors)
    target = targets[0]
    raw = target.read_bytes()
    if layer == "config" and rng.random() < 0.5:
        snippets = ["normalize: '{\"norm_obs\": 1e999}'", "n_envs: " + "9" * 5000, "!!python/name:os.system ''",
                    "a: &a [*a]", "frame_stack: -5", "policy_kwargs: 'dict(net_arch=[10**9])'", "\x00\xff"]  # fmt: skip
        target.write_text(rng.choice(snippets), errors="surrogateescape")
        return "config.yml replaced by a snippet"
    target.write_bytes(_flip(raw, rng, rng.choice([1, 4, 16])))
    return f"bytes flipped in {target.name}"


WORKER = r"""
import json, os, resource, signal, sys, warnings
warnings.filterwarnings("ignore")
resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))
import numpy as np
from sb3ext.common.serialization import UnsafeObjectError
from sb3ext.experts import load_expert

class Hung(Exception):
    pass

def alarm(*_):
    raise Hung()

signal.signal(signal.SIGALRM, alarm)
originals = {{}}

def act(folder):
    if os.path.exists(os.path.join(folder, "learner.txt")):  # a learner's checkpoint, through the safe load
        import importlib, sb3ext
        from sb3ext.experts.learner import load_learner
        name = open(os.path.join(folder, "learner.txt")).read()
        if ":" in name:  # a stock algorithm, as the zoo's train -i loads it
            module, cls = name.split(":")
            actor = load_learner(getattr(importlib.import_module(module), cls), os.path.join(folder, cls + ".zip"))
        else:
            actor = getattr(sb3ext, name).load(os.path.join(folder, name + ".zip"))
    else:
        actor = load_expert(folder)
    obs = np.linspace(-1, 1, int(np.prod(actor.observation_space.shape))).reshape((1, *actor.observation_space.shape))
    return np.asarray(actor.predict(obs.astype(actor.observation_space.dtype), deterministic=True)[0], dtype=float)

for line in sys.stdin:
    case = json.loads(line)
    if case["base"] not in originals:
        originals[case["base"]] = act(case["base"])
    signal.alarm({seconds})
    try:
        action = act(case["folder"])
        same = action.shape == originals[case["base"]].shape and np.array_equal(action, originals[case["base"]])
        kind = "wrong" if not np.all(np.isfinite(action)) else "loaded"
        outcome = {{"kind": kind, "same": bool(same)}}
    except Hung:
        outcome = {{"kind": "hung"}}
    except MemoryError:
        outcome = {{"kind": "memory"}}
    except (ValueError, UnsafeObjectError) as exc:
        message = str(exc)
        clear = "\n" not in message and case["folder"] in message
        outcome = {{"kind": "refused" if clear else "unclear", "error": type(exc).__name__ + ": " + message[:300]}}
    except BaseException as exc:
        outcome = {{"kind": "unclear", "error": type(exc).__name__ + ": " + str(exc)[:300]}}
    finally:
        signal.alarm(0)
    print(json.dumps({{"index": case["index"], **outcome}}), flush=True)
"""


def run(cases: int, seed: int, work: Path, shared: Path | None, memory: int = 4 << 30, seconds: int = 20) -> dict[str, Any]:
    """Make ``cases`` mutants (seeded), load them in workers, and count the outcomes."""
    rng = random.Random(seed)
    found = bases(shared, work)
    jobs = []
    for index in range(cases):
        base, _ = found[index % len(found)]
        layer = LAYERS[(index // len(found)) % len(LAYERS)]
        folder = work / f"case{index:05d}" / base.parent.name / base.name
        shutil.copytree(base, folder)
        if (base / "learner.txt").exists() and layer in ("config", "vecnormalize"):  # a learner's zip has neither
            layer = "json"
        description = mutate(folder, layer, rng, [b for b, _ in found if b != base])
        learner = (base / "learner.txt").exists()
        jobs.append({"index": index, "folder": str(folder), "base": str(base), "layer": layer, "what": description,
                     "learner": learner})  # fmt: skip
    script = WORKER.format(memory=memory, seconds=seconds)
    results: dict[int, dict[str, Any]] = {}
    pending = list(jobs)
    while pending:
        worker = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, cwd=work, env={**__import__("os").environ,
                                  "PYTHONPATH": str(ROOT)})  # fmt: skip
        out, _ = worker.communicate("".join(json.dumps(job) + "\n" for job in pending), timeout=60 + 30 * len(pending))
        for line in out.splitlines():
            row = json.loads(line)
            results[row["index"]] = row
        done = [job for job in pending if job["index"] in results]
        rest = pending[len(done) :]
        if rest and worker.returncode != 0:  # the worker died on the first of the rest
            results[rest[0]["index"]] = {"index": rest[0]["index"], "kind": "memory" if worker.returncode == -9 else "crashed"}
            rest = rest[1:]
        pending = rest
    for base, _ in found:
        if (base / "learner.txt").exists():
            continue
        clean = work / "original" / base.parent.name / base.name
        if not clean.exists():
            shutil.copytree(base, clean)
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for job in jobs:
        row = results[job["index"]]
        kind = row["kind"]
        counts[kind] += 1
        counts[f"layer:{job['layer']}:{kind}"] += 1
        counts[f"base:{'learner' if job['learner'] else 'expert'}:{kind}"] += 1
        if kind == "loaded":
            counts["loaded_as_the_original" if row["same"] else "loaded_acting_differently"] += 1
        if kind in FAILURES:
            examples.setdefault(kind, []).append(f"{job['layer']} ({job['what']}): {row.get('error', '')}")
    return {"cases": cases, "seed": seed, "counts": dict(counts), "examples": {k: v[:5] for k, v in examples.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("/tmp/sb3ext-fuzz"))
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "experts")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    report = run(args.cases, args.seed, args.work, args.shared if args.shared.is_dir() else None)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
