"""The unmodified rl-zoo3 CLI on sb3ext, from packages installed in fresh virtual environments.

Each fresh venv gets sb3ext only (``pip install --no-deps``, wheel or editable); its dependencies
come from the test interpreter's site-packages through a path line in a ``.pth`` file, so the
test takes seconds and needs no network. Commands run from a temporary folder, never from the
source tree, so only the installed package can be imported.
"""

from __future__ import annotations

import re
import signal
import time
import zipfile
from pathlib import Path

import pytest

from sb3ext.common.serialization import safe_yaml_load
from tests.conftest import ROOT, needs, shared_expert
from tests.fresh_venv import FreshVenv, make_fresh_venv

PENDULUM_EXPERT = "sac/Pendulum-v1_1"


def pendulum_args(expert: Path, *extra: str) -> list[str]:
    """Zoo arguments for AggreVaTeD on Pendulum-v1 with ``expert``, logging to ./logs."""
    return ["--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs", *extra, "--hyperparams", f"expert:'{expert}'"]


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
    train = fresh_venv.run("-m", "rl_zoo3.train", *common, "-n", "1024", "-P", "--eval-freq", "-1", cwd=tmp_path)
    assert re.search(r"Loading hyperparameters from: .*aggrevated\.yml", train.stdout)
    assert "1,024/1,024" in train.stdout or "100%" in train.stdout, "the -P progress bar should be shown"
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
    assert first == 1024 // 64 and continued == first + 512 // 64, "-i continues the imitation schedule"


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


def test_tensorboard_logs_aggrevateds_metrics_through_the_zoo(wheel_venv: FreshVenv, tmp_path: Path) -> None:
    """TensorBoard comes with the install: ``--tensorboard-log`` works and the event file holds AggreVaTeD's own
    metrics."""
    wheel_venv.run(
        "-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs", "-n", "256", "--seed", "0",
        "--eval-freq", "-1", "--tensorboard-log", "tb", "--hyperparams", "expert:'shipped:sac/Pendulum-v1_1'",
        "n_steps:16", cwd=tmp_path,
    )  # fmt: skip
    events = list((tmp_path / "tb").rglob("events.out.tfevents.*"))
    assert events, sorted(p.name for p in (tmp_path / "tb").rglob("*"))
    content = b"".join(path.read_bytes() for path in events)
    for tag in (b"train/q_gap", b"rollout/beta"):
        assert tag in content, tag


@pytest.mark.parametrize(
    "algo,env_id,expert",
    [
        ("aggrevated", "LunarLander-v3", "ppo/LunarLander-v2_1"),  # Discrete actions, a value-only expert
        ("dagger", "HopperBulletEnv-v0", "ddpg/HopperBulletEnv-v0_1"),  # Box actions, a Q expert with a time feature
        ("ppo_kl", "Acrobot-v1", None),  # Discrete actions, no ppo_kl entry
        ("rpo", "MountainCarContinuous-v0", None),
        ("ppo_tanh", "MountainCarContinuous-v0", None),
    ],
)
def test_an_env_without_an_entry_trains_on_the_default_entry(
    wheel_venv: FreshVenv, tmp_path: Path, algo: str, env_id: str, expert: str | None
) -> None:
    hyperparams = ["n_steps:64"] if expert is None else [f"expert:'{shared_expert(expert)}'", "n_timesteps:512"]
    train = wheel_venv.run(
        "-m", "rl_zoo3.train", "--algo", algo, "--env", env_id, "-f", "logs", "-n", "512", "--seed", "0",
        "--eval-freq", "-1", "--hyperparams", *hyperparams, cwd=tmp_path,
    )  # fmt: skip
    assert "Using 'default' hyperparameters" in train.stdout, train.stdout[-2000:]
    assert (tmp_path / "logs" / algo / f"{env_id}_1" / f"{env_id}.zip").is_file()


