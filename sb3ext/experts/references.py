"""Expert references: local zoo folders and ``.zip`` files, or Hugging Face Hub repositories.

A reference is one of

* a local path: a zoo folder (``<algo>/<Env>_1``) or a ``.zip`` checkpoint;
* a Hub repo id of the zoo's naming scheme, ``<org>/<algo>-<EnvId>`` (e.g. ``sb3/sac-Pendulum-v1``),
  optionally ``@<revision>`` (a branch, tag or commit);
* a mapping (YAML or Python) with ``id`` (Hub) or ``path`` (local), and optionally ``revision``,
  ``sha256`` (the expected digest of the model zip) and ``trust_remote_code``.

Hub files are fetched with ``huggingface_hub.hf_hub_download`` (the zoo's file names:
``<algo>-<EnvId>.zip``, ``config.yml``, ``vec_normalize.pkl`` when present), through the local
Hugging Face cache: ``HF_HUB_OFFLINE``, ``HF_HUB_CACHE`` and ``HF_HOME`` are honoured as
huggingface_hub reads them.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sb3ext.common.files import open_regular

#: ``org/name`` or ``org/name@revision``; org and name as the Hub allows them.
HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[\w./-]+))?$")
_MAPPING_KEYS = ("id", "path", "revision", "sha256", "trust_remote_code")
_TRUTHY = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class ExpertReference:
    """Where an expert comes from, and how much to trust it."""

    location: str
    is_hub: bool
    revision: str | None = None
    sha256: str | None = None
    trust_remote_code: bool = False

    def __str__(self) -> str:
        return f"{self.location}@{self.revision}" if self.revision else self.location


#: sb3ext's own opt-in to full trust. Not ``TRUST_REMOTE_CODE``: huggingface_sb3 asks users to export that one for
#: its own ``load_from_hub``, and trust must come from the caller, never from a variable another tool asks for.
TRUST_VARIABLE = "SB3EXT_TRUST_REMOTE_CODE"


def trust_from_environment() -> bool:
    """``SB3EXT_TRUST_REMOTE_CODE`` set to a true value (1, true, yes, on) opts in to full trust."""
    return os.environ.get(TRUST_VARIABLE, "").strip().lower() in _TRUTHY


SHIPPED_PREFIX = "shipped:"


#: Where the shipped experts live: zoo folders ``<algo>/<run>`` beside this module.
SHIPPED_ROOT = Path(__file__).resolve().parent
#: The shipped SAC Pendulum-v1 expert of the demo and the offline examples.
PENDULUM_EXPERT = "sac/Pendulum-v1_1"


def shipped_experts() -> list[str]:
    """Names of the experts shipped inside sb3ext (``<algo>/<run folder>``), for ``shipped:<name>`` references."""
    return sorted(f"{folder.parent.name}/{folder.name}" for folder in SHIPPED_ROOT.glob("*/*") if any(folder.glob("*.zip")))


def shipped_expert(name: str) -> Path:
    """Folder of the shipped expert ``name`` (``sac/Pendulum-v1_1``); ``ValueError`` listing them if unknown."""
    path = SHIPPED_ROOT / name
    if name not in shipped_experts():
        raise ValueError(f"no shipped expert {name!r}; shipped: {', '.join(SHIPPED_PREFIX + n for n in shipped_experts())}")
    return path


def parse_reference(reference: str | os.PathLike[str] | dict[str, Any]) -> ExpertReference:
    """Turn a user's expert reference into an :class:`ExpertReference` (no I/O beyond ``exists``)."""
    if isinstance(reference, dict):
        unknown = sorted(map(repr, set(reference) - set(_MAPPING_KEYS)))
        if unknown:
            raise ValueError(
                f"Unknown key(s) [{', '.join(unknown)}] in the expert mapping; allowed: {', '.join(_MAPPING_KEYS)}"
            )
        if ("id" in reference) == ("path" in reference):
            raise ValueError(f"An expert mapping needs exactly one of 'id' (Hub repo) or 'path' (local), got {reference}")
        sha256 = reference.get("sha256")
        if sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", str(sha256)):
            raise ValueError(f"Expert sha256 must be 64 hex digits, got {sha256!r}")
        trust = reference.get("trust_remote_code", False)
        if not isinstance(trust, bool):
            raise ValueError(f"Expert trust_remote_code must be true or false, got {trust!r}")
        if "path" in reference:
            if reference.get("revision") is not None:
                raise ValueError("'revision' only applies to a Hub 'id', not to a local 'path'")
            return ExpertReference(str(reference["path"]), False, None, sha256 and str(sha256).lower(), trust)
        parsed = parse_reference(str(reference["id"]))
        if not parsed.is_hub:
            raise ValueError(f"Expert id {reference['id']!r} is not a Hub repo id of the form org/name[@revision]")
        revision = reference.get("revision", parsed.revision)
        if reference.get("revision") is not None and parsed.revision is not None and reference["revision"] != parsed.revision:
            raise ValueError(f"Two revisions given for {reference['id']!r}: {parsed.revision!r} and {reference['revision']!r}")
        return ExpertReference(parsed.location, True, revision and str(revision), sha256 and str(sha256).lower(), trust)
    if not isinstance(reference, (str, os.PathLike)):
        raise TypeError(f"expert must be a path, a Hub id, a mapping or an Expert, not {type(reference).__name__}")
    text = os.fspath(reference)
    if isinstance(reference, str) and text.startswith(SHIPPED_PREFIX):
        return ExpertReference(str(shipped_expert(text[len(SHIPPED_PREFIX) :])), False)
    match = HUB_ID.match(text)
    if isinstance(reference, str) and match and not text.startswith((".", "/", "~")) and not Path(text).exists():
        return ExpertReference(match.group("repo"), True, match.group("revision"))
    return ExpertReference(text, False)


