"""The unmodified rl-zoo3 CLI on sb3ext, from packages installed in fresh virtual environments.

Each fresh venv gets sb3ext only (``pip install --no-deps``, wheel or editable); its dependencies
come from the test interpreter's site-packages through a path line in a ``.pth`` file, so the
test takes seconds and needs no network. Commands run from a temporary folder, never from the
source tree, so only the installed package can be imported.
"""

from __future__ import annotations

import os
import re
import signal
import site
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from sb3ext.common.serialization import safe_yaml_load
from tests.conftest import ROOT, needs, shared_expert

PENDULUM_EXPERT = "sac/Pendulum-v1_1"


def pendulum_args(expert: Path, *extra: str) -> list[str]:
    """Zoo arguments for AggreVaTeD on Pendulum-v1 with ``expert``, logging to ./logs."""
    return ["--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs", *extra, "--hyperparams", f"expert:'{expert}'"]


class FreshVenv:
    def __init__(self, path: Path, mode: str):
        self.path = path
        self.mode = mode
        self.python = path / "bin" / "python"
        self.site_packages = path / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"

    def run(
        self, *args: str, cwd: Path, timeout: float = 600, check: bool = True, env_vars: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
        env["PYTHONUNBUFFERED"] = "1"
        env.update(env_vars or {})
        result = subprocess.run([str(self.python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
            )
        return result

    def popen(self, *args: str, cwd: Path, stdout) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
        env["PYTHONUNBUFFERED"] = "1"
        return subprocess.Popen([str(self.python), *args], cwd=cwd, env=env, stdout=stdout, stderr=subprocess.STDOUT)


def make_fresh_venv(base: Path, mode: str) -> FreshVenv:
    venv = FreshVenv(base / f"venv-{mode}", mode)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv.path)], check=True)
    # Dependencies (and pip/setuptools) from this interpreter's site-packages: a path line, not a site dir,
    # so *its* .pth files (an sb3ext install there included) are not processed.
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (venv.site_packages / "_sb3ext_test_deps.pth").write_text("\n".join(deps) + "\n")
    target = ["-e", str(ROOT)] if mode == "editable" else [str(ROOT)]
    venv.run("-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q", *target, cwd=base)
    return venv


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> FreshVenv:
    return make_fresh_venv(tmp_path_factory.mktemp("fresh-wheel"), "wheel")


@pytest.fixture(scope="module")
def editable_venv(tmp_path_factory) -> FreshVenv:
    return make_fresh_venv(tmp_path_factory.mktemp("fresh-editable"), "editable")


@pytest.fixture(params=["wheel", "editable"])
def fresh_venv(request) -> FreshVenv:
    """Both install modes: ``pip install .`` and ``pip install -e .``."""
    return request.getfixturevalue(f"{request.param}_venv")


def test_install_puts_only_a_light_hook_at_interpreter_start(fresh_venv: FreshVenv, tmp_path: Path) -> None:
    assert (fresh_venv.site_packages / "sb3ext-zoo.pth").is_file()
    probe = (
        "import sys; "
        "print(any(type(f).__name__ == 'ZooImportHook' for f in sys.meta_path), "
        "'torch' in sys.modules, 'rl_zoo3' in sys.modules, 'gymnasium' in sys.modules)"
    )
    assert fresh_venv.run("-c", probe, cwd=tmp_path).stdout.split() == ["True", "False", "False", "False"]
    located = fresh_venv.run(
        "-c", "import sb3ext, sb3ext.zoo as z; print(sb3ext.__file__); print(z.hyperparams_path('aggrevated'))", cwd=tmp_path
    )
    package_file, yaml_file = located.stdout.split()
    if fresh_venv.mode == "wheel":
        assert package_file.startswith(str(fresh_venv.site_packages))
        assert yaml_file.startswith(str(fresh_venv.site_packages))  # shipped inside the wheel
    else:
        assert package_file.startswith(str(ROOT))
    registered = fresh_venv.run("-c", "from rl_zoo3.utils import ALGOS; print(ALGOS['aggrevated'].__name__)", cwd=tmp_path)
    assert registered.stdout.strip() == "AggreVaTeD"
    embedded = fresh_venv.run(
        "-c",
        "from sb3ext.demo import EMBEDDED_EXPERT; from sb3ext.experts import load_expert; "
        "e = load_expert(EMBEDDED_EXPERT); print(e.algo_name, e.source)",
        cwd=tmp_path,
    )
    algo_name, source = embedded.stdout.split()
    assert algo_name == "sac"
    if fresh_venv.mode == "wheel":
        assert source.startswith(str(fresh_venv.site_packages)), "the expert ships inside the wheel"


