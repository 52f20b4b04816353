"""Hub expert references through the real ``hf_hub_download`` code path, offline.

The test fills a Hugging Face cache folder with the zoo's files under ``sb3/<algo>-<EnvId>`` (the
layout huggingface_hub itself writes: blobs named by content hash, snapshots per commit, refs) and
runs Python in a subprocess with ``HF_HUB_OFFLINE=1`` and ``HF_HUB_CACHE`` pointing to it, as
huggingface_hub reads both when it is imported.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, shared_expert

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OLD_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


def populate_cache(cache: Path, repo_id: str, files: dict[str, Path], commit: str = COMMIT, ref: str | None = "main") -> None:
    """Put ``files`` (name -> source) into ``cache`` as huggingface_hub's snapshot of ``repo_id`` at ``commit``."""
    org, name = repo_id.split("/")
    repo = cache / f"models--{org}--{name}"
    for filename, source in files.items():
        content = source.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(content).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(content)
        link = repo / "snapshots" / commit / filename
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if ref is not None:
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)  # no trailing newline, as huggingface_hub writes it


@pytest.fixture()
def hub_cache(tmp_path: Path) -> Path:
    cache = tmp_path / "hf-cache"
    folder = shared_expert("sac/Pendulum-v1_1")
    populate_cache(
        cache,
        "sb3/sac-Pendulum-v1",
        {"sac-Pendulum-v1.zip": folder / "Pendulum-v1.zip", "config.yml": folder / "Pendulum-v1" / "config.yml"},
    )
    return cache


def run_offline(code: str, cache: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HF_") and k not in ("TRUST_REMOTE_CODE", "SB3EXT_TRUST_REMOTE_CODE")
    }
    environment.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), HF_HOME=str(cache.parent / "hf-home"), **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=environment, timeout=300)


LOAD = (
    "import sys; sys.path.insert(0, {root!r}); from sb3ext.experts import load_expert; "
    "e = load_expert({ref!r}); print(e.source, e.algo_name)"
)


