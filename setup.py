"""Build hooks for sb3ext (metadata lives in setup.cfg).

``build_py`` is extended to ship two things that are not plain package modules:

* ``sb3ext-zoo.pth``: one line that installs sb3ext's post-import hook for rl_zoo3 (see
  ``sb3ext/_hook.py``). It must sit at the root of site-packages; for a regular wheel that is
  ``build_lib``, for an editable wheel it is the unpacked wheel folder (``install_lib``), because
  setuptools throws the editable ``build_lib`` away. Its name sorts after ``__editable__*.pth`` so
  that, in editable mode, ``sb3ext`` is importable when the line runs.
* the zoo-format YAML files of ``hyperparams/``, copied to ``sb3ext/hyperparams/`` in the wheel
  (an editable install reads them from the source tree instead).
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent
PTH_NAME = "sb3ext-zoo.pth"
PTH_LINE = "import sb3ext._hook\n"


class BuildPyWithZooHook(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            root = Path(self.get_finalized_command("install").install_lib)
        else:
            root = Path(self.build_lib)
            target = root / "sb3ext" / "hyperparams"
            target.mkdir(parents=True, exist_ok=True)
            for yml in sorted((HERE / "hyperparams").glob("*.yml")):
                shutil.copyfile(yml, target / yml.name)
        root.mkdir(parents=True, exist_ok=True)
        (root / PTH_NAME).write_text(PTH_LINE)


setup(cmdclass={"build_py": BuildPyWithZooHook})
