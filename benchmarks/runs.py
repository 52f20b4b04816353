"""One job: train through the unmodified zoo CLI (or imitation's venv), evaluating its checkpoints as they are
written.

Every run lands in its own folder (``Job.folder``); each stage leaves a file, so a crash loses at most the stage it
was in: ``train.json`` (training done), ``eval.json`` (checkpoints evaluated so far, one line each, appended: while
the zoo trains, each checkpoint once it is logged complete; the rest after) and ``result.json`` (the job done).
``references.json`` beside the task's runs holds the expert's and a random policy's returns on the same seeded
episodes.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import yaml

from benchmarks import games
from benchmarks.checkpoints import PREFIX, checkpoint_walls, resume_point
from benchmarks.games import is_atari, scored_env
from benchmarks.suite import IMITATION_METHODS, ROOT, Job, Method, Task, entry_entries

#: imitation 1.0.1 pins SB3 2.2 and gymnasium 0.29: its own venv, built on first use
IMITATION_PINS = ["imitation==1.0.1", "numpy<2", "pandas<3", "pyarrow<18", "datasets<3", "gymnasium[box2d]"]
IMITATION_MUJOCO_PINS = ["sb3-contrib==2.2.1", "mujoco==2.3.7", "imageio"]
SINGLE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run_job(job: Job, work: Path, command: str = "") -> dict[str, Any]:
    """The job's result (cached in ``result.json``): its checkpoints' returns on the suite's episodes and the
    wall-clock from the start of training to each checkpoint."""
    import torch as th

    th.set_num_threads(1)  # a job has one core (--jobs): two threads on a shared core spin in OpenMP's barriers
    folder = job.folder(work)
    done = folder / "result.json"
    if done.exists():
        result: dict[str, Any] = json.loads(done.read_text())
        if result["budget"] == job.method.budget:
            return result
        shutil.rmtree(folder)  # made at another budget: the whole run again
    refs = references(job.task, job.suite.episodes, job.suite.eval_seed, folder.parent.parent / "references.json")
    if job.method.imitation:
        curve = imitation_run(job, folder)
    else:
        train = zoo_train(job, folder, lambda started: evaluate_checkpoints(job, folder, started, logged_only=True))
        curve = evaluate_checkpoints(job, folder, train["started"])
        curve["train_wall_s"] = train["wall_s"]
        if "cpu_s" in train:  # runs trained before CPU time was recorded have none
            curve["train_cpu_s"] = train["cpu_s"]
        last = last_training_episodes(folder, TRAINING_EPISODES)
        if last.size:
            curve["training_episodes"] = {"mean": float(last.mean()), "episodes": int(last.size)}
    result = {
        "task": job.task.name,
        "method": job.method.name,
        "seed": job.seed,
        "budget": job.method.budget,
        "episodes": job.suite.episodes,
        "eval_seed": job.suite.eval_seed,
        "command": command,
        "machine": machine(),
        "packages": packages(),
        "references": refs,
        **curve,
    }
    done.write_text(json.dumps(result))
    return result


def machine() -> str:
    """The CPU model and core count the run had (wall-clock compares only within one machine)."""
    model = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        model = next(
            (line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")),
            model,
        )
    return f"{model}, {os.cpu_count()} cores"


#: the packages whose versions can change what a seeded episode returns (the simulators and the arrays)
SIMULATION_PACKAGES = ("gymnasium", "numpy", "torch", "box2d", "mujoco", "ale-py", "pybullet")


def packages() -> str:
    """The installed versions of ``SIMULATION_PACKAGES``: a chaotic simulation (a walker) can score one policy
    differently on another CPU or with other versions, so references and runs record where they were measured."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in SIMULATION_PACKAGES:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    return ", ".join(found)


def references(task: Task, episodes: int, seed: int, cache: Path) -> dict[str, Any]:
    """:func:`measure_references`, cached in ``cache`` (the task's ``references.json``, two folders below the work
    dir)."""
    if cache.exists():
        return json.loads(cache.read_text())  # type: ignore[no-any-return]
    refs = measure_references(task, episodes, seed, cache.parents[2])
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(refs))
    return refs


