"""The benchmark harness (``benchmarks/``): the suites file, the protocol's arithmetic, the Optuna job queue, and
one tiny suite run through the zoo end to end, resumed."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks import job_queue as queue
from benchmarks import record
from benchmarks.__main__ import main
from benchmarks.report import (
    collect,
    cpu_hours_cell,
    held_cell,
    return_text,
    steps_cell,
    summarise,
    summary_table,
    threshold_of,
)
from benchmarks.suite import SuiteError, Task, get_suite, load_suites
from tests.conftest import needs, shared_expert

PPO_5 = {"budget": 5, "save_every": 5}
PENDULUM = {"expert": "sac/Pendulum-v1_1", "methods": {"aggrevated": {"budget": 512, "save_every": 256}}}


def write_suites(tmp_path: Path, suites: dict) -> Path:
    path = tmp_path / "suites.yml"
    path.write_text(yaml.safe_dump(suites))
    return path


def test_every_suite_loads_and_names_experts_that_exist():
    suites = load_suites()
    assert {"classic", "locomotion", "walkers", "pixels", "beyond_expert", "ppo_variants", "envs"} <= set(suites)
    for suite in suites.values():
        assert suite.episodes >= 30, f"{suite.name}: the protocol evaluates on 30+ episodes"
        for task in suite.tasks.values():
            if task.expert and not task.expert.startswith(("shipped:", "work:")):  # work: trained by the suite's command
                shared_expert(task.expert)


def test_every_zoo_method_of_every_suite_finds_the_entry_the_zoo_will_use(tmp_path: Path) -> None:
    """The harness sizes each run's checkpoints by the n_envs of the entry the zoo will read: for an Atari game,
    which has no entry of its own in the zoo's ppo.yml, the file's ``atari`` entry (8 envs)."""
    from benchmarks.runs import probe_n_envs, zoo_conf

    needs("ale_py")
    needs("mujoco")
    for suite in load_suites().values():
        for task in suite.tasks.values():
            for method in task.methods.values():
                if not method.imitation:
                    folder = tmp_path / suite.name / task.name.replace("/", "-") / method.name
                    folder.mkdir(parents=True)
                    assert probe_n_envs(task, method.algo, zoo_conf(method, task, folder)) >= 1
    assert probe_n_envs(load_suites()["atari"].tasks["Breakout"], "ppo", []) == 8


def test_env_kwargs_reach_the_learners_evaluation_env_with_its_wrapper():
    """A task's env kwargs reach the learner's evaluation env, wrapped as its zoo config.yml says (the time feature):
    Ant-v4 with contact forces, 111 + 1 numbers."""
    from benchmarks.runs import learner_env_maker
    from benchmarks.suite import Task

    needs("mujoco")
    task = Task("ant", "Ant-v4", {}, env_kwargs=(("use_contact_forces", True),))
    make = learner_env_maker(task, {"env_wrapper": "sb3_contrib.common.wrappers.TimeFeatureWrapper"})
    assert make(task.env).observation_space.shape == (112,)
    assert learner_env_maker(task, {})(task.env).observation_space.shape == (111,)


def test_an_atari_game_is_scored_over_all_its_lives_with_the_games_own_rewards(monkeypatch: pytest.MonkeyPatch) -> None:
    """The zoo's AtariWrapper ends an episode at each lost life and clips rewards; the harness scores a whole game:
    a random Breakout game goes on through every life to game over, and its return is the game's unclipped score."""
    from benchmarks import games
    from sb3ext.callbacks import episode_returns

    needs("ale_py")
    import ale_py
    import gymnasium as gym
    from stable_baselines3.common.atari_wrappers import AtariWrapper

    gym.register_envs(ale_py)
    lives_seen: list[int] = []
    raw_totals: list[float] = []

    class Raw(gym.Wrapper):  # under the zoo's wrappers: the emulator's own rewards, summed per game
        def reset(self, **kwargs):  # type: ignore[no-untyped-def]
            raw_totals.append(0.0)
            return self.env.reset(**kwargs)

        def step(self, action):  # type: ignore[no-untyped-def]
            out = self.env.step(action)
            raw_totals[-1] += float(out[1])
            lives_seen.append(out[4]["lives"])
            return out

    def make(env_id: str) -> gym.Env:
        return games.scored_env(env_id, lambda env: AtariWrapper(Raw(env)))

    returns, lengths = episode_returns("BreakoutNoFrameskip-v4", None, 6, 0, make)
    assert lives_seen[-1] == 0 and set(lives_seen) == {0, 1, 2, 3, 4, 5}  # every life of the game, to game over
    assert len(raw_totals) == 6 and returns.tolist() == raw_totals and sum(raw_totals) > 0  # one episode per game
    per_life, _ = episode_returns("BreakoutNoFrameskip-v4", None, 6, 0, lambda env_id: AtariWrapper(gym.make(env_id)))
    assert per_life.sum() < returns.sum()  # what the zoo's wrappers alone call an episode is one life
    monkeypatch.setattr(games, "MAX_GAME_FRAMES", 400)
    resets = len(raw_totals)
    _, capped = episode_returns("BreakoutNoFrameskip-v4", None, 3, 0, make)
    # each game is cut at 400 frames (a frame skip of 4; resets' frames count too) ...
    assert all(50 < n <= 100 < lengths[0] for n in capped), capped
    assert len(raw_totals) == resets + 3  # ... and the next one is a new game, though the cut game was not over
    assert not games.is_atari(gym.make("CartPole-v1"))


