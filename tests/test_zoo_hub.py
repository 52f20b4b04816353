"""The unmodified rl-zoo3 CLI on sb3ext installed from its wheel (tests/fresh_venv.py), part two: replaying a pixel
learner without its state expert, the Hub (an offline cache, push and load), sb3ext's envs with stock PPO, and
tuning then pushing a PPO variant. (Apart from test_zoo_cli.py so that the two test workers share the zoo's runs.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import shared_expert
from tests.fresh_venv import FreshVenv
from tests.test_zoo_cli import PENDULUM_EXPERT


@pytest.mark.parametrize(
    "env_id, shipped, steps",
    [
        ("sb3ext/CartPolePixels-v1", "ppo/sb3ext-CartPole-v0_1", "512"),
        pytest.param("sb3ext/BallPlatePixels-v1", "sac/sb3ext-BallPlateContinuous-v0_1", "512", marks=pytest.mark.slow),
    ],
)
def test_pixel_learner_replays_through_enjoy_and_record_video_without_its_state_expert(
    wheel_venv: FreshVenv, tmp_path: Path, env_id: str, shipped: str, steps: str
) -> None:
    """The frame learner of a pixel env (its YAML entry: CnnPolicy, or MultiInputPolicy on the camera plate's frames
    and joint readings; 4 stacked frames) trained from a copy of the shipped state expert; the copy is deleted before
    ``rl_zoo3.enjoy`` and ``record_video`` replay it."""
    import shutil

    from sb3ext.experts.references import shipped_expert

    expert = tmp_path / "state_expert"
    shutil.copytree(shipped_expert(shipped), expert)
    run_dir = tmp_path / "logs" / "aggrevated" / f"{env_id.replace('/', '-')}_1"
    wheel_venv.run(
        "-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", env_id, "-f", "logs", "-n", steps,
        "--eval-freq", "-1", "--hyperparams", f"expert:'{expert}'", cwd=tmp_path,
    )  # fmt: skip
    shutil.rmtree(expert)
    enjoy = wheel_venv.run(
        "-m", "rl_zoo3.enjoy", "--algo", "aggrevated", "--env", env_id, "-f", "logs", "--exp-id", "1",
        "-n", "100", "--no-render", cwd=tmp_path,
    )  # fmt: skip
    assert "Stacking 4 frames" in enjoy.stdout and "Mean reward" in enjoy.stdout
    wheel_venv.run(
        "-m", "rl_zoo3.record_video", "--algo", "aggrevated", "--env", env_id, "-f", "logs", "--exp-id", "1",
        "-n", "30", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    videos = list((run_dir / "videos").glob("*.mp4"))
    assert videos and videos[0].stat().st_size > 1000


def test_zoo_default_hub_expert_from_an_offline_cache(wheel_venv: FreshVenv, tmp_path: Path) -> None:
    """The YAML default `expert: sb3/sac-Pendulum-v1` resolves from the HF cache (HF_HUB_OFFLINE=1) and learns."""
    from tests.test_hub import populate_cache

    folder = shared_expert(PENDULUM_EXPERT)
    cache = tmp_path / "hf-cache"
    populate_cache(
        cache,
        "sb3/sac-Pendulum-v1",
        {"sac-Pendulum-v1.zip": folder / "Pendulum-v1.zip", "config.yml": folder / "Pendulum-v1" / "config.yml"},
    )
    offline = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}
    wheel_venv.run(
        "-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs", "--seed", "0",
        "-n", "4096", "--eval-freq", "1024", "--eval-episodes", "5", cwd=tmp_path, env_vars=offline,
    )  # fmt: skip
    import numpy as np

    evaluations = np.load(tmp_path / "logs" / "aggrevated" / "Pendulum-v1_1" / "evaluations.npz")
    final = evaluations["results"][-1].mean()
    assert final > -400, f"random policy ~-1200, expert ~-150: the learner should be close to the expert, got {final:.0f}"


PUSH_DRIVER = """
import runpy, sys
from pathlib import Path
import huggingface_hub

# The upload cannot run here: only the three network calls of HfApi are replaced, the packaging is the zoo's.
calls = []
def create_repo(self, repo_id, **kwargs):
    calls.append(("create_repo", repo_id))
    return "https://huggingface.co/" + repo_id
def snapshot_download(self, repo_id, local_dir, **kwargs):
    Path(local_dir).mkdir(parents=True, exist_ok=True)
    return str(local_dir)
def upload_folder(self, repo_id, folder_path, **kwargs):
    calls.append(("upload_folder", repo_id, str(folder_path)))
huggingface_hub.HfApi.create_repo = create_repo
huggingface_hub.HfApi.snapshot_download = snapshot_download
huggingface_hub.HfApi.upload_folder = upload_folder
sys.argv = ["push_to_hub"] + sys.argv[1:]
try:
    runpy.run_module("rl_zoo3.push_to_hub", run_name="__main__")
finally:
    print("CALLS", calls)