@pytest.mark.parametrize("mode", ["wheel", pytest.param("editable", marks=pytest.mark.slow)])  # the install test covers both
def test_train_enjoy_continue_through_the_zoo(mode: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    fresh_venv: FreshVenv = request.getfixturevalue(f"{mode}_venv")
    expert = shared_expert(PENDULUM_EXPERT)
    common = pendulum_args(expert, "--seed", "1")
    train = fresh_venv.run("-m", "rl_zoo3.train", *common, "-n", "2048", "-P", "--eval-freq", "-1", cwd=tmp_path)
    assert re.search(r"Loading hyperparameters from: .*aggrevated\.yml", train.stdout)
    assert "2,048/2,048" in train.stdout or "100%" in train.stdout, "the -P progress bar should be shown"
    run_dir = tmp_path / "logs" / "aggrevated" / "Pendulum-v1_1"
    assert (run_dir / "Pendulum-v1.zip").is_file()
    saved = safe_yaml_load((run_dir / "Pendulum-v1" / "config.yml").read_text())
    assert saved["expert"] == str(expert)

    enjoy = fresh_venv.run(
        "-m", "rl_zoo3.enjoy", "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs", "--exp-id", "1",
        "-n", "400", "--no-render", "--deterministic", cwd=tmp_path,
    )  # fmt: skip
    assert "Episode Reward" in enjoy.stdout

    fresh_venv.run(
        "-m", "rl_zoo3.train", *common, "-n", "512", "--eval-freq", "-1",
        "-i", str(run_dir / "Pendulum-v1.zip"), cwd=tmp_path,
    )  # fmt: skip
    iterations = fresh_venv.run(
        "-c",
        "import sys; from sb3ext.algos.aggrevated import AggreVaTeD; "
        "print(*(AggreVaTeD.load(p).imitation_iterations for p in sys.argv[1:]))",
        str(run_dir / "Pendulum-v1.zip"),
        str(tmp_path / "logs" / "aggrevated" / "Pendulum-v1_2" / "Pendulum-v1.zip"),
        cwd=tmp_path,
    )
    first, continued = map(int, iterations.stdout.split())
    assert first == 2048 // 64 and continued == first + 512 // 64, "-i continues the imitation schedule"


def test_mujoco_v5_from_a_v3_zoo_expert_through_the_zoo(wheel_venv: FreshVenv, tmp_path: Path) -> None:
    """The YAML's MuJoCo entry (no env_wrapper) with the zoo's -v3 PPO Walker2d expert, trained with a
    TimeFeatureWrapper, on Walker2d-v5: the learner's env gets the expert's wrapper (said once, and saved in
    config.yml), it trains (saying once which env the expert was trained on) and replays without the expert."""
    needs("mujoco")
    expert = shared_expert("ppo/Walker2d-v3_1")
    train = wheel_venv.run(
        "-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", "Walker2d-v5", "-f", "logs", "-n", "512", "--seed", "0",
        "--eval-freq", "-1", "--hyperparams", f"expert:'{expert}'", cwd=tmp_path,
    )  # fmt: skip
    output = train.stdout + train.stderr
    assert output.count("was trained on Walker2d-v3 and now acts on Walker2d-v5") == 1, output[-3000:]
    wrapper = "sb3_contrib.common.wrappers.TimeFeatureWrapper"
    assert output.count(f"the expert was trained with env_wrapper '{wrapper}'; the learner's env gets it too") == 1
    run = tmp_path / "logs" / "aggrevated" / "Walker2d-v5_1"
    assert (run / "Walker2d-v5.zip").is_file()
    assert safe_yaml_load((run / "Walker2d-v5" / "config.yml").read_text())["env_wrapper"] == wrapper
    wheel_venv.run(  # fails the test on a non-zero exit (check=True)
        "-m", "rl_zoo3.enjoy", "--algo", "aggrevated", "--env", "Walker2d-v5", "-f", "logs", "--exp-id", "1",
        "-n", "1000", "--no-render", "--deterministic", cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.parametrize("algo", ["ppo_kl", "rpo", "ppo_tanh"])
def test_ppo_variants_train_and_enjoy_through_the_zoo(wheel_venv: FreshVenv, tmp_path: Path, algo: str) -> None:
    train = wheel_venv.run(
        "-m", "rl_zoo3.train", "--algo", algo, "--env", "Pendulum-v1", "-f", "logs", "-n", "512", "--seed", "0",
        "--eval-freq", "-1", "--hyperparams", "n_steps:64", cwd=tmp_path,
    )  # fmt: skip
    assert re.search(rf"Loading hyperparameters from: .*sb3ext.*{algo}\.yml", train.stdout), train.stdout[-2000:]
    enjoy = wheel_venv.run(
        "-m", "rl_zoo3.enjoy", "--algo", algo, "--env", "Pendulum-v1", "-f", "logs", "--exp-id", "1",
        "-n", "250", "--no-render", "--deterministic", cwd=tmp_path,
    )  # fmt: skip
    assert "Episode Reward" in enjoy.stdout


@pytest.mark.slow  # record_video of aggrevated runs in the default suite through the pixel and Atari learners
def test_record_video_headless(wheel_venv: FreshVenv, tmp_path: Path) -> None:
    fresh_venv = wheel_venv
    expert = shared_expert(PENDULUM_EXPERT)
    fresh_venv.run(
        "-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs", "-n", "256",
        "--eval-freq", "-1", "--hyperparams", f"expert:'{expert}'", cwd=tmp_path,
    )  # fmt: skip
    fresh_venv.run(
        "-m", "rl_zoo3.record_video", "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs",
        "--exp-id", "1", "-n", "50", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    videos = list((tmp_path / "logs" / "aggrevated" / "Pendulum-v1_1" / "videos").glob("*.mp4"))
    assert videos and videos[0].stat().st_size > 1000


@pytest.mark.parametrize(
    "env_id, shipped, steps",
    [
        ("sb3ext/CartPolePixels-v1", "ppo/sb3ext-CartPole-v0_1", "1024"),
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


@pytest.mark.parametrize(
    "hyperparams,expected",
    [
        (["expert:'/nonexistent/expert.zip'"], "ValueError: Expert path '/nonexistent/expert.zip' does not exist"),
        ([], "ValueError: Expert 'sb3/sac-Pendulum-v1': sac-Pendulum-v1.zip is not in the Hugging Face cache"),
        (["expert:None"], "ValueError: AggreVaTeD needs an expert to learn"),
        (
            ["n_action_sample:4"],
            "TypeError: AggreVaTeD: unknown hyperparameter(s) 'n_action_sample' (did you mean 'n_action_samples'?)",
        ),
        (
            ["expert:'@CARTPOLE@'"],
            "ValueError: Expert @CARTPOLE@ does not fit this environment: expert observation space Box(shape=(4,)",
        ),
    ],
)
def test_bad_input_fails_fast_with_one_clear_line(wheel_venv: FreshVenv, tmp_path: Path, hyperparams, expected: str) -> None:
    fresh_venv = wheel_venv
    cartpole = shared_expert("dqn/CartPole-v1_1/CartPole-v1.zip")
    hyperparams = [h.replace("@CARTPOLE@", str(cartpole)) for h in hyperparams]
    expected = expected.replace("@CARTPOLE@", str(cartpole))
    args = [
        "-m",
        "rl_zoo3.train",
        "--algo",
        "aggrevated",
        "--env",
        "Pendulum-v1",
        "-f",
        "logs",
        "-n",
        "64",
        "--eval-freq",
        "-1",
    ]
    if hyperparams:
        args += ["--hyperparams", *hyperparams]
    offline = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-cache")}
    result = fresh_venv.run(*args, cwd=tmp_path, check=False, env_vars=offline)
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith(expected), last_line
    # fast = before the first roll-in: no training table was logged (a count, not a clock: any machine's speed)
    assert "total_timesteps" not in result.stdout, result.stdout[-2000:]
    assert not list((tmp_path / "logs").rglob("*.zip")), "nothing may be trained or saved"


def complete_zip(path: Path) -> bool:
    """Whether a checkpoint file is a whole zip (its central directory written and every entry's CRC right)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except (zipfile.BadZipFile, OSError, EOFError):
        return False


def test_sigkill_resumes_from_the_last_checkpoint(wheel_venv: FreshVenv, tmp_path: Path) -> None:
    fresh_venv = wheel_venv
    expert = shared_expert(PENDULUM_EXPERT)
    save_freq = 512
    common = pendulum_args(expert, "--eval-freq", "-1")
    run_dir = tmp_path / "logs" / "aggrevated" / "Pendulum-v1_1"
    with open(tmp_path / "train.log", "w") as log:
        process = fresh_venv.popen(
            "-m", "rl_zoo3.train", *common, "-n", "100000", "--save-freq", str(save_freq), cwd=tmp_path, stdout=log
        )
        deadline = time.time() + 600
        # SB3 writes a checkpoint in place (not atomically): kill only once three are complete, each with its
        # zip directory written, so that the kill falls between two checkpoints on any machine's speed
        while len([c for c in run_dir.glob("rl_model_*_steps.zip") if complete_zip(c)]) < 3:
            assert process.poll() is None, (tmp_path / "train.log").read_text()[-3000:]
            assert time.time() < deadline, "no three checkpoints within 600 s"
            time.sleep(0.1)
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL
    logged = [int(v) for v in re.findall(r"total_timesteps\s*\|\s*(\d+)", (tmp_path / "train.log").read_text())]
    checkpoints = sorted(run_dir.glob("rl_model_*_steps.zip"), key=lambda p: int(p.stem.split("_")[2]))
    complete = [c for c in checkpoints if complete_zip(c)]
    assert len(complete) >= 3 and checkpoints[: len(complete)] == complete  # at most the newest was cut by the kill
    latest = complete[-1]
    saved_steps = int(latest.stem.split("_")[2])
    assert max(logged) - saved_steps <= save_freq, "at most one checkpoint interval may be lost"
    with zipfile.ZipFile(latest) as archive:
        assert archive.testzip() is None
    fresh_venv.run("-m", "rl_zoo3.train", *common, "-n", "256", "-i", str(latest), cwd=tmp_path)
    resumed = tmp_path / "logs" / "aggrevated" / "Pendulum-v1_2" / "Pendulum-v1.zip"
    out = fresh_venv.run(
        "-c",
        "import sys; from sb3ext.algos.aggrevated import AggreVaTeD; "
        "print(*(AggreVaTeD.load(p).imitation_iterations for p in sys.argv[1:]))",
        str(latest),
        str(resumed),
        cwd=tmp_path,
    )
    at_checkpoint, after_resume = map(int, out.stdout.split())
    # CheckpointCallback fires on the last env step of a roll-in, before that roll-in's update
    assert at_checkpoint == saved_steps // 64 - 1
    assert after_resume == at_checkpoint + 256 // 64


def test_uninstall_removes_the_plugin(tmp_path: Path) -> None:
    venv = make_fresh_venv(tmp_path, "wheel")
    venv.run("-m", "pip", "uninstall", "-y", "-q", "sb3ext", cwd=tmp_path)
    assert not (venv.site_packages / "sb3ext-zoo.pth").exists()
    result = venv.run("-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", "Pendulum-v1", cwd=tmp_path, check=False)
    assert result.returncode == 2 and "invalid choice: 'aggrevated'" in result.stderr
    assert "ppo" in venv.run("-c", "from rl_zoo3.utils import ALGOS; print(list(ALGOS))", cwd=tmp_path).stdout


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


# The default suite runs the round trip with one variant (~35 s each on 2 cores); each variant's sampler and
# converter are unit-tested in test_ppo_variants.py and registered in the zoo (test_tuning.py); the other two
# variants' round trips run with `-m slow`.
@pytest.mark.parametrize(
    "algo", ["ppo_kl", pytest.param("rpo", marks=pytest.mark.slow), pytest.param("ppo_tanh", marks=pytest.mark.slow)]
)
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