def test_a_learner_that_trains_on_floored_rewards_is_scored_on_the_envs_own() -> None:
    """A learner's reward wrapper (here the fall's -100 floored at -10, as ``gymnasium.wrappers.ClipReward`` does in
    a zoo entry's ``env_wrapper``) changes what it trains on, not its score: the same seeded random episodes score
    the same with it and without it, and the wrapper alone would have scored them higher."""
    import gymnasium as gym
    from gymnasium.wrappers import ClipReward

    from benchmarks import games
    from sb3ext.callbacks import episode_returns

    def floored(env_id: str) -> gym.Env:
        return games.scored_env(env_id, lambda env: ClipReward(env, min_reward=-10.0))

    def plain(env_id: str) -> gym.Env:
        return games.scored_env(env_id, lambda env: env)

    scored, lengths = episode_returns("BipedalWalker-v3", None, 4, 7, floored)
    assert scored.tolist() == episode_returns("BipedalWalker-v3", None, 4, 7, plain)[0].tolist()
    alone = episode_returns("BipedalWalker-v3", None, 4, 7, lambda env_id: ClipReward(gym.make(env_id), min_reward=-10.0))
    assert alone[1].tolist() == lengths.tolist() and (alone[0] > scored + 50).any()  # a random walker falls: -100


def test_evaluated_atari_games_are_sticky_seeded_and_differ_by_seed() -> None:
    """A deterministic policy on the deterministic emulator plays the same few games whatever the seed: evaluated
    games repeat the previous action with probability STICKY_ACTIONS, drawn from the episode's seed."""
    from benchmarks import games
    from sb3ext.callbacks import episode_returns

    needs("ale_py")
    from stable_baselines3.common.atari_wrappers import AtariWrapper

    class Alternate:  # deterministic: LEFT and RIGHT in turn, so that a repeated action changes the play
        def __init__(self) -> None:
            self.count = 0

        def predict(self, obs, deterministic=True):  # type: ignore[no-untyped-def]
            self.count += 1
            return [2 + self.count % 2], None

    def sticky(env_id: str):  # type: ignore[no-untyped-def]
        return games.scored_env(env_id, AtariWrapper)

    def plain(env_id: str):  # type: ignore[no-untyped-def]
        return games.scored_env(env_id, AtariWrapper, repeat_action_probability=0.0)  # a task's own setting is kept

    assert sticky("BreakoutNoFrameskip-v4").unwrapped.ale.getFloat("repeat_action_probability") == games.STICKY_ACTIONS
    assert plain("BreakoutNoFrameskip-v4").unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    first = episode_returns("BreakoutNoFrameskip-v4", Alternate(), 8, 0, sticky)[1].tolist()
    again = episode_returns("BreakoutNoFrameskip-v4", Alternate(), 8, 0, sticky)[1].tolist()
    assert first == again  # seeded: the same seeds play the same games
    repeated = episode_returns("BreakoutNoFrameskip-v4", Alternate(), 8, 0, plain)[1].tolist()
    # game lengths of the 8 seeds: 3 distinct games without sticky actions, 6 with them
    assert len(set(first)) > len(set(repeated)), (first, repeated)


@pytest.mark.parametrize(
    "suite, message",
    [
        ({"s": {"tasks": {"Pendulum-v1": {**PENDULUM, "expret": "x"}}}}, "unknown key(s) ['expret']"),
        ({"s": {"tasks": {"Pendulum-v1": {"expert": "e", "methods": {"aggrevated": {"budget": 5}}}}}}, "missing 'save_every'"),
        ({"s": {"tasks": {"Pendulum-v1": {"methods": {"aggrevated": {"budget": 5, "save_every": 5}}}}}}, "names no 'expert'"),
        ({"s": {"tasks": {"Pendulum-v1": {"methods": {"ppo": {"budget": 5, "save_every": 5}}}}}}, "needs a 'goal'"),
        (
            {"s": {"tasks": {"P": {"expert": "e", "methods": {"ppo": {"budget": 5, "save_every": 9}}}}}},
            "larger than the budget",
        ),
        ({"s": {"tasks": {"P": {"expert": "e", "methods": {"ppo": {"budget": -5, "save_every": 1}}}}}}, "not a positive"),
        ({"s": {"seeds": "0", "tasks": {"Pendulum-v1": PENDULUM}}}, "s.seeds: expected a list"),
        ({"s": {"tasks": {"Pendulum-v1": {**PENDULUM, "seeds": [-1]}}}}, "tasks.Pendulum-v1.seeds: expected a list"),
        (
            {"s": {"tasks": {"Pendulum-v1": {**PENDULUM, "zoo_best": {"agent": "TQC", "score": "high"}}}}},
            "zoo_best: {'agent': 'TQC', 'score': 'high'}; allowed: a mapping {score: <number>, agent:",
        ),
        (
            {"s": {"tasks": {"P": {"goal": 1, "zoo_best": {"score": 2, "agent": "TQC"}, "methods": {"ppo": PPO_5}}}}},
            "zoo_best: the gap it measures starts at the expert, but the task names no 'expert'",
        ),
        (
            {"s": {"tasks": {"Pendulum-v1": {**PENDULUM, "env_kwargs": {"g": [1]}}}}},
            "env_kwargs: {'g': [1]}; allowed: a mapping of names to numbers, booleans or strings",
        ),
    ],
)
def test_a_bad_suite_names_the_key_and_what_is_allowed(tmp_path, suite, message):
    with pytest.raises(
        SuiteError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")
    ):
        load_suites(write_suites(tmp_path, suite))


