"""``load`` for sb3ext's algorithms: their own checkpoints load without running code from the file.

SB3's ``BaseAlgorithm.load`` unpickles the zip's fields and imports the module its ``env`` field names. The mixin
:class:`SafeLoad` gives each sb3ext algorithm a ``load`` with SB3's signature that builds the model with
:func:`sb3ext.experts.learner.load_learner` instead; ``trust_remote_code=True`` (or sb3ext's own
``SB3EXT_TRUST_REMOTE_CODE``) asks for SB3's full load, for files you made yourself.
"""

from __future__ import annotations

import io
import os
from typing import Any, ClassVar, TypeVar

import torch as th

from sb3ext.experts.learner import load_learner
from sb3ext.experts.references import trust_from_environment

SelfSafeLoad = TypeVar("SelfSafeLoad", bound="SafeLoad")


class SafeLoad:
    """Mixin, first among the bases of an sb3ext algorithm: a ``load`` that runs no code from the file."""

    #: the rollout buffer classes besides SB3's that a checkpoint of this algorithm may name, by (module, name)
    rollout_buffers: ClassVar[dict[tuple[str, str], type]] = {}

    @classmethod
    def load(  # type: ignore[no-untyped-def]
        cls: type[SelfSafeLoad],
        path: str | os.PathLike[str] | io.BufferedIOBase,
        env: Any = None,
        device: th.device | str = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        trust_remote_code: bool = False,
        **kwargs: Any,
    ) -> SelfSafeLoad:
        """Load a model saved with ``save``, as SB3's ``load`` does, without unpickling anything from the file or
        importing what its fields name (see :mod:`sb3ext.experts.learner`).

        :param trust_remote_code: True: SB3's own ``load``, which runs code from the file (only for your own files);
            also ``SB3EXT_TRUST_REMOTE_CODE=1``
        """
        if trust_remote_code or trust_from_environment():
            return super().load(  # type: ignore[misc]
                path, env=env, device=device, custom_objects=custom_objects, print_system_info=print_system_info,
                force_reset=force_reset, **kwargs,
            )  # fmt: skip
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                f"{cls.__name__}.load reads checkpoints from a path (got a {type(path).__name__}); save the stream to a "
                "file first, or pass trust_remote_code=True for a file you made yourself"
            )
        return load_learner(  # type: ignore[return-value]
            cls, path, env=env, device=device, custom_objects=custom_objects, force_reset=force_reset,  # type: ignore[arg-type]
            rollout_buffers=cls.rollout_buffers, **kwargs,
        )  # fmt: skip
