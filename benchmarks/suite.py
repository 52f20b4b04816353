"""Suites as data: ``benchmarks/suites.yml`` read into typed, validated objects.

A suite has tasks; a task has an env, an optional expert (a folder under the shared experts, ``shipped:``, or
``work:`` a zoo run folder under the work directory) and
the methods run on it, each with its budget and checkpoint interval. One job is (suite, task, method, seed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SUITES_FILE = Path(__file__).resolve().parent / "suites.yml"

#: methods that are not zoo algorithms: imitation 1.0.1's trainers, run in a venv of their own
IMITATION_METHODS = {"imitation_dagger": "dagger", "imitation_bc": "bc"}
#: zoo algorithms that learn from the task's expert (the others train from scratch)
EXPERT_ALGOS = {"aggrevated", "dagger"}

SUITE_KEYS = {"about", "seeds", "episodes", "eval_seed", "tasks", "paper_scores"}
TASK_KEYS = {
    "env",
    "env_kwargs",
    "expert",
    "expert_observes_state",
    "zoo_entry",
    "goal",
    "methods",
    "note",
    "seeds",
    "as_trained",
    "zoo_best",
}
METHOD_KEYS = {"algo", "budget", "save_every", "hyperparams", "net_arch", "seeds", "entry"}


class SuiteError(ValueError):
    """An invalid suite file or selection; the message names the key and what is allowed."""


def experts_folder() -> Path:
    """The shared zoo experts: ``SB3EXT_SHARED_EXPERTS`` or ``../shared/experts`` beside the checkout."""
    return Path(os.environ.get("SB3EXT_SHARED_EXPERTS", ROOT.parent / "shared" / "experts"))


@dataclass(frozen=True)
class Method:
    """One method of a task: ``name`` is its column; ``algo`` the zoo key or an imitation trainer."""

    name: str
    algo: str
    budget: int
    save_every: int
    hyperparams: tuple[str, ...] = ()
    net_arch: tuple[int, ...] = (64, 64)
    seeds: tuple[int, ...] | None = None  # this method's seeds, where they differ from its task's
    entry: str | None = None  # "<file>:<name>": its zoo entry from a YAML file under benchmarks/, not the zoo's own

    @property
    def imitation(self) -> bool:
        return self.algo in IMITATION_METHODS

    def zoo_hyperparams(self) -> list[str]:
        """The method's ``--hyperparams`` entries, ``{budget}`` replaced by its budget."""
        return [entry.replace("{budget}", str(self.budget)) for entry in self.hyperparams]


@dataclass(frozen=True)
class Task:
    name: str
    env: str
    methods: dict[str, Method]
    expert: str | None = None
    expert_observes_state: bool = False
    zoo_entry: str | None = None  # the zoo's RL entry to use for this env (e.g. HalfCheetah-v4 for HalfCheetah-v5)
    goal: float | None = None  # the threshold of a task without an expert
    env_kwargs: tuple[tuple[str, Any], ...] = ()  # gym.make's keyword arguments, for every run and every evaluation
    note: str = ""  # shown under the task's table: what a result means (a diagnosis where a criterion is missed)
    seeds: tuple[int, ...] | None = None  # this task's seeds, where they differ from the suite's
    as_trained: str = ""  # why the expert's score here differs from its own recorded level (measured), where it does
    #: the zoo's best published agent for the env: (its score, which agent at what budget); a page then measures each
    #: method against the expert and that score (the beyond suite)
    zoo_best: tuple[float, str] | None = None

    @property
    def make_kwargs(self) -> dict[str, Any]:
        return dict(self.env_kwargs)

    def expert_reference(self, work: Path) -> str | None:
        """The expert as ``load_expert`` takes it: a shipped name; ``work:<folder>``, a zoo run folder under the
        harness's work directory ``work`` (an expert trained here, by the command the suite's ``about`` gives);
        else a folder under the shared experts."""
        if self.expert is None or self.expert.startswith("shipped:"):
            return self.expert
        if self.expert.startswith("work:"):
            folder = work / self.expert.removeprefix("work:")
            if not folder.is_dir():
                raise SuiteError(
                    f"task {self.name!r}: its expert {self.expert!r} is not trained yet ({folder} is missing); "
                    "train it with the command in the suite's 'about' first"
                )
            return str(folder)
        return str(experts_folder() / self.expert)