"""


def test_push_to_hub_then_load_from_hub_and_enjoy_offline(wheel_venv: FreshVenv, tmp_path: Path) -> None:
    from tests.test_hub import populate_cache

    expert = shared_expert(PENDULUM_EXPERT)
    wheel_venv.run(
        "-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs", "-n", "512",
        "--eval-freq", "-1", "--hyperparams", f"expert:'{expert}'", cwd=tmp_path,
    )  # fmt: skip
    pushed = wheel_venv.run(
        "-c", PUSH_DRIVER, "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs", "--exp-id", "1",
        "-orga", "sb3ext-test", "--no-render", "-n", "200", cwd=tmp_path,
    )  # fmt: skip
    repo = tmp_path / "hub" / "aggrevated-Pendulum-v1"
    assert "('upload_folder', 'sb3ext-test/aggrevated-Pendulum-v1'" in pushed.stdout
    for name in (
        "aggrevated-Pendulum-v1.zip",
        "config.yml",
        "args.yml",
        "env_kwargs.yml",
        "train_eval_metrics.zip",
        "README.md",
    ):
        assert (repo / name).is_file(), f"{name} missing from the packaged repo"
    card = (repo / "README.md").read_text()
    assert "library_name: stable-baselines3" in card and "name: mean_reward" in card
    assert "**AggreVaTeD** Agent playing **Pendulum-v1**" in card
    assert "--algo aggrevated" in card
    assert "expert" in (repo / "config.yml").read_text()

    cache = tmp_path / "hf-cache"
    populate_cache(cache, "sb3ext-test/aggrevated-Pendulum-v1", {p.name: p for p in repo.iterdir() if p.is_file()})
    offline = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "TRUST_REMOTE_CODE": "True"}
    loaded = wheel_venv.run(
        "-m", "rl_zoo3.load_from_hub", "--algo", "aggrevated", "--env", "Pendulum-v1", "-orga", "sb3ext-test",
        "-f", "downloaded", "--exp-id", "1", cwd=tmp_path, env_vars=offline,
    )  # fmt: skip
    assert "No normalization file" in loaded.stdout  # the repo has no vec_normalize.pkl: handled, not a crash
    assert (tmp_path / "downloaded" / "aggrevated" / "Pendulum-v1_1" / "Pendulum-v1.zip").is_file()
    enjoy = wheel_venv.run(
        "-m", "rl_zoo3.enjoy", "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "downloaded", "--exp-id", "1",
        "--no-render", "-n", "300", cwd=tmp_path, env_vars=offline,
    )  # fmt: skip
    assert "Episode Reward" in enjoy.stdout


def test_envs_from_the_wheel_with_stock_ppo(wheel_venv: FreshVenv, tmp_path: Path) -> None:
    """Assets resolve inside the installed wheel; the zoo trains stock PPO on an sb3ext id and records a video."""
    probe = wheel_venv.run(
        "-c",
        "import gymnasium as gym, sb3ext.envs; [gym.make(i).reset(seed=0) for i in sb3ext.envs.ENV_IDS]; "
        "from sb3ext.envs.bullet import asset_path; print(*(asset_path(n) for n in ('cartpole.urdf', 'plate.urdf', 'ball.urdf')))",
        cwd=tmp_path,
    )
    # (pybullet itself prints "argv[0]=" on stdout when a client connects: read the last line)
    paths = probe.stdout.strip().splitlines()[-1].split()
    assert len(paths) == 3 and all(path.startswith(str(wheel_venv.site_packages)) for path in paths), paths
    train = wheel_venv.run(
        "-m", "rl_zoo3.train", "--algo", "ppo", "--env", "sb3ext/CartPole-v0", "-f", "logs", "-n", "512",
        "--eval-freq", "-1", cwd=tmp_path,
    )  # fmt: skip
    assert re.search(r"Loading hyperparameters from: .*site-packages/sb3ext/hyperparams/ppo\.yml", train.stdout)
    wheel_venv.run(
        "-m", "rl_zoo3.record_video", "--algo", "ppo", "--env", "sb3ext/CartPole-v0", "-f", "logs", "--exp-id", "1",
        "-n", "50", cwd=tmp_path,
    )  # fmt: skip
    assert list((tmp_path / "logs" / "ppo" / "sb3ext-CartPole-v0_1" / "videos").glob("*.mp4"))


# ~50 s each on 2 cores, so the round trips run with `-m slow`. The default suite keeps their parts: each variant's
# sampler and converter (test_ppo_variants.py), their zoo registration (test_tuning.py), training and enjoy through
# the zoo (test_zoo_cli.py), and the zoo's Hub packaging with AggreVaTeD (test_push_to_hub_then_load_from_hub...).
@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo_kl", "rpo", "ppo_tanh"])
def test_ppo_variants_tune_and_push_through_the_zoo(wheel_venv: FreshVenv, tmp_path: Path, algo: str) -> None:
    """-optimize with sb3ext's sampler, then the zoo's Hub packaging (network calls stubbed), for each variant."""
    tuned = wheel_venv.run(
        "-m", "rl_zoo3.train", "--algo", algo, "--env", "Pendulum-v1", "-f", "tune_logs", "-n", "256", "--seed", "0",
        "-optimize", "--n-trials", "2", "--n-jobs", "1", "--sampler", "random", "--pruner", "none",
        "--n-evaluations", "1", "--eval-episodes", "1", "--no-optim-plots", "--num-threads", "1", cwd=tmp_path,
    )  # fmt: skip
    assert re.search(r"Number of finished trials: +2", tuned.stdout), tuned.stdout[-2000:]
    wheel_venv.run(
        "-m", "rl_zoo3.train", "--algo", algo, "--env", "Pendulum-v1", "-f", "logs", "-n", "256", "--seed", "0",
        "--eval-freq", "-1", "--hyperparams", "n_steps:64", cwd=tmp_path,
    )  # fmt: skip
    pushed = wheel_venv.run(
        "-c", PUSH_DRIVER, "--algo", algo, "--env", "Pendulum-v1", "-f", "logs", "--exp-id", "1",
        "-orga", "sb3ext-test", "--no-render", "-n", "200", cwd=tmp_path,
    )  # fmt: skip
    assert f"('upload_folder', 'sb3ext-test/{algo}-Pendulum-v1'" in pushed.stdout
    assert (tmp_path / "hub" / f"{algo}-Pendulum-v1" / f"{algo}-Pendulum-v1.zip").is_file()