def test_selection_checks_names(tmp_path):
    path = write_suites(tmp_path, {"s": {"tasks": {"Pendulum-v1": PENDULUM}}})
    with pytest.raises(SuiteError, match=r"unknown suite 'x'; allowed: \['s'\]"):
        get_suite("x", path)
    with pytest.raises(SuiteError, match=r"unknown method \['ppo'\]; allowed: \['aggrevated'\]"):
        get_suite("s", path).select(methods=["ppo"])
    assert [job.key for job in get_suite("s", path).select(seeds=[4, 7])] == [
        "s/Pendulum-v1/aggrevated/4",
        "s/Pendulum-v1/aggrevated/7",
    ]
    with pytest.raises(SystemExit) as usage:  # the CLI's usage error
        main(["run", "s", "--suites", str(path), "--tasks", "CartPole-v1"])
    assert usage.value.code == 2
    # seeds: a method's own, else its task's, else the suite's; --seeds overrides them all
    spread = {**PENDULUM, "seeds": [3], "methods": {**PENDULUM["methods"], "dagger": {"budget": 512, "save_every": 256,
                                                                                     "seeds": [1, 2]}}}  # fmt: skip
    path = write_suites(tmp_path, {"s": {"seeds": [0], "tasks": {"Pendulum-v1": spread, "CartPole-v1": PENDULUM}}})
    assert sorted(job.key for job in get_suite("s", path).select()) == [
        "s/CartPole-v1/aggrevated/0", "s/Pendulum-v1/aggrevated/3", "s/Pendulum-v1/dagger/1", "s/Pendulum-v1/dagger/2",
    ]  # fmt: skip
    assert len(get_suite("s", path).select(seeds=[5])) == 3


def result(method: str, seed: int, returns: list[float], budget: int = 400) -> dict:
    steps = [100 * (i + 1) for i in range(len(returns))]
    return {"task": "t", "method": method, "seed": seed, "budget": budget, "steps": steps, "returns": returns,
            "wall_s": [10.0 * s / 100 for s in steps], "train_wall_s": 40.0}  # fmt: skip


def test_protocol_arithmetic_by_hand():
    task = Task("t", "t", {}, expert="e")
    assert threshold_of(task, {"random": -100.0, "expert": 100.0}) == pytest.approx(80.0)
    assert threshold_of(Task("t", "t", {}, goal=5.0), {"random": 0.0}) == 5.0
    run = summarise(result("a", 0, [0, 85, 70, 90]), 80.0)
    assert (run.steps_to_threshold, run.wall_to_threshold_s, run.held, run.final, run.best) == (200, 20.0, 2 / 3, 90, 90)
    never = summarise(result("a", 1, [0, 10, 20, 30]), 80.0)
    assert (never.steps_to_threshold, never.held) == (None, 0.0)
    # the median counts a seed that never crossed as infinite: one of three missing keeps a median, two do not
    runs = [summarise(result("a", s, r), 80.0) for s, r in enumerate([[0, 85, 70, 90], [90, 90, 90, 90], [0, 0, 0, 0]])]
    assert steps_cell(runs) == "**200** (200, 100, —)"
    assert steps_cell([runs[0], runs[2], never]) == "not in 400 (200, —, —)"
    by_key = {(r.method, r.seed): result("a", r.seed, v) for r, v in zip(runs, [[0, 85, 70, 90], [90] * 4, [0] * 4])}
    assert held_cell(runs, by_key, 80.0) == "6/7 (86%)"
    # CPU-hours: measured where recorded, else the single-threaded run's wall-clock, an upper bound that says so
    measured = summarise({**result("a", 0, [90]), "train_cpu_s": 1800.0}, 80.0)
    assert cpu_hours_cell([measured, measured]) == "1.00"
    assert cpu_hours_cell([measured, runs[0]]) == "≤ 0.51"