def test_a_discrete_env_without_an_entry_refuses_a_continuous_only_variant_naming_the_space(
    wheel_venv: FreshVenv, tmp_path: Path
) -> None:
    train = wheel_venv.run(
        "-m", "rl_zoo3.train", "--algo", "rpo", "--env", "LunarLander-v3", "-f", "logs", "-n", "64", cwd=tmp_path,
        check=False,
    )  # fmt: skip
    assert train.returncode != 0
    assert "ValueError: RPO: invalid action_space=Discrete(4); allowed: Box" in train.stderr, train.stderr[-2000:]


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


def test_the_stage_beyond_the_expert_trains_enjoys_records_and_resumes_with_its_replay(
    wheel_venv: FreshVenv, tmp_path: Path
) -> None:
    """``beyond_after`` through the unmodified zoo: the stage begins after 1024 env steps; enjoy and record_video
    replay the stage's actor from the saved model; ``-i`` goes on in the stage with the replay the zoo saved; a tuning
    trial evaluates the stage."""
    fresh_venv = wheel_venv
    expert = shared_expert(PENDULUM_EXPERT)
    common = ["--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs", "--eval-freq", "-1", "--save-replay-buffer"]
    hyperparams = ["--hyperparams", f"expert:'{expert}'", "beyond_after:1024"]
    fresh_venv.run("-m", "rl_zoo3.train", *common, "-n", "2048", *hyperparams, cwd=tmp_path)
    run_dir = tmp_path / "logs" / "aggrevated" / "Pendulum-v1_1"
    assert (run_dir / "replay_buffer.pkl").is_file()
    enjoy = fresh_venv.run(
        "-m", "rl_zoo3.enjoy", "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs", "--exp-id", "1",
        "-n", "200", "--no-render", "--deterministic", cwd=tmp_path,
    )  # fmt: skip
    assert "Episode Reward" in enjoy.stdout
    fresh_venv.run(
        "-m", "rl_zoo3.record_video", "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs",
        "--exp-id", "1", "-n", "50", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert list((run_dir / "videos").glob("*.mp4"))
    fresh_venv.run("-m", "rl_zoo3.train", *common, "-n", "512", *hyperparams, "-i", str(run_dir / "Pendulum-v1.zip"),
                   cwd=tmp_path)  # fmt: skip
    out = fresh_venv.run(
        "-c",
        "import sys; from sb3ext.algos.aggrevated import AggreVaTeD\n"
        "for p in sys.argv[1:]:\n"
        "    m = AggreVaTeD.load(p + '.zip'); m.load_replay_buffer(p.rsplit('/', 1)[0] + '/replay_buffer.pkl')\n"
        "    print(m.imitation_iterations, m.stage_timesteps, m.replay_buffer.pos)",
        str(run_dir / "Pendulum-v1"),
        str(tmp_path / "logs" / "aggrevated" / "Pendulum-v1_2" / "Pendulum-v1"),
        cwd=tmp_path,
    )
    first, resumed = (list(map(int, line.split())) for line in out.stdout.strip().splitlines())
    assert first == [1024 // 64, 1024, 1024 // 4]
    assert resumed == [1024 // 64, 1024 + 512, (1024 + 512) // 4], "-i goes on in the stage, with its replay"
    # -optimize: the trial's second evaluation (at 2048) and its pruning check reach the stage's actor
    tuned = fresh_venv.run(
        "-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "tuned", "-optimize",
        "--storage", "study.log", "--study-name", "stage", "--n-trials", "1", "-n", "2048", "--n-evaluations", "2",
        "--eval-episodes", "1", *hyperparams, "--seed", "3", cwd=tmp_path,
    )  # fmt: skip
    assert re.search(r"Number of finished trials:\s+1\n", tuned.stdout), tuned.stdout[-2000:]
    assert re.search(r"Value:\s+-\d", tuned.stdout), tuned.stdout[-2000:]  # a completed trial: a Pendulum return


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
    """Whether a checkpoint file is a whole SB3 zip: its central directory written, every entry's CRC right, and the
    entries SB3 writes first (``data``) and last (``system_info.txt``) present. SB3 stores its entries uncompressed,
    and each ``.pth`` entry is itself a zip (torch's format): a file cut right after one reads as that inner zip."""
    try:
        with zipfile.ZipFile(path) as archive:
            return {"data", "system_info.txt"} <= set(archive.namelist()) and archive.testzip() is None
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
