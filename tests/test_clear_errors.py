"""Every refusal of odd input is one line naming what was wrong and what is allowed (issue 46, unclear errors): none
of these escape as a bare ``ValueError`` without the file, an ``OSError``, a ``RuntimeError`` or a ``TypeError``."""

from __future__ import annotations

import io
import json
import pickle
import shutil
import zipfile
from pathlib import Path

import pytest

from sb3ext.common.serialization import UnsafeObjectError, restricted_loads, safe_yaml_load
from sb3ext.experts import load_expert
from sb3ext.experts.references import parse_reference
from tests.conftest import ROOT

SHIPPED = ROOT / "sb3ext" / "experts" / "sac" / "Pendulum-v1_1"


def rewrite(path: Path, name: str, change) -> None:  # type: ignore[no-untyped-def]
    with zipfile.ZipFile(path) as archive:
        content = {n: archive.read(n) for n in archive.namelist()}
    content[name] = change(content[name])
    with zipfile.ZipFile(path, "w") as archive:
        for n, raw in content.items():
            archive.writestr(n, raw)


def huge_integer_in_data(raw: bytes) -> bytes:
    data = json.loads(raw)
    data["gamma"] = 0.125
    text = json.dumps(data)
    assert '"gamma": 0.125' in text
    return text.replace('"gamma": 0.125', '"gamma": ' + "9" * 5000).encode()


def inner_name_not_text(raw: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            target.writestr(info.filename, source.read(info))
    fixed = buffer.getvalue()
    name = zipfile.ZipFile(io.BytesIO(raw)).infolist()[0].filename.encode()
    broken = b"\xff" + name[1:]
    return fixed.replace(name, broken).replace(b"\x00\x00\x08\x00", b"\x00\x08\x08\x00")  # UTF-8 flag on a non-UTF-8 name


@pytest.mark.parametrize(
    "entry, change, words",
    [("data", huge_integer_in_data, "unreadable JSON value"), ("policy.pth", inner_name_not_text, "policy.pth")],
)
def test_odd_checkpoints_give_one_line_naming_the_entry(tmp_path: Path, entry: str, change, words: str) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "sac" / "Pendulum-v1_1"
    shutil.copytree(SHIPPED, folder)
    rewrite(folder / "Pendulum-v1.zip", entry, change)
    with pytest.raises((ValueError, UnsafeObjectError)) as info:
        load_expert(folder)
    assert words in str(info.value) and "Pendulum-v1.zip" in str(info.value) and "\n" not in str(info.value)


def test_a_refusal_deep_in_a_pickle_names_the_file() -> None:
    payload = pickle.dumps({(1, 2): 3})  # a tuple as a dictionary key
    with pytest.raises(UnsafeObjectError, match=r"^some/file \[entry\]: refused dictionary key of type tuple"):
        restricted_loads(payload, "some/file [entry]")


def test_a_5000_digit_integer_in_yaml_names_the_file() -> None:
    with pytest.raises(ValueError, match=r"^config\.yml: unreadable value"):
        safe_yaml_load("n_steps: " + "9" * 5000, "config.yml")


@pytest.mark.parametrize(
    "reference, words",
    [
        ({"path": "x", 1: "y", (2,): "z"}, "Unknown key(s) [(2,), 1] in the expert mapping"),
        ("~nosuchuser_sb3ext/expert", "cannot be used"),
        ("x" * 5000, "cannot be used"),
    ],
)
def test_odd_references_give_one_clear_line(reference, words: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError) as info:
        load_expert(reference) if not isinstance(reference, dict) else parse_reference(reference)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_a_refused_global_with_control_characters_is_named_on_one_line() -> None:
    """A flipped byte turned ``collections`` into ``collectio\\ns`` in a fuzzed pickle: the refusal quoted it raw and
    spanned two lines. Names that are not printable are shown as their repr."""
    from sb3ext.common.serialization import UnsafeObjectError, restricted_loads

    def short(text: str) -> bytes:
        raw = text.encode()
        return b"\x8c" + bytes([len(raw)]) + raw  # SHORT_BINUNICODE

    payload = b"\x80\x04" + short("collectio\ns") + short("deque") + b"\x93)R."  # STACK_GLOBAL, EMPTY_TUPLE, REDUCE
    with pytest.raises(UnsafeObjectError) as refused:
        restricted_loads(payload, "case.zip [data: ep_info_buffer]")
    message = str(refused.value)
    assert "\n" not in message and "'collectio\\ns.deque'" in message, message