@dataclass(frozen=True)
class Suite:
    name: str
    about: str
    tasks: dict[str, Task]
    seeds: tuple[int, ...] = (0, 1, 2)
    episodes: int = 30
    eval_seed: int = 50_000
    #: a paper's normalised score per method (random 0, the best method of a task 1), shown beside this suite's
    paper_scores: tuple[tuple[str, float], ...] = ()

    def select(
        self, tasks: list[str] | None = None, methods: list[str] | None = None, seeds: list[int] | None = None
    ) -> list[Job]:
        """The suite's jobs, restricted to the given tasks, methods and seeds (each checked against the suite)."""
        for kind, asked, known in (
            ("task", tasks, list(self.tasks)),
            ("method", methods, sorted({m for t in self.tasks.values() for m in t.methods})),
        ):
            unknown = sorted(set(asked or ()) - set(known))
            if unknown:
                raise SuiteError(f"suite {self.name!r}: unknown {kind} {unknown}; allowed: {known}")
        return [
            Job(self, task, method, seed)
            for task in self.tasks.values()
            if not tasks or task.name in tasks
            for method in task.methods.values()
            if not methods or method.name in methods
            for seed in (seeds if seeds is not None else method.seeds or task.seeds or self.seeds)
        ]


@dataclass(frozen=True)
class Job:
    suite: Suite
    task: Task
    method: Method
    seed: int

    @property
    def key(self) -> str:
        return f"{self.suite.name}/{self.task.name}/{self.method.name}/{self.seed}"

    def folder(self, work: Path) -> Path:
        return task_folder(work, self.suite.name, self.task.name) / self.method.name / f"seed{self.seed}"


def task_folder(work: Path, suite: str, task: str) -> Path:
    """Where a task's runs and its ``references.json`` live under the work dir."""
    return work / suite / task.replace("/", "-")