def measure_references(task: Task, episodes: int, seed: int, work: Path) -> dict[str, Any]:
    """The expert's and a uniformly random policy's mean return on the suite's seeded episodes, with the machine
    and packages they were measured on; a task without an expert has only the random one."""
    from sb3ext.callbacks import episode_returns
    from sb3ext.experts import load_expert

    kwargs = task.make_kwargs
    reference = task.expert_reference(work)
    expert = None
    if reference is not None:
        expert = load_expert(reference) if task.expert_observes_state else load_expert(reference, env_id=task.env)

    def plain_env(env_id: str) -> gym.Env:
        return games.make(env_id, **kwargs)

    def expert_env(env_id: str) -> gym.Env:  # the expert's wrappers; an Atari game scored as a game (games.py)
        assert expert is not None
        return scored_env(env_id, expert.wrap_env, **kwargs)

    probe = plain_env(task.env)
    atari = is_atari(probe)
    probe.close()
    random_env = expert_env if atari and expert is not None else plain_env  # random plays the same game as the rest
    random_returns = episode_returns(task.env, None, episodes, seed, random_env)[0]
    refs: dict[str, Any] = {"random": float(np.mean(random_returns))}
    if expert is not None:
        if task.expert_observes_state:
            returns = episode_returns(task.env, expert, episodes, seed, plain_env, observe_state=True)[0]
        else:
            stack = expert.frame_stack or 0
            returns = episode_returns(task.env, expert, episodes, seed, expert_env, frame_stack=stack)[0]
        refs.update(expert=float(np.mean(returns)), expert_std=float(np.std(returns)))
    refs.update(machine=machine(), packages=packages())
    return refs