def test_hub_id_resolves_from_the_offline_cache(hub_cache: Path, tmp_path: Path) -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "import numpy as np, torch as th\n"
        "from sb3ext.experts import load_expert\n"
        "hub = load_expert('sb3/sac-Pendulum-v1')\n"
        f"local = load_expert({str(shared_expert('sac/Pendulum-v1_1'))!r})\n"
        "obs = np.random.default_rng(0).uniform(-1, 1, (20, 3)).astype(np.float32)\n"
        "assert (hub.predict(obs)[0] == local.predict(obs)[0]).all()\n"
        "a = th.rand(20, 1) * 4 - 2\n"
        "assert th.equal(hub.q_values(th.as_tensor(obs), a), local.q_values(th.as_tensor(obs), a))\n"
        "import huggingface_hub.constants as c; print(hub.source, hub.model.policy.__class__.__name__, c.HF_HUB_OFFLINE)\n"
    )
    result = run_offline(code, hub_cache, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["sb3/sac-Pendulum-v1", "SACPolicy", "True"]


def test_revision_and_sha256_pins(hub_cache: Path, tmp_path: Path) -> None:
    folder = shared_expert("sac/Pendulum-v1_1")
    populate_cache(hub_cache, "sb3/sac-Pendulum-v1", {"sac-Pendulum-v1.zip": folder / "Pendulum-v1.zip"}, OLD_COMMIT, ref=None)
    digest = hashlib.sha256((folder / "Pendulum-v1.zip").read_bytes()).hexdigest()
    ok = run_offline(
        LOAD.format(root=str(ROOT), ref={"id": "sb3/sac-Pendulum-v1", "revision": OLD_COMMIT, "sha256": digest}),
        hub_cache,
        tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == [f"sb3/sac-Pendulum-v1@{OLD_COMMIT}", "sac"]

    wrong = run_offline(
        LOAD.format(root=str(ROOT), ref={"id": "sb3/sac-Pendulum-v1", "sha256": "0" * 64}), hub_cache, tmp_path
    )
    assert wrong.returncode != 0
    assert (
        f"ValueError: sha256 of {hub_cache}" in wrong.stderr
        and f"is {digest}, but the expert reference pins {'0' * 64}" in wrong.stderr
    )

    missing = run_offline(LOAD.format(root=str(ROOT), ref="sb3/sac-Pendulum-v1@v9.9"), hub_cache, tmp_path)
    assert missing.returncode != 0
    assert (
        "ValueError: Expert 'sb3/sac-Pendulum-v1@v9.9': sac-Pendulum-v1.zip is not in the Hugging Face cache" in missing.stderr
    )


def test_offline_miss_says_how_to_prefetch(hub_cache: Path, tmp_path: Path) -> None:
    result = run_offline(LOAD.format(root=str(ROOT), ref="sb3/sac-MountainCarContinuous-v0"), hub_cache, tmp_path)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError: Expert 'sb3/sac-MountainCarContinuous-v0': sac-MountainCarContinuous-v0.zip is not in")
    assert (
        str(hub_cache) in last and "HF_HUB_OFFLINE is set" in last and "hf download sb3/sac-MountainCarContinuous-v0" in last
    )


def test_hub_normalize_expert_without_cached_statistics_fails_clearly(tmp_path: Path) -> None:
    cache = tmp_path / "hf-cache"
    folder = shared_expert("ppo/BipedalWalker-v3_1")
    populate_cache(
        cache,
        "sb3/ppo-BipedalWalker-v3",
        {
            "ppo-BipedalWalker-v3.zip": folder / "BipedalWalker-v3.zip",
            "config.yml": folder / "BipedalWalker-v3" / "config.yml",
        },
    )
    result = run_offline(LOAD.format(root=str(ROOT), ref="sb3/ppo-BipedalWalker-v3"), cache, tmp_path)
    assert "trained with `normalize` but its vecnormalize.pkl is missing" in result.stderr
    shutil.copyfile(folder / "BipedalWalker-v3" / "vecnormalize.pkl", tmp_path / "vec_normalize.pkl")
    populate_cache(cache, "sb3/ppo-BipedalWalker-v3", {"vec_normalize.pkl": tmp_path / "vec_normalize.pkl"})
    result = run_offline(LOAD.format(root=str(ROOT), ref="sb3/ppo-BipedalWalker-v3"), cache, tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "reference,message",
    [
        ({"id": "sb3/x", "path": "/tmp"}, "exactly one of 'id'"),
        ({"id": "sb3/x", "colour": 1}, "Unknown key(s) ['colour'] in the expert mapping"),
        ({"id": "sb3/x", "sha256": "abc"}, "sha256 must be 64 hex digits"),
        ({"path": "/tmp/x", "revision": "main"}, "'revision' only applies to a Hub 'id'"),
        ({"id": "not a repo"}, "is not a Hub repo id"),
    ],
)
def test_bad_mappings_name_the_problem(reference: dict, message: str) -> None:
    from sb3ext.experts.references import parse_reference

    with pytest.raises(ValueError) as info:
        parse_reference(reference)
    assert message in str(info.value)


def test_trust_is_explicit(tmp_path: Path) -> None:
    """A poisoned checkpoint is refused by default, also while huggingface_sb3's TRUST_REMOTE_CODE is exported, and
    only runs with sb3ext's own SB3EXT_TRUST_REMOTE_CODE (documented risk)."""
    from tests.test_experts import _copy_expert, _Payload, _rewrite_data, _serialized

    folder = _copy_expert(tmp_path)
    marker = tmp_path / "marker"
    _rewrite_data(
        folder / "Pendulum-v1.zip", lambda data: data.__setitem__("poison", _serialized(_Payload(marker), "<class 'int'>"))
    )
    code = LOAD.format(root=str(ROOT), ref=str(folder))
    refused = run_offline(code, tmp_path / "cache", tmp_path)
    assert "UnsafeObjectError" in refused.stderr and not marker.exists()
    exported = run_offline(code, tmp_path / "cache", tmp_path, TRUST_REMOTE_CODE="True")  # another tool's variable
    assert "UnsafeObjectError" in exported.stderr and not marker.exists()
    trusted = run_offline(code, tmp_path / "cache", tmp_path, SB3EXT_TRUST_REMOTE_CODE="1")
    assert trusted.returncode == 0, trusted.stderr
    assert marker.exists(), "with explicit trust SB3's own loader runs the checkpoint's objects"


def test_shipped_expert_references() -> None:
    from sb3ext.experts.references import parse_reference, shipped_experts

    assert "sac/Pendulum-v1_1" in shipped_experts()
    reference = parse_reference("shipped:sac/Pendulum-v1_1")
    assert not reference.is_hub and Path(reference.location).is_dir()
    with pytest.raises(ValueError, match=r"no shipped expert 'sac/Nope_1'; shipped: .*shipped:sac/Pendulum-v1_1"):
        parse_reference("shipped:sac/Nope_1")


def test_a_cached_config_linking_out_of_the_cache_is_refused_before_reading(hub_cache: Path, tmp_path: Path) -> None:
    """A snapshot file is a link into the repo's blobs; one that points elsewhere is refused unread."""
    outside = tmp_path / "secret.yml"
    outside.write_text("policy: MlpPolicy\n")
    snapshot = next((hub_cache / "models--sb3--sac-Pendulum-v1" / "snapshots").iterdir())
    (snapshot / "config.yml").unlink()
    (snapshot / "config.yml").symlink_to(outside)
    result = run_offline(LOAD.format(root=str(ROOT), ref="sb3/sac-Pendulum-v1"), hub_cache, tmp_path)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "UnsafeObjectError" in last and "config.yml: refused to read it" in last and "secret.yml" in last, last