def _check_keys(where: str, mapping: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(mapping, dict):
        raise SuiteError(f"{where}: expected a mapping, got {mapping!r}")
    unknown = sorted(set(mapping) - allowed)
    if unknown:
        raise SuiteError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    return mapping


def _positive_int(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value or value <= 0:
        raise SuiteError(f"{where}: {value!r} is not a positive integer")
    return int(value)


def _method(where: str, name: str, spec: Any) -> Method:
    spec = _check_keys(where, spec, METHOD_KEYS)
    for key in ("budget", "save_every"):
        if key not in spec:
            raise SuiteError(f"{where}: missing {key!r}")
    budget, save_every = (
        _positive_int(f"{where}.budget", spec["budget"]),
        _positive_int(f"{where}.save_every", spec["save_every"]),
    )
    if save_every > budget:
        raise SuiteError(f"{where}: save_every {save_every} is larger than the budget {budget}")
    hyperparams = spec.get("hyperparams", [])
    if not isinstance(hyperparams, list) or not all(isinstance(h, str) and ":" in h for h in hyperparams):
        raise SuiteError(f"{where}.hyperparams: expected a list of zoo 'key:value' strings, got {hyperparams!r}")
    net_arch = tuple(_positive_int(f"{where}.net_arch", n) for n in spec.get("net_arch", [64, 64]))
    entry = spec.get("entry")
    if entry is not None:
        entry_entries(where, str(entry))
    return Method(name, str(spec.get("algo", name)), budget, save_every, tuple(hyperparams), net_arch,
                  _seeds(where, spec), None if entry is None else str(entry))  # fmt: skip


def entry_entries(where: str, entry: str) -> dict[str, Any]:
    """A method's ``entry`` (``<file>:<name>``, the file under ``benchmarks/``): that entry of the file, checked."""
    file, _, name = entry.partition(":")
    path = Path(__file__).parent / file
    if not name or not file.endswith(".yml") or not path.is_file():
        raise SuiteError(f"{where}.entry: {entry!r}; allowed: '<file>:<name>', a .yml file under benchmarks/")
    entries = yaml.safe_load(path.read_text()) or {}
    if not isinstance(entries.get(name), dict):
        allowed = sorted(k for k in entries if not str(k).startswith("."))
        raise SuiteError(f"{where}.entry: {path.name} has no entry {name!r}; allowed: {allowed}")
    return dict(entries[name])


def _seeds(where: str, spec: dict[str, Any]) -> tuple[int, ...] | None:
    """The ``seeds`` of a suite, task or method (None where it names none)."""
    seeds = spec.get("seeds")
    if seeds is None:
        return None
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise SuiteError(f"{where}.seeds: expected a list of integers >= 0, got {seeds!r}")
    return tuple(seeds)


def _task(where: str, name: str, spec: Any) -> Task:
    spec = _check_keys(where, spec, TASK_KEYS)
    methods = _check_keys(f"{where}.methods", spec.get("methods"), set(spec.get("methods") or {}))
    if not methods:
        raise SuiteError(f"{where}.methods: a task needs at least one method")
    parsed = {m: _method(f"{where}.methods.{m}", m, s) for m, s in methods.items()}
    expert = spec.get("expert")
    needs_expert = sorted(m.name for m in parsed.values() if m.algo in EXPERT_ALGOS or m.imitation)
    if expert is None and needs_expert:
        raise SuiteError(f"{where}: methods {needs_expert} learn from an expert, but the task names no 'expert'")
    goal = spec.get("goal")
    env_kwargs = spec.get("env_kwargs") or {}
    if not isinstance(env_kwargs, dict) or not all(
        isinstance(k, str) and isinstance(v, (bool, int, float, str)) for k, v in env_kwargs.items()
    ):
        raise SuiteError(f"{where}.env_kwargs: {env_kwargs!r}; allowed: a mapping of names to numbers, booleans or strings")
    if expert is None and goal is None:
        raise SuiteError(f"{where}: a task without an 'expert' needs a 'goal' (the return its threshold is)")
    return Task(
        name=name,
        env=str(spec.get("env", name)),
        methods=parsed,
        expert=None if expert is None else str(expert),
        expert_observes_state=bool(spec.get("expert_observes_state", False)),
        zoo_entry=spec.get("zoo_entry"),
        goal=None if goal is None else float(goal),
        env_kwargs=tuple(sorted(env_kwargs.items())),
        note=" ".join(str(spec.get("note", "")).split()),
        seeds=_seeds(where, spec),
        as_trained=" ".join(str(spec.get("as_trained", "")).split()),
        zoo_best=_zoo_best(where, spec, expert),
    )


def _zoo_best(where: str, spec: dict[str, Any], expert: Any) -> tuple[float, str] | None:
    """A task's ``zoo_best``, checked: ``{score: <number>, agent: <text>}``, on a task with an expert (the gap it
    measures starts there)."""
    best = spec.get("zoo_best")
    if best is None:
        return None
    allowed = "a mapping {score: <number>, agent: <text naming the agent and its budget>}"
    if not isinstance(best, dict) or set(best) != {"score", "agent"} or isinstance(best["score"], bool) \
            or not isinstance(best["score"], (int, float)) or not str(best["agent"]).strip():  # fmt: skip
        raise SuiteError(f"{where}.zoo_best: {best!r}; allowed: {allowed}")
    if expert is None:
        raise SuiteError(f"{where}.zoo_best: the gap it measures starts at the expert, but the task names no 'expert'")
    return float(best["score"]), str(best["agent"])


def load_suites(path: Path = SUITES_FILE) -> dict[str, Suite]:
    """Every suite of the file, validated (a :class:`SuiteError` names the first bad key or value)."""
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict):
        raise SuiteError(f"{path}: expected a mapping of suite names")
    suites = {}
    for name, spec in raw.items():
        if str(name).startswith("."):  # YAML anchors' home (".defaults")
            continue
        spec = _check_keys(f"suite {name}", spec, SUITE_KEYS)
        tasks = _check_keys(f"suite {name}.tasks", spec.get("tasks"), set(spec.get("tasks") or {}))
        if not tasks:
            raise SuiteError(f"suite {name}: no tasks")
        suites[name] = Suite(
            name=name,
            about=" ".join(str(spec.get("about", "")).split()),
            tasks={t: _task(f"suite {name}.tasks.{t}", t, s) for t, s in tasks.items()},
            seeds=_seeds(f"suite {name}", spec) or (0, 1, 2),
            episodes=_positive_int(f"suite {name}.episodes", spec.get("episodes", 30)),
            eval_seed=int(spec.get("eval_seed", 50_000)),
            paper_scores=_paper_scores(f"suite {name}", spec),
        )
    return suites


def _paper_scores(where: str, spec: dict[str, Any]) -> tuple[tuple[str, float], ...]:
    """A suite's ``paper_scores``: a number per method that its tasks run."""
    scores = spec.get("paper_scores") or {}
    methods = {m for task in (spec.get("tasks") or {}).values() for m in (task or {}).get("methods") or {}}
    if not isinstance(scores, dict) or not all(isinstance(v, (int, float)) for v in scores.values()):
        raise SuiteError(f"{where}.paper_scores: {scores!r}; allowed: a mapping of method names to numbers")
    unknown = sorted(set(scores) - methods)
    if unknown:
        raise SuiteError(f"{where}.paper_scores: unknown method(s) {unknown}; allowed: {sorted(methods)}")
    return tuple((str(k), float(v)) for k, v in scores.items())


def get_suite(name: str, path: Path = SUITES_FILE) -> Suite:
    suites = load_suites(path)
    if name not in suites:
        raise SuiteError(f"unknown suite {name!r}; allowed: {sorted(suites)}")
    return suites[name]