def measure_again(task: Task, episodes: int, seed: int, cache: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The task's cached references and the same references measured afresh here. Where this machine or these
    packages differ from those the cache was measured on, the new ones join the cache's ``elsewhere`` list (one
    entry per machine and packages), which the page shows; the references themselves, and so the threshold the
    recorded runs were scored against, stay."""
    fresh = measure_references(task, episodes, seed, cache.parents[2])
    cache.parent.mkdir(parents=True, exist_ok=True)
    cached = json.loads(cache.read_text()) if cache.exists() else fresh
    where = (fresh["machine"], fresh["packages"])
    if cached is fresh:
        cache.write_text(json.dumps(fresh))
    elif (cached.get("machine"), cached.get("packages")) != where:
        others = [o for o in cached.get("elsewhere", []) if (o["machine"], o["packages"]) != where]
        cached["elsewhere"] = [*others, fresh]
        cache.write_text(json.dumps(cached))
    return cached, fresh


def zoo_conf(method: Method, task: Task, folder: Path) -> list[str]:
    """``--conf-file`` arguments, an entry copied under the task's id: the method's own ``entry`` from a file under
    ``benchmarks/``; else, for a from-scratch zoo algorithm on an env the zoo lists under another id (``zoo_entry``:
    its ``-v4`` entry for a ``-v5`` env), the zoo's; none otherwise."""
    algo = method.algo
    if method.entry is not None:
        path = folder / "entry.yml"
        path.write_text(yaml.safe_dump({task.env: entry_entries(f"method {method.name}", method.entry)}))
        return ["--conf-file", str(path)]
    if task.zoo_entry is None or algo in ("aggrevated", "dagger"):
        return []
    import rl_zoo3

    entries = yaml.safe_load((Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml").read_text())
    if task.zoo_entry not in entries:
        raise ValueError(f"rl_zoo3's {algo}.yml has no {task.zoo_entry!r} entry (task {task.name!r}, zoo_entry)")
    path = folder / f"zoo_{algo}.yml"
    path.write_text(yaml.safe_dump({task.env: entries[task.zoo_entry]}))
    return ["--conf-file", str(path)]


def children_cpu_s() -> float:
    """CPU seconds (user and system) of this process's finished child processes so far: a run's training is the
    difference across its subprocess."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: seconds between two looks at a training run's checkpoints
POLL_S = 10.0


def run_while(command: list[str], every: Callable[[], Any], **popen: Any) -> None:
    """Runs ``command`` (``subprocess.Popen``'s keywords) to its end, calling ``every`` while it runs (at least
    :data:`POLL_S` seconds apart). A failure of ``every`` is printed and ends its calls, not the process; the process
    is killed if this one is interrupted; a non-zero exit raises ``CalledProcessError``, as ``subprocess.run`` does."""
    calling = True
    with subprocess.Popen(command, **popen) as process:
        try:
            while process.poll() is None:
                if calling:
                    try:
                        every()
                    except Exception as error:  # the same call after training raises it again
                        print(f"  while training: {type(error).__name__}: {error} (left for after training)", flush=True)
                        calling = False
                try:
                    process.wait(timeout=POLL_S)
                except subprocess.TimeoutExpired:
                    continue
        except BaseException:
            process.kill()
            raise
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command)


def zoo_train(job: Job, folder: Path, while_training: Callable[[float], Any] | None = None) -> dict[str, Any]:
    """``python -m rl_zoo3.train`` with the harness's checkpoints (:mod:`benchmarks.checkpoints`: every ``save_every``
    env steps, the VecNormalize statistics and the replay buffer saved with each); ``while_training`` is called with
    the run's start (``time.time()``, its earlier parts included) while it trains; cached in ``train.json``. An
    unfinished run goes on from its newest checkpoint through the zoo's ``-i``: one with a replay buffer (an off-policy
    learner, AggreVaTeD's stage), or any for a learner that needs none (:func:`goes_on_without_replay`); other runs
    are started again from scratch, as is one made at another budget."""
    done = folder / "train.json"
    if done.exists():
        return json.loads(done.read_text())  # type: ignore[no-any-return]
    method, task = job.method, job.task
    begun = folder / "run.json"
    resume = None
    if begun.exists():
        resume = resume_point(folder / "checkpoints", replay=not goes_on_without_replay(method.algo, folder))
    if resume is not None and json.loads(begun.read_text()).get("budget") != method.budget:
        resume = None
    if resume is None:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        begun.write_text(json.dumps({"budget": method.budget}))
    conf = zoo_conf(method, task, folder)
    n_envs = probe_n_envs(task, method.algo, conf, method.zoo_hyperparams())
    started, cpu = time.time(), children_cpu_s()
    offset = {"offset": 0, "cpu_s": 0.0, "wall_s": 0.0} if resume is None else {k: resume[k] for k in ("cpu_s", "wall_s")}
    origin = started - float(offset["wall_s"])  # the run's start, its earlier parts included
    more: list[str] = []
    if resume is not None:
        offset["offset"] = int(resume["steps"])
        more = ["-i", str(resume_folder(folder, resume, task.env))]
    callback = (
        "callback:[{'benchmarks.checkpoints.ResumableCheckpoint': "
        f"{{'save_freq': {max(1, method.save_every // n_envs)}, 'save_path': '{folder / 'checkpoints'}', "
        f"'offset': {offset['offset']}, 'cpu_s': {offset['cpu_s']!r}, 'wall_s': {offset['wall_s']!r}, "
        f"'started': {started!r}}}}}]"
    )
    expert = [f"expert:'{task.expert_reference(folder.parents[3])}'"] if method.algo in ("aggrevated", "dagger") else []
    command = [
        sys.executable, "-m", "rl_zoo3.train", "--algo", method.algo, "--env", task.env, "--seed", str(job.seed),
        "-n", str(method.budget - int(offset["offset"])), "--eval-freq", "-1", "-f", str(folder / "logs"),
        "--num-threads", "1", "--device", "cpu", "--log-interval", "-2", *conf, *more,
        *(["--env-kwargs", *(f"{k}:{v!r}" for k, v in task.env_kwargs)] if task.env_kwargs else []),
        "--hyperparams", *expert, *method.zoo_hyperparams(), callback,
    ]  # fmt: skip
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # the zoo imports the callback
    env = {**os.environ, **SINGLE_THREAD, "PYTHONPATH": path}
    if resume is not None and method.algo not in ("aggrevated", "dagger"):
        env["SB3EXT_TRUST_REMOTE_CODE"] = "1"  # the harness's own replay buffer, a pickle SB3 wrote here
    with open(folder / "train.log", "a") as log:
        print(" ".join(command), file=log, flush=True)
        every = (lambda: while_training(origin)) if while_training is not None else (lambda: None)
        run_while(command, every, stdout=log, stderr=subprocess.STDOUT, cwd=folder, env=env)
    result = {
        "started": origin,
        "wall_s": float(offset["wall_s"]) + time.time() - started,
        "cpu_s": float(offset["cpu_s"]) + children_cpu_s() - cpu,
        "n_envs": n_envs,
        **({"resumed_at": [int(offset["offset"])]} if resume is not None else {}),
    }
    done.write_text(json.dumps(result))
    return result


#: the zoo's hyperparameters that can be schedules (``lin_3e-4``), whose progress the zoo's ``-i`` starts again
SCHEDULED = ("learning_rate", "clip_range", "clip_range_vf", "delta_std", "critic_learning_rate")


def goes_on_without_replay(algo: str, folder: Path) -> bool:
    """Whether a run cut off goes on from a checkpoint without a replay buffer: an on-policy learner of SB3's kind
    (PPO and its variants, A2C, TRPO; not AggreVaTeD or DAgger, whose memories are not saved) whose schedules are all
    constant, every :data:`SCHEDULED` key a number in the ``config.yml`` the zoo wrote for each part so far (the zoo's
    ``-i`` counts a schedule's progress from the start again). A resumed part loses the rollout in progress at
    the checkpoint and starts new episodes; its optimizer, VecNormalize statistics and saved state (ppo_kl's adapted
    beta) go on."""
    from rl_zoo3.utils import ALGOS
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

    from sb3ext.common.serialization import safe_yaml_load

    if algo in ("aggrevated", "dagger") or not issubclass(ALGOS[algo], OnPolicyAlgorithm):
        return False
    parts = [dict(safe_yaml_load(config.read_text(), str(config))) for config in folder.glob("logs/**/config.yml")]
    return bool(parts) and all(isinstance(part.get(key, 0.0), (int, float)) for part in parts for key in SCHEDULED)


#: the training episodes the PPO paper scores a run on (its last 100, stochastic actions)
TRAINING_EPISODES = 100


def last_training_episodes(folder: Path, count: int) -> np.ndarray:
    """The returns of the run's last ``count`` training episodes, from the Monitor files the zoo writes in its log
    folders (SB3's ``load_results``; a resumed run's parts in the zoo's order, ``<env>_1`` first)."""
    from stable_baselines3.common.monitor import load_results

    parts = sorted({p.parent for p in folder.glob("logs/*/*/*.monitor.csv")}, key=lambda d: int(d.name.rsplit("_", 1)[1]))
    returns = [load_results(str(part))["r"].to_numpy() for part in parts]
    return np.concatenate(returns)[-count:] if returns else np.array([])


def resume_folder(folder: Path, resume: dict[str, Any], env_id: str) -> Path:
    """The zoo's ``-i`` layout of a checkpoint, in ``<folder>/resume``: the model, ``<env>/vecnormalize.pkl`` and
    ``replay_buffer.pkl`` beside it where the checkpoint has them (hard links where the file system allows); the
    checkpoints after it are removed (a later one's files are incomplete)."""
    steps = int(resume["steps"])
    for checkpoint in (folder / "checkpoints").glob(f"{PREFIX}_*_steps.*"):
        if int(checkpoint.stem.rsplit("_", 2)[-2]) > steps:
            checkpoint.unlink()
    target = folder / "resume"
    if target.exists():
        shutil.rmtree(target)
    (target / env_id).mkdir(parents=True)
    pairs = [(resume["model"], target / "model.zip")]
    if resume["replay"] is not None:
        pairs.append((resume["replay"], target / "replay_buffer.pkl"))
    if resume["vecnormalize"] is not None:
        pairs.append((resume["vecnormalize"], target / env_id / "vecnormalize.pkl"))
    for source, link in pairs:
        try:
            os.link(source, link)
        except OSError:
            shutil.copyfile(source, link)
    return target / "model.zip"


def probe_n_envs(task: Task, algo: str, conf: list[str], hyperparams: Sequence[str] = ()) -> int:
    """The ``n_envs`` the zoo will use (the checkpoint callback counts vectorised steps): an ``n_envs:<k>`` among the
    method's ``--hyperparams``, else its YAML entry's: the ``--conf-file`` if one is given, else the file the plug-in
    points the zoo to (``sb3ext.zoo.default_config``); the env's own entry, else the file's ``atari`` entry for an ALE
    game, else its ``default`` entry, as the zoo reads them."""
    from sb3ext.zoo import default_config

    overrides = [item.split(":", 1)[1] for item in hyperparams if item.split(":", 1)[0].strip() == "n_envs"]
    if overrides:
        return int(overrides[-1])

    path = Path(conf[1]) if conf else default_config(algo, task.env)
    entries = yaml.safe_load(path.read_text()) or {}
    entry = entries.get(task.env)
    if entry is None and "atari" in entries:  # the zoo's own fallback for a game with no entry of its own
        env = games.make(task.env)
        entry = entries["atari"] if is_atari(env) else None
        env.close()
    if entry is None:  # the zoo's fallback for any other env
        entry = entries.get("default")
    if entry is None:
        raise ValueError(f"no zoo entry for {task.env!r} and no default entry in {path} (task {task.name!r})")
    return int(entry.get("n_envs", 1))


class NormalizedLearner:
    """A saved learner acting on raw observations through its checkpoint's frozen VecNormalize statistics."""

    def __init__(self, model: Any, norm: Any):
        self.model, self.norm = model, norm

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> Any:
        return self.model.predict(self.norm.normalize_obs(obs) if self.norm is not None else obs, deterministic=deterministic)


def load_saved_learner(path: Path, algo: str, env_id: str, make_env: Callable[[str], gym.Env]) -> NormalizedLearner:
    """A saved learner of the zoo's ``algo`` with the VecNormalize statistics the zoo saves beside it, if any:
    ``rl_model_vecnormalize_<N>_steps.pkl`` for a checkpoint ``rl_model_<N>_steps.zip``, ``<env>/vecnormalize.pkl``
    for the zoo's final ``<env>.zip``."""
    from rl_zoo3 import ALGOS  # sb3ext's plug-in registers its algorithms in it
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    model = ALGOS[algo].load(path, device="cpu")
    stats = path.with_name(path.name.replace("rl_model_", "rl_model_vecnormalize_").replace(".zip", ".pkl"))
    if not stats.exists():
        stats = path.with_suffix("") / "vecnormalize.pkl"
    norm = VecNormalize.load(str(stats), make_vec_env(lambda: make_env(env_id), n_envs=1)) if stats.exists() else None
    return NormalizedLearner(model, norm)


#: a learner's evaluation episodes played at once (``episode_returns``'s ``side_by_side``): about 3 times faster on a
#: walker than one after the other, where the policy's call is most of an env step's cost
SIDE_BY_SIDE = 25


def evaluate_checkpoints(job: Job, folder: Path, started: float, logged_only: bool = False) -> dict[str, Any]:
    """Every checkpoint's mean return on the suite's seeded deterministic episodes, :data:`SIDE_BY_SIDE` at a time,
    appended to ``eval.json`` as it is measured (a crash keeps the ones done); the wall-clock from the start of
    training to each checkpoint file; how many episodes each checkpoint played at once (1 before the harness did).
    ``logged_only``: only the checkpoints logged complete in ``progress.jsonl`` (while the run trains)."""
    from sb3ext.callbacks import episode_returns

    cache = folder / "eval.json"
    done = {row["steps"]: row for row in map(json.loads, cache.read_text().splitlines())} if cache.exists() else {}
    walls = checkpoint_walls(folder / "checkpoints")
    checkpoints = {int(p.stem.split("_")[2]): p for p in folder.glob("checkpoints/rl_model_*_steps.zip")}
    todo = sorted(s for s in checkpoints if s not in done and (s in walls or not logged_only))
    together = min(SIDE_BY_SIDE, job.suite.episodes)
    if todo:
        config = dict(yaml.load(next(folder.glob("logs/*/*/*/config.yml")).read_text(), Loader=yaml.UnsafeLoader))
        frame_stack = int(config.get("frame_stack", 0) or 0)
        make_env = learner_env_maker(job.task, config)
    for steps in todo:
        checkpoint = checkpoints[steps]
        learner = load_saved_learner(checkpoint, job.method.algo, job.task.env, make_env)
        returns = episode_returns(
            job.task.env, learner, job.suite.episodes, job.suite.eval_seed, make_env, frame_stack, side_by_side=together
        )[0]
        wall = walls.get(steps, checkpoint.stat().st_mtime - started)  # runs before progress.jsonl: the file's time
        done[steps] = {"steps": steps, "return": float(np.mean(returns)), "wall_s": wall, "side_by_side": together}
        with open(cache, "a") as handle:
            handle.write(json.dumps(done[steps]) + "\n")
        print(f"  {job.key}: {steps:>8,} steps  return {done[steps]['return']:8.1f}", flush=True)
    rows = [done[s] for s in sorted(done)]
    curve = {key: [r[field] for r in rows] for key, field in (("steps", "steps"), ("returns", "return"), ("wall_s", "wall_s"))}
    return {**curve, "side_by_side": [r.get("side_by_side", 1) for r in rows]}


def learner_env_maker(task: Task, config: dict[str, Any]) -> Callable[[str], gym.Env]:
    """Builds the env a run's learner acts in: the task's ``env_kwargs`` and the ``env_wrapper`` its zoo config.yml
    names (the zoo's own reader of that key)."""
    from rl_zoo3.utils import get_wrapper_class

    wrapper = get_wrapper_class(config)
    kwargs = task.make_kwargs

    def make(env_id: str) -> gym.Env:  # an Atari game scored as a game (games.py)
        return scored_env(env_id, lambda env: wrapper(env) if wrapper is not None else env, **kwargs)

    return make


def imitation_env(env: str) -> str:
    """The id imitation's gymnasium 0.29 knows: the ``-v4`` twin of a ``-v5`` MuJoCo env, ``-v2`` of the lunar
    landers' ``-v3``, else the env itself."""
    if env.endswith("-v5"):
        return env.rsplit("-", 1)[0] + "-v4"
    if env.startswith("LunarLander") and env.endswith("-v3"):
        return env.rsplit("-", 1)[0] + "-v2"
    return env


def imitation_venv(venv: Path, mujoco: bool) -> Path:
    """The imitation venv's interpreter, built (CPU torch first) when it cannot import what the task needs; one
    process builds it while the others wait (a lock file beside it)."""
    import fcntl

    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_imitation_venv(venv, mujoco)


def _build_imitation_venv(venv: Path, mujoco: bool) -> Path:
    python = venv / "bin" / "python"
    probe = "import imitation, stable_baselines3, Box2D" + (", sb3_contrib, mujoco" if mujoco else "")
    if python.exists() and subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0:
        return python
    print(f"building imitation's venv in {venv} (a few minutes)", flush=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "torch==2.13.0"], check=True)
    if shutil.which("swig") is None and os.geteuid() == 0:  # box2d-py builds with it
        subprocess.run(["apt-get", "update", "-qq"], check=False)
        subprocess.run(["apt-get", "install", "-y", "-qq", "swig"], check=True)
    pins = IMITATION_PINS + (IMITATION_MUJOCO_PINS if mujoco else [])
    subprocess.run([str(python), "-m", "pip", "install", "-q", *pins], check=True)
    return python


def imitation_run(job: Job, folder: Path) -> dict[str, Any]:
    """imitation's DAgger or BC from the task's expert, in its own venv (``benchmarks/imitation_worker.py``); the
    expert's VecNormalize statistics are exported with sb3ext's safe loader for it."""
    from sb3ext.experts import load_expert

    folder.mkdir(parents=True, exist_ok=True)
    task, method = job.task, job.method
    reference = str(task.expert_reference(folder.parents[3]))
    if reference.startswith("shipped:"):
        from sb3ext.experts.references import SHIPPED_PREFIX, shipped_expert

        reference = str(shipped_expert(reference[len(SHIPPED_PREFIX) :]))
    expert_dir = Path(reference)
    env = imitation_env(task.env)
    mujoco = task.env.endswith("-v5") or expert_dir.parent.name == "tqc"
    python = imitation_venv(Path(os.environ.get("SB3EXT_IMITATION_VENV", ROOT / "bench_runs" / "imitation-venv")), mujoco)
    out = folder / "imitation.json"
    command = [
        str(python), str(Path(__file__).with_name("imitation_worker.py")), "--method", IMITATION_METHODS[method.algo],
        "--env", env, "--expert", str(next(expert_dir.glob("*.zip"))), "--expert-algo", expert_dir.parent.name,
        "--budget", str(method.budget), "--eval-every", str(method.save_every), "--eval-episodes", str(job.suite.episodes),
        "--net-arch", *map(str, method.net_arch), "--seed", str(job.seed), "--eval-seed", str(job.suite.eval_seed),
        "--out", str(out),
    ]  # fmt: skip
    norm = load_expert(expert_dir).normalization
    if norm is not None and norm.obs_rms is not None:
        stats = folder / "expert_stats.npz"
        np.savez(stats, mean=norm.obs_rms.mean, var=norm.obs_rms.var, epsilon=norm.epsilon, clip_obs=norm.clip_obs)
        command += ["--stats", str(stats)]
    cpu = children_cpu_s()
    with open(folder / "imitation.log", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **SINGLE_THREAD})
    cpu = children_cpu_s() - cpu
    result = json.loads(out.read_text())
    return {
        "steps": result["timesteps"],
        "returns": result["returns"],
        "wall_s": result["wall_s"],
        "train_wall_s": result["wall_s"][-1] if result["wall_s"] else 0.0,
        "train_cpu_s": cpu,  # imitation's worker evaluates its checkpoints in the same process: counted here
        "imitation_env": env,
        "expert_return_imitation_env": result["expert_return_same_protocol"],
    }