def test_small_returns_keep_a_decimal_in_the_summary():
    """Breakout's expert scores 10.6 and its threshold is 9.6: printed as whole numbers they read 11 and 10, and a
    learner's 9.5, short of the threshold, would read as 10, at it."""
    assert (return_text(9.647), return_text(-76.04), return_text(1234.5), return_text(-150.8)) == (
        "9.6",
        "-76.0",
        "1,234",
        "-151",
    )
    suite = get_suite("atari")
    refs = {"Breakout": {"expert": 10.6, "random": 1.0667}}
    results = {"Breakout": [result("aggrevated", 0, [9.1, 9.9, 9.5])]}
    [row] = [line for line in summary_table(suite, refs, results) if line.startswith("| Breakout")]
    assert row.startswith("| Breakout | 10.6 | 9.6 | 200 (") and row.endswith("final 9.5) | — | — |"), row


def test_a_run_recorded_with_its_summary_only_keeps_its_row_and_held_count():
    curve = summarise(result("a", 0, [0, 85, 70, 90]), 80.0)
    row = {**asdict(curve), "later": 3}
    lost = {"task": "t", "method": "a", "seed": 0, "budget": 400, "summary": row}
    assert summarise(lost, 80.0) == curve
    assert held_cell([curve], {("a", 0): lost}, 80.0) == held_cell([curve], {("a", 0): result("a", 0, [0, 85, 70, 90])}, 80.0)
    assert held_cell([curve], {("a", 0): lost}, 80.0) == "2/3 (67%)"