def check_sha256(path: Path, expected: str | None) -> None:
    """Raise ``ValueError`` if ``path``'s sha256 differs from ``expected`` (no-op when None)."""
    if expected is None:
        return
    hasher = hashlib.sha256()
    with open_regular(path, "an expert file") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(chunk)
    digest = hasher.hexdigest()
    if digest != expected.lower():
        raise ValueError(f"sha256 of {path} is {digest}, but the expert reference pins {expected.lower()}")


def _cache_dir() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def download(repo_id: str, filename: str, revision: str | None, required: bool) -> Path | None:
    """One file of a Hub repo through the local cache; None for a missing optional file."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{repo_id}@{revision}" if revision else repo_id
    # LocalEntryNotFoundError subclasses EntryNotFoundError: it must be caught first
    try:
        return Path(hf_hub_download(repo_id, filename, revision=revision))
    except RevisionNotFoundError:
        raise ValueError(f"Revision {revision!r} of the Hub repo {repo_id!r} does not exist") from None
    except RepositoryNotFoundError:
        raise ValueError(f"Hub repo {repo_id!r} does not exist (or is private)") from None
    except LocalEntryNotFoundError:
        if not required:
            return None  # offline: an optional file that was never cached (a `normalize` expert is checked later)
        state = "HF_HUB_OFFLINE is set" if _offline() else "the Hub cannot be reached"
        raise ValueError(
            f"Expert {where!r}: {filename} is not in the Hugging Face cache ({_cache_dir()}) and {state}. "
            f"Pre-fetch it on a connected machine (`hf download {repo_id} {filename} config.yml vec_normalize.pkl"
            f"{' --revision ' + revision if revision else ''}`, then copy the cache, or set HF_HUB_CACHE to it) "
            "or pass a local zoo folder / .zip instead"
        ) from None
    except EntryNotFoundError:
        if required:
            raise ValueError(f"Hub repo {where!r} has no file {filename!r} (zoo repos hold <algo>-<EnvId>.zip)") from None
        return None


def hub_model_filename(repo_id: str) -> str:
    """The zoo's model file name in a repo: ``sb3/sac-Pendulum-v1`` -> ``sac-Pendulum-v1.zip``."""
    return f"{repo_id.split('/', 1)[1]}.zip"
