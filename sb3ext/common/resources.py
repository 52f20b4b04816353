"""Files shipped with sb3ext (L0): the zoo-format hyperparameter files."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def hyperparams_path(algo: str) -> Path:
    """Path of sb3ext's zoo-format YAML file for ``algo``: an sb3ext algorithm, or a stock one on sb3ext's envs."""
    for folder in (_PACKAGE / "hyperparams", _PACKAGE.parent / "hyperparams"):
        # a regular install ships the files inside the package; the source tree / editable install has them beside it
        if (folder / f"{algo}.yml").is_file():
            return folder / f"{algo}.yml"
    raise ValueError(f"sb3ext has no hyperparameter file for {algo!r}")
