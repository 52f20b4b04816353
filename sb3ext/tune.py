"""Helpers around ``python -m rl_zoo3.train ... -optimize`` for studies shared by several workers.

    python -m sb3ext.tune create --storage URL --study-name NAME     # before the workers start
    python -m sb3ext.tune status --storage URL --study-name NAME     # fail stale trials, count states
    python -m sb3ext.tune export --storage URL --study-name NAME --algo aggrevated --env Pendulum-v1 -o best.yml

``export`` writes a zoo YAML file (the default entry for the env with the best trial's hyperparameters,
or ``--trial N``'s, on top) for ``python -m rl_zoo3.train --algo ALGO --env ENV -conf best.yml``.
See docs/tuning.md for the multi-worker recipe.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from rl_zoo3.utils import StoreDict

    parser = argparse.ArgumentParser(
        prog="python -m sb3ext.tune", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("create", "create the study (direction: maximize) if it does not exist"),
        ("status", "mark trials of dead workers failed (heartbeat storages), print trial counts and the best trial"),
        ("export", "write a trial's hyperparameters as a zoo YAML file"),
    ):
        command = commands.add_parser(name, help=help_text, description=help_text)
        command.add_argument("--storage", required=True, help="sqlite:///x.db, postgresql+psycopg2://..., or x.log")
        command.add_argument("--study-name", required=True)
        if name == "export":
            command.add_argument("--algo", required=True, help="zoo algorithm key, e.g. aggrevated")
            command.add_argument("--env", required=True, help="environment id, e.g. Pendulum-v1")
            command.add_argument("--trial", type=int, default=None, help="trial number (default: the best trial)")
            command.add_argument("-conf", "--conf-file", type=Path, default=None, help="base YAML (default: the zoo's)")
            command.add_argument(
                "--hyperparams", nargs="+", action=StoreDict, default={}, help="overrides (zoo syntax): expert:'path'"
            )
            command.add_argument("-o", "--output", type=Path, required=True, help="YAML file to write")
    args = parser.parse_args(argv)

    from sb3ext import tuning, zoo

    try:
        if args.command == "create":
            study = tuning.create_study(args.storage, args.study_name)
            print(f"study {study.study_name!r} ready in {args.storage} ({len(study.trials)} trials)")
            return 0
        study = tuning.load_study(args.storage, args.study_name)
        if args.command == "status":
            counts = tuning.study_status(study)
            print(f"study {study.study_name!r}: " + ", ".join(f"{state} {n}" for state, n in counts.items() if n))
            if counts["COMPLETE"]:
                best = study.best_trial
                print(f"best trial {best.number}: value {best.value:.3f}, params {best.params}")
            return 0
        tuning.pick_trial(study, args.trial)  # a missing trial is the first thing to report
        config = args.conf_file if args.conf_file is not None else zoo.default_config(args.algo, args.env)
        content, trial = tuning.export_trial(
            study, args.env, zoo.converter_for(args.algo), config, trial_number=args.trial, overrides=args.hyperparams
        )
    except (ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    value = "n/a" if trial.value is None else f"{trial.value:.3f}"
    header = (
        f"Exported by: python -m sb3ext.tune export (study {study.study_name!r}, trial {trial.number}, "
        f"state {trial.state.name}, value {value})\n"
        f"Use: python -m rl_zoo3.train --algo {args.algo} --env {args.env} -conf {args.output}"
    )
    tuning.write_zoo_yaml(args.output, content, header)
    print(f"trial {trial.number} (value {value}) written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