def test_a_run_recorded_at_another_budget_is_run_again_and_not_shown(tmp_path: Path) -> None:
    [job] = get_suite("s", write_suites(tmp_path, {"s": {"seeds": [0], "tasks": {"Pendulum-v1": PENDULUM}}})).select()
    run = {"task": "Pendulum-v1", "method": "aggrevated", "seed": 0, "budget": job.method.budget}
    assert record.recorded(job, {"Pendulum-v1/aggrevated/0": run})
    assert not record.recorded(job, {"Pendulum-v1/aggrevated/0": {**run, "budget": job.method.budget // 2}})
    assert not record.recorded(job, {})
    # nor is it shown: the page and the record keep the runs at the method's budget only
    suite = get_suite("s", write_suites(tmp_path, {"s": {"seeds": [0], "tasks": {"Pendulum-v1": PENDULUM}}}))
    out = tmp_path / "out"
    old = {**fake_run(job), "budget": job.method.budget // 2, "task": "Pendulum-v1", "method": "aggrevated"}
    record.save(suite, out, {"Pendulum-v1": {"random": 0.0, "expert": 1.0}}, {"Pendulum-v1/aggrevated/0": old})
    assert collect(suite, tmp_path / "work", out)[1] == {}
    record.save(
        suite,
        out,
        {"Pendulum-v1": {"random": 0.0, "expert": 1.0}},
        {"Pendulum-v1/aggrevated/0": {**old, "budget": job.method.budget}},
    )
    assert list(collect(suite, tmp_path / "work", out)[1]) == ["Pendulum-v1/aggrevated/0"]


def fake_run(job) -> dict:
    return {"task": job.task.name, "method": job.method.name, "seed": job.seed, "budget": 1, "steps": [1],
            "returns": [float(job.seed)], "wall_s": [0.0], "references": {"random": 0.0, "expert": 1.0}}  # fmt: skip


def test_the_optuna_queue_runs_each_job_once_and_fetches_results(tmp_path):
    pytest.importorskip("sqlalchemy")
    path = write_suites(tmp_path, {"s": {"seeds": [0, 1, 2], "tasks": {"Pendulum-v1": PENDULUM}}})
    jobs = {job.key: job for job in get_suite("s", path).select()}
    storage = f"sqlite:///{tmp_path / 'queue.db'}"
    study = queue.open_study(storage, "s")
    assert queue.enqueue(study, list(jobs.values())) == 3
    assert queue.enqueue(study, list(jobs.values())) == 0  # already queued
    ran: list[str] = []
    first = queue.work(study, jobs, lambda job: (ran.append(job.key), fake_run(job))[1])
    assert first == 3 and sorted(ran) == sorted(jobs)
    assert queue.work(queue.open_study(storage, "s"), jobs, fake_run) == 0  # nothing left for a second worker
    assert queue.enqueue(study, list(jobs.values())) == 0  # finished jobs are not queued again
    assert queue.fetch(study, jobs, tmp_path / "work") == 3
    fetched = json.loads(jobs["s/Pendulum-v1/aggrevated/2"].folder(tmp_path / "work").joinpath("result.json").read_text())
    assert fetched["returns"] == [2.0]
    assert (tmp_path / "work" / "s" / "Pendulum-v1" / "references.json").exists()


def test_a_tiny_suite_runs_through_the_zoo_writes_its_page_and_resumes(tmp_path):
    shared_expert("sac/Pendulum-v1_1")
    path = write_suites(
        tmp_path, {"tiny": {"seeds": [0], "episodes": 2, "about": "smoke", "tasks": {"Pendulum-v1": PENDULUM}}}
    )
    args = ["run", "tiny", "--suites", str(path), "--work-dir", str(tmp_path / "work"), "--out", str(tmp_path / "out")]
    assert main(args) == 0
    folder = tmp_path / "work" / "tiny" / "Pendulum-v1" / "aggrevated" / "seed0"
    first = json.loads((folder / "result.json").read_text())
    assert first["steps"] == [256, 512] and len(first["returns"]) == 2 and first["wall_s"][0] < first["wall_s"][1]
    assert 0 < first["train_cpu_s"] <= 2 * first["train_wall_s"]  # the zoo's process, measured: one thread
    page = (tmp_path / "out" / "tiny.md").read_text()
    assert page.startswith("# Benchmark suite `tiny`\n\nMade by `python -m benchmarks run tiny")
    assert "| AggreVaTeD |" in page and (tmp_path / "out" / "tiny_Pendulum-v1.png").stat().st_size > 1000
    assert first["side_by_side"] == [2, 2] and "1 of the 1 runs played their checkpoints' episodes up to 2 at" in page
    # while a run trains, only the checkpoints logged complete are evaluated
    from benchmarks import runs

    [job] = get_suite("tiny", path).select()
    progress = folder / "checkpoints" / "progress.jsonl"
    logged, evaluated = progress.read_text(), (folder / "eval.json").read_text()
    progress.write_text(logged.splitlines()[0] + "\n")  # the second checkpoint is still being written
    (folder / "eval.json").unlink()
    assert runs.evaluate_checkpoints(job, folder, 0.0, logged_only=True)["steps"] == [256]
    progress.write_text(logged)
    (folder / "eval.json").write_text(evaluated)
    # a crash after training and one evaluation: the same command evaluates only the missing checkpoint
    trained = (folder / "train.json").stat().st_mtime
    (folder / "result.json").unlink()
    (tmp_path / "out" / "runs" / "tiny.json").unlink()  # a crash comes before the page and its record
    (folder / "eval.json").write_text((folder / "eval.json").read_text().splitlines()[0] + "\n")
    assert main(args) == 0
    assert (folder / "train.json").stat().st_mtime == trained
    assert json.loads((folder / "result.json").read_text())["returns"] == first["returns"]
    assert len((folder / "eval.json").read_text().splitlines()) == 2
    # a fresh clone has the committed record, not the work dir: the page comes back the same, and nothing runs again
    page = (tmp_path / "out" / "tiny.md").read_text()
    shutil.rmtree(tmp_path / "work")
    assert main(["report", *args[1:]]) == 0
    assert (tmp_path / "out" / "tiny.md").read_text() == page
    assert main(args) == 0
    assert not (tmp_path / "work" / "tiny" / "Pendulum-v1" / "aggrevated").exists()
    recorded = json.loads((tmp_path / "out" / "runs" / "tiny.json").read_text())
    assert recorded["runs"]["Pendulum-v1/aggrevated/0"]["returns"] == first["returns"]


def test_an_expert_trained_by_the_harness_is_found_under_the_work_directory(tmp_path: Path) -> None:
    suites = {"s": {"tasks": {"T": {**PENDULUM, "env": "Pendulum-v1", "expert": "work:experts/ppo/Pendulum-v1_1"}}}}
    task = get_suite("s", write_suites(tmp_path, suites)).tasks["T"]
    with pytest.raises(SuiteError, match=r"task 'T': its expert 'work:experts/ppo/Pendulum-v1_1' is not trained yet"):
        task.expert_reference(tmp_path)
    (tmp_path / "experts" / "ppo" / "Pendulum-v1_1").mkdir(parents=True)
    assert task.expert_reference(tmp_path) == str(tmp_path / "experts" / "ppo" / "Pendulum-v1_1")


def test_a_tasks_note_is_kept_for_its_page_and_unknown_task_keys_are_refused(tmp_path: Path) -> None:
    suites = {"s": {"tasks": {"T": {**PENDULUM, "note": "Diagnosis:\n  the expert   is weak."}}}}
    assert get_suite("s", write_suites(tmp_path, suites)).tasks["T"].note == "Diagnosis: the expert is weak."
    suites["s"]["tasks"]["T"]["notes"] = "x"
    with pytest.raises(SuiteError, match=r"unknown key\(s\) \['notes'\]"):
        get_suite("s", write_suites(tmp_path, suites))


def test_references_record_where_they_were_measured_and_a_measurement_elsewhere_reaches_the_page(tmp_path: Path) -> None:
    from benchmarks.report import provenance
    from benchmarks.runs import machine, packages

    shared_expert("sac/Pendulum-v1_1")
    path = write_suites(tmp_path, {"tiny": {"seeds": [0], "episodes": 2, "tasks": {"Pendulum-v1": PENDULUM}}})
    args = ["references", "tiny", "--suites", str(path), "--work-dir", str(tmp_path / "work"), "--out", str(tmp_path / "out")]
    cache = tmp_path / "work" / "tiny" / "Pendulum-v1" / "references.json"
    assert main(args) == 0  # nothing recorded yet: the first measurement becomes the references
    first = json.loads(cache.read_text())
    assert first["machine"] == machine() and "gymnasium" in first["packages"] and "elsewhere" not in first
    # references recorded on another machine: they stay, and this machine's measurement joins them, once
    recorded = {**first, "machine": "Other CPU, 2 cores", "expert": first["expert"] + 50.0}
    cache.write_text(json.dumps(recorded))
    assert main(args) == 0 and main(args) == 0
    refs = json.loads(cache.read_text())
    assert refs["expert"] == recorded["expert"] and refs["machine"] == "Other CPU, 2 cores"
    assert [o["machine"] for o in refs["elsewhere"]] == [machine()]
    assert refs["elsewhere"][0]["expert"] == pytest.approx(first["expert"])  # seeded episodes: the same number here
    task = get_suite("tiny", path).tasks["Pendulum-v1"]
    run = {"machine": machine(), "packages": packages()}
    text = " ".join(provenance("tiny", task, refs, [run]))
    assert "References measured on Other CPU, 2 cores" in text and "1 of the 1 runs ran on another machine" in text
    assert "`python -m benchmarks references tiny --tasks Pendulum-v1` measures them again here" in text
    assert f"the threshold there would be {threshold_of(task, first):.1f}" in text
    assert "measured before the harness recorded where" in provenance("tiny", task, {"random": 0.0, "expert": 1.0}, [run])[0]
    old = {"random": 0.0, "expert": 1.0, "elsewhere": refs["elsewhere"]}
    assert f"the threshold there would be {threshold_of(task, first):.1f}" in provenance("tiny", task, old, [run])[0]
    with pytest.raises(SystemExit):
        main([*args, "--tasks", "Nope-v0"])


def test_the_papers_score_is_random_zero_best_one_per_task_averaged_over_runs(tmp_path: Path) -> None:
    """The ppo_paper page's score: per task, (final - random) / (best method's mean final - random); per method, the
    mean over its runs on the tasks where every method has run. The same on the runs' last training episodes."""
    from benchmarks.report import normalised_scores

    suite = load_suites()["ppo_paper"]
    finals = {"clip_0.2": [90.0, 110.0], "no_clipping": [-20.0, 0.0], "adaptive_kl_0.01": [60.0, 80.0], "fixed_kl_1": [40.0]}

    def run(task: str, method: str, seed: int, final: float) -> dict:
        trained = final - 100.0 if method == "no_clipping" else final  # its training episodes far below its mean action
        return {"task": task, "method": method, "seed": seed, "budget": 10, "steps": [10], "returns": [final],
                "wall_s": [1.0], "training_episodes": {"mean": trained, "episodes": 100}}  # fmt: skip

    results = {"Hopper-v5": [run("Hopper-v5", m, s, f) for m, fs in finals.items() for s, f in enumerate(fs)],
               "Walker2d-v5": [run("Walker2d-v5", "clip_0.2", 0, 5.0)]}  # fmt: skip
    refs = {"Hopper-v5": {"random": 0.0}, "Walker2d-v5": {"random": 0.0}}
    lines = normalised_scores(suite, refs, results, tmp_path)
    rows = {line.split(" | ")[0].strip("| "): line for line in lines if line.startswith("| ") and "(" in line}
    assert "| clip_0.2 | 1.00 (2 runs) | 0.82 | 1.00 | 1.00 (2) |" == rows["clip_0.2"]  # the best method: 1
    assert "| no_clipping | -0.10 (2 runs) | -0.39 | -0.10 | -1.10 (2) |" == rows["no_clipping"]
    assert rows["adaptive_kl_0.01"].startswith("| adaptive_kl_0.01 | 0.70 (2 runs)")
    assert rows["fixed_kl_1"].startswith("| fixed_kl_1 | 0.40 (1 run) |")
    assert "Walker2d-v5" in lines[-1]  # left out until every method has run there
    csv_text = (tmp_path / "ppo_paper_normalised.csv").read_text()
    assert csv_text.startswith("method,score,paper,runs,Hopper-v5,training_score,training_runs")
    fixed = next(r for r in results["Hopper-v5"] if r["method"] == "fixed_kl_1")
    del fixed["training_episodes"]  # its one run is from before they were recorded: the task waits for it
    assert normalised_scores(suite, refs, results, tmp_path)[2].endswith(" | — |")


def test_the_last_training_episodes_are_read_across_a_resumed_runs_monitor_files(tmp_path: Path) -> None:
    """The paper's measure reads the zoo's Monitor files of every part of a resumed run, the first part first."""
    from benchmarks.runs import last_training_episodes

    for part, (start, rows) in enumerate([(1000.0, [(5.0, 1.0), (9.0, 2.0)]), (2000.0, [(1.0, 3.0), (4.0, 4.0)])]):
        folder = tmp_path / "logs" / "ppo" / f"Hopper-v5_{part + 1}"
        folder.mkdir(parents=True)
        lines = [f'#{{"t_start": {start}, "env_id": "Hopper-v5"}}', "r,l,t"]
        lines += [f"{r},10,{t}" for t, r in rows]
        (folder / "0.monitor.csv").write_text("\n".join(lines) + "\n")
    assert last_training_episodes(tmp_path, 3).tolist() == [2.0, 3.0, 4.0]
    assert last_training_episodes(tmp_path / "none", 3).size == 0


def test_the_beyond_columns_by_hand() -> None:
    """A task with ``zoo_best``: the bar is the expert's mean plus 3 standard errors on the page's episodes; the gap
    closed is (final - expert) / (zoo's best - expert); a seed that never passes the bar counts as never."""
    from benchmarks.report import beyond_summary, beyond_table

    task = Task("t", "t", {"a": None, "b": None}, expert="e", zoo_best=(200.0, "TQC at 1M"))  # type: ignore[dict-item]
    refs = {"expert": 100.0, "expert_std": 50.0, "random": 0.0}  # 100 episodes: s.e. 5, bar 115
    results = [result("a", 0, [110, 120, 150]), result("a", 1, [100, 114, 140]),
               {**result("b", 0, [90, 100, 80]), "train_cpu_s": 36.0}]  # fmt: skip
    lines = beyond_table(task, refs, results, 100)
    assert "plus 3 standard errors (5.0 each over 100 episodes) is 115" in lines[0]
    rows = {line.split(" | ")[0].strip("| "): line for line in lines if line.startswith("| ") and "---" not in line}
    assert rows["expert"] == "| expert | 100 ± 5.0 (s.e.) | 0% | — | — | — |"
    assert rows["a"].startswith("| a | 145 (150, 140) | 45% (50%, 40%) | **250** (200, 300) |"), rows["a"]
    assert rows["b"] == "| b | 80.0 (80.0) | -20% (-20%) | not in 400 (—) | 0.01 | 90.0 |", rows["b"]
    assert rows["zoo's best (TQC at 1M)"] == "| zoo's best (TQC at 1M) | 200 | 100% | — | — | — |"
    assert rows["a"].endswith("| ≤ 0.02 | — |")  # trained before CPU time was recorded: its wall-clock bounds it
    suite = get_suite("beyond")
    [name, *_] = suite.tasks
    [row] = beyond_summary(suite, {name: refs}, {name: [{**r, "method": "stage"} for r in results[:2]]})[2:]
    # its own zoo_best; the columns after the stage's are the suite's other methods, none run here
    assert row.startswith(f"| {name} | 100 (115) | 235 | — | 33% closed; past at 250 (2 seeds) | — |"), row
    assert set(row.split("(2 seeds) |")[1].split("|")) <= {" — ", ""}, row


def test_the_beyond_cost_configurations_are_the_levers_they_name() -> None:
    """Each configuration of the off-policy cost page builds the algorithm, network, update rate, n-step buffer and
    action repeat its name says (its buffer holds 1,000 transitions, no update made yet)."""
    from rl_zoo3.wrappers import FrameSkip
    from stable_baselines3.common.buffers import NStepReplayBuffer

    from benchmarks.beyond_cost import CONFIGS, build

    for name, (algo, repeat, settings) in CONFIGS.items():
        model = build(algo, repeat, settings)
        assert type(model).__name__.lower() == algo and model._n_updates == 0, name
        assert model.replay_buffer.size() == 1_000, name
        assert isinstance(model.env.envs[0].env, FrameSkip) == (repeat > 1), name
        assert isinstance(model.replay_buffer, NStepReplayBuffer) == ("3-step" in name), name
        assert model.train_freq.frequency == settings.get("train_freq", 1), name
        arch = settings.get("policy_kwargs", {}).get("net_arch")
        assert arch is None or f"{arch[0]}-{arch[1]}" in name, name


def test_the_harness_works_while_the_training_process_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    """``run_while`` calls its ``every`` while the process runs (the process here waits for that call), reports a
    failing call and stops calling without stopping the process, and raises on a failed process."""
    import subprocess
    import sys

    from benchmarks import runs

    monkeypatch.setattr(runs, "POLL_S", 0.01)
    go = tmp_path / "go"
    waits = f"import pathlib, sys, time\nt = time.time()\nwhile not pathlib.Path({str(go)!r}).exists():\n"
    waits += "    time.sleep(0.01)\n    if time.time() - t > 60: sys.exit(5)\n"
    calls: list[bool] = []
    runs.run_while([sys.executable, "-c", waits], lambda: (calls.append(go.exists()), go.touch()))
    assert calls[0] is False and go.exists(), "called while the process ran, before it could end"
    go.unlink()
    broken: list[int] = []

    def fails() -> None:
        broken.append(1)
        go.touch()
        raise FileNotFoundError("no config.yml yet")

    runs.run_while([sys.executable, "-c", waits], fails)
    assert broken == [1] and "while training: FileNotFoundError: no config.yml yet" in capsys.readouterr().out
    with pytest.raises(subprocess.CalledProcessError):
        runs.run_while([sys.executable, "-c", "raise SystemExit(3)"], lambda: None)


def cut_off_run(tmp_path: Path, monkeypatch, method_name: str, method: dict) -> tuple[Any, Path, int]:
    """A one-job suite on Pendulum whose training process is killed with the harness once two checkpoints are logged
    (a session's end): the job, its folder and the steps of its last checkpoint."""
    from benchmarks import runs
    from benchmarks.checkpoints import PROGRESS

    tasks = {"Pendulum-v1": {"goal": -200, "methods": {method_name: method}}}
    [job] = get_suite("s", write_suites(tmp_path, {"s": {"seeds": [0], "tasks": tasks}})).select()
    folder = job.folder(tmp_path / "work")
    progress = folder / "checkpoints" / PROGRESS

    def cut_off() -> None:  # called while it trains
        if progress.exists() and progress.read_text().count("\n") >= 2:
            raise KeyboardInterrupt  # the training process is killed with the harness

    monkeypatch.setattr(runs, "POLL_S", 0.02)
    with pytest.raises(KeyboardInterrupt):
        runs.zoo_train(job, folder, lambda started: cut_off())
    assert not (folder / "train.json").exists()
    return job, folder, json.loads(progress.read_text().splitlines()[-1])["steps"]


@pytest.mark.parametrize("learning_rate", ["0.00001", "'lin_0.00001'"])
def test_an_on_policy_run_cut_off_goes_on_where_its_schedules_are_constant(
    tmp_path: Path, monkeypatch, learning_rate: str
) -> None:
    """ppo_kl on Pendulum, cut off once two checkpoints are logged: with a constant learning rate the same job goes on
    from its last checkpoint (no replay buffer: an on-policy learner needs none) with the adapted beta it saved; with
    a schedule (whose progress the zoo's ``-i`` would start again) it starts again from scratch."""
    from benchmarks import runs
    from sb3ext.algos.ppo_kl import KLPPO

    method = {"budget": 2048, "save_every": 512, "hyperparams": ["n_envs:2", "n_steps:128", "n_epochs:2",
                                                                f"learning_rate:{learning_rate}"]}  # fmt: skip
    job, folder, at = cut_off_run(tmp_path, monkeypatch, "ppo_kl", method)
    assert 1024 <= at < 2048, "killed after its second checkpoint, before the budget"
    constant = "lin_" not in learning_rate
    assert runs.goes_on_without_replay("ppo_kl", folder) is constant
    beta = KLPPO.load(folder / "checkpoints" / f"rl_model_{at}_steps.zip").beta
    assert beta == 0.5 ** (at // 256 - 1), "halved at each update before the cut (rollouts of 2 x 128; KL < d_targ / 1.5)"
    train = runs.zoo_train(job, folder)
    commands = [line.split() for line in (folder / "train.log").read_text().splitlines() if "rl_zoo3.train" in line]
    steps = sorted(int(p.stem.split("_")[2]) for p in (folder / "checkpoints").glob("rl_model_*_steps.zip"))
    assert steps == list(range(512, 2049, 512))
    if not constant:
        assert len(commands) == 1 and "-i" not in commands[0] and "resumed_at" not in train  # from scratch
        return
    assert len(commands) == 2 and commands[1][commands[1].index("-n") + 1] == str(2048 - at)
    assert commands[1][commands[1].index("-i") + 1].endswith("model.zip") and train["resumed_at"] == [at]
    [final] = folder.glob("logs/ppo_kl/Pendulum-v1_2/Pendulum-v1.zip")  # the resumed part's model
    assert KLPPO.load(final).beta == beta * 0.5 ** ((2048 - at) // 256), "went on halving from the saved beta"


def test_a_run_cut_off_goes_on_from_its_last_checkpoint_with_its_replay(tmp_path: Path, monkeypatch) -> None:
    """SAC on Pendulum, its training process killed once two checkpoints are logged (a session's end): the same job goes
    on from that checkpoint through the zoo's ``-i``, with its replay buffer, to the budget, numbering its checkpoints
    and counting its CPU and wall-clock over both parts."""
    from benchmarks import runs
    from benchmarks.checkpoints import PROGRESS

    job, folder, at = cut_off_run(tmp_path, monkeypatch, "sac", {"budget": 1500, "save_every": 300})
    progress = folder / "checkpoints" / PROGRESS
    cut = [json.loads(line) for line in progress.read_text().splitlines()]
    assert 600 <= at < 1500, "killed after its second checkpoint, before the budget"
    train = runs.zoo_train(job, folder)
    commands = [line for line in (folder / "train.log").read_text().splitlines() if "rl_zoo3.train" in line]
    assert len(commands) == 2 and "-i" not in commands[0].split()
    resumed = commands[1].split()
    assert resumed[resumed.index("-n") + 1] == str(1500 - at) and resumed[resumed.index("-i") + 1].endswith("model.zip")
    assert "Loading replay buffer" in (folder / "train.log").read_text()
    assert train["resumed_at"] == [at] and train["cpu_s"] > cut[-1]["cpu_s"] and train["wall_s"] > cut[-1]["wall_s"]
    steps = sorted(int(p.stem.split("_")[2]) for p in (folder / "checkpoints").glob("rl_model_*_steps.zip"))
    assert steps == list(range(300, 1501, 300))
    assert [p.name for p in (folder / "checkpoints").glob("*replay_buffer*")] == ["rl_model_replay_buffer_1500_steps.pkl"]
    rows = [json.loads(line) for line in progress.read_text().splitlines()]
    assert [r["steps"] for r in rows][-len(range(at + 300, 1501, 300)) :] == list(range(at + 300, 1501, 300))
    assert all(a["wall_s"] < b["wall_s"] and a["cpu_s"] < b["cpu_s"] for a, b in zip(rows, rows[1:]))
