"""Reading the parts of an SB3 checkpoint zip in bounded memory and time, with one clear error per defect.

A checkpoint from the Hub is untrusted input. :class:`CheckpointArchive` checks the zip's directory before
reading anything (entry names, duplicates, encryption, compression methods, declared sizes), reads each
entry through a size cap (zip bombs stop at the cap, whatever the entry declares), parses ``data`` as a
bounded UTF-8 JSON object and loads tensor entries with ``torch.load(weights_only=True)`` after checking
that their own inner zip holds only uncompressed records of bounded size.

Errors raise :class:`~sb3ext.common.serialization.UnsafeObjectError` for hostile content and
``ValueError`` for malformed content; both name the file and the entry.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
import re
import sys
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import torch as th

from sb3ext.common.files import open_regular
from sb3ext.common.serialization import MAX_DEPTH, UnsafeObjectError

#: Largest ``data`` entry (real ones are 15-30 kB).
MAX_DATA_BYTES = 16 << 20
#: Largest tensor entry, and largest total read from one checkpoint (real experts: 0.1-8 MB).
MAX_TENSOR_BYTES = 256 << 20
MAX_TOTAL_BYTES = 384 << 20
#: Largest checkpoint file and number of entries.
MAX_FILE_BYTES = 1 << 30
MAX_ENTRIES = 64
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}


class CheckpointArchive:
    """An SB3 checkpoint zip whose directory has been checked; entries are read with size caps.

    :param path: the ``.zip`` file
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._read_total = 0
        self._handle = open_regular(self.path, "a checkpoint")
        try:
            size = os.fstat(self._handle.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise UnsafeObjectError(
                    f"{self.path}: {size} bytes, larger than the {MAX_FILE_BYTES}-byte limit for a checkpoint"
                )
            try:
                self.archive = zipfile.ZipFile(self._handle)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
                raise ValueError(f"{self.path}: not a readable zip archive ({exc}); an SB3 checkpoint is a zip file") from None
        except BaseException:
            self._handle.close()
            raise
        self.entries = _check_directory(self.archive, str(self.path))

    def __enter__(self) -> CheckpointArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.archive.close()
        self._handle.close()

    def where(self, name: str) -> str:
        return f"{self.path} [{name}]"

    def has(self, name: str) -> bool:
        return name in self.entries

    def read(self, name: str, limit: int) -> bytes:
        """The bytes of entry ``name``, refusing more than ``limit`` bytes (declared or actual)."""
        if name not in self.entries:
            present = ", ".join(sorted(self.entries)) or "none"
            hint = ""
            if any(entry.endswith("/data.pkl") for entry in self.entries):  # torch's own archive layout
                hint = (
                    "; it reads as a torch archive, which is what an SB3 checkpoint cut short while being written looks "
                    "like (SB3 stores its .pth entries uncompressed, and writes in place): take the previous checkpoint"
                )
            raise ValueError(f"{self.path}: the checkpoint has no '{name}' entry (entries: {present}){hint}")
        info = self.entries[name]
        limit = min(limit, MAX_TOTAL_BYTES - self._read_total)
        if info.file_size > limit:
            raise UnsafeObjectError(
                f"{self.where(name)}: declares {info.file_size} bytes uncompressed ({info.compress_size} compressed); "
                f"at most {limit} bytes are read from this entry"
            )
        chunks, total = [], 0
        try:
            with self.archive.open(info) as handle:
                while True:
                    chunk = handle.read(1 << 20)
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > limit:
                        raise UnsafeObjectError(f"{self.where(name)}: inflates past {limit} bytes (a zip bomb)")
                    chunks.append(chunk)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
            if isinstance(exc, UnsafeObjectError):
                raise
            raise ValueError(f"{self.where(name)}: corrupt or truncated entry ({exc})") from None
        except Exception as exc:  # zlib.error and friends
            raise ValueError(f"{self.where(name)}: corrupt or truncated entry ({type(exc).__name__}: {exc})") from None
        self._read_total += total
        return b"".join(chunks)

    def data(self) -> dict[str, Any]:
        """The ``data`` entry: a JSON object, UTF-8, bounded in size and nesting."""
        raw = self.read("data", MAX_DATA_BYTES)
        where = self.where("data")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{where}: not UTF-8 ({exc.reason} at byte {exc.start}); SB3 writes UTF-8 JSON") from None
        try:
            data = json.loads(text)
        except RecursionError:
            raise ValueError(f"{where}: JSON nested too deeply (at most {MAX_DEPTH} levels)") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: malformed JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
        except ValueError as exc:  # an integer of more digits than Python converts
            raise ValueError(f"{where}: unreadable JSON value ({' '.join(str(exc).split())[:200]})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{where}: a JSON {type(data).__name__}, not an object; SB3 writes an object of fields")
        _check_depth(data, where)
        return data

    def serialized(self, data: dict[str, Any], key: str) -> bytes | None:
        """The decoded pickle of a ``:serialized:`` field of ``data`` (None when the field is plain JSON or absent)."""
        value = data.get(key)
        if not (isinstance(value, dict) and ":serialized:" in value):
            return None
        encoded = value[":serialized:"]
        if not isinstance(encoded, str):
            raise ValueError(
                f"{self.where('data')} field {key}: ':serialized:' is a {type(encoded).__name__}, not base64 text"
            )
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{self.where('data')} field {key}: ':serialized:' is not valid base64") from None

    def torch_object(self, name: str) -> Any:
        """A ``torch.save`` entry loaded with ``weights_only=True`` (tensors and plain containers only), after its
        inner records are checked; torch's own error, which advises an unsafe load, is never passed on."""
        raw = self.read(name, MAX_TENSOR_BYTES)
        where = self.where(name)
        _check_torch_container(raw, where)
        try:
            return th.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises many types; none of them may escape unnamed
            raise ValueError(f"{where}: unreadable tensors ({torch_reason(exc)})") from None

    def tensors(self, name: str) -> dict[str, th.Tensor | None]:
        """A tensor entry (``policy.pth``, ``pytorch_variables.pth``): a mapping of names to tensors."""
        loaded = self.torch_object(name)
        where = self.where(name)
        if not isinstance(loaded, dict) or not all(isinstance(k, str) for k in loaded):
            raise ValueError(f"{where}: holds a {type(loaded).__name__}, not a mapping of names to tensors")
        for key, value in loaded.items():
            if value is not None and not isinstance(value, th.Tensor):
                raise ValueError(f"{where}: '{key}' is a {type(value).__name__}, not a tensor")
        return loaded


#: paragraphs of torch's weights-only errors that advise instead of explaining (one of them: to load unsafely)
_TORCH_ADVICE = ("Weights only load failed", "Check the documentation", "safe_globals", "Please file an issue",
                 "weights_only=False", "`weights_only`")  # fmt: skip


def torch_reason(exc: Exception) -> str:
    """The reason in torch's load error, without its advice (to load with ``weights_only=False``, which runs code from
    the file, or to allow more globals): for a refused object, the global it names. One line, ours."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1].split("Please use", 1)[0]
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    kept = [p for p in paragraphs if p and not any(advice in p for advice in _TORCH_ADVICE)]
    if "Weights only load failed" in str(exc) or "WeightsUnpickler" in str(exc):
        reason = " ".join(kept).strip() or "an object it does not allow"
        return f"refused by torch's weights-only unpickler: {reason[:200]}"
    return f"{type(exc).__name__}: {' '.join(text.split())[:200]}"


def _check_directory(archive: zipfile.ZipFile, where: str) -> dict[str, zipfile.ZipInfo]:
    infos = archive.infolist()
    if len(infos) > MAX_ENTRIES:
        raise UnsafeObjectError(f"{where}: {len(infos)} entries; an SB3 checkpoint has fewer than {MAX_ENTRIES}")
    entries: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        name = info.filename
        parts = PurePosixPath(name).parts
        if (
            not name
            or name.startswith(("/", "\\"))
            or "\\" in name
            or "\x00" in name
            or ".." in parts
            or (len(name) > 1 and name[1] == ":")
        ):
            raise UnsafeObjectError(f"{where}: refused entry name {name!r} (absolute or path-traversing)")
        if name in entries:
            raise UnsafeObjectError(
                f"{where}: duplicate entry {name!r} (two entries of one name; which one is read is ambiguous)"
            )
        if info.flag_bits & 0x1:
            raise ValueError(f"{where} [{name}]: encrypted entry; SB3 checkpoints are not encrypted")
        if info.compress_type not in _METHODS:
            raise ValueError(
                f"{where} [{name}]: compression method {info.compress_type}; allowed: {', '.join(_METHODS.values())}"
            )
        entries[name] = info
    return entries


def _check_depth(obj: Any, where: str) -> None:
    stack = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _check_torch_container(raw: bytes, where: str) -> None:
    """torch's format is a zip of uncompressed records: refuse compressed or oversized inner records.

    The legacy (torch < 1.6) format is a sequence of pickles followed by the storages: the storage sizes
    its main pickle declares must fit in the file, since torch allocates them before reading.
    """
    try:
        _check_torch_records(raw, where)
    except (ValueError, UnsafeObjectError):
        raise
    except Exception as exc:  # zipfile raises BadZipFile from is_zipfile, NotImplementedError for odd versions ...
        raise ValueError(f"{where}: not a readable torch.save file ({type(exc).__name__}: {exc})") from None


def _check_torch_records(raw: bytes, where: str) -> None:
    if not zipfile.is_zipfile(io.BytesIO(raw)):
        _check_legacy_torch(raw, where)
        return
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as inner:
            infos = inner.infolist()
    except (zipfile.BadZipFile, UnicodeDecodeError, ValueError, EOFError) as exc:
        raise ValueError(f"{where}: not a readable torch.save file ({type(exc).__name__}: {exc})") from None
    if len(infos) > 1 << 16:
        raise UnsafeObjectError(f"{where}: {len(infos)} records, too many for a policy")
    for info in infos:
        if info.filename.endswith("/byteorder") and info.file_size <= 16:
            order = _inner_record(raw, info, where).decode("ascii", "replace")
            if order != sys.byteorder:
                raise UnsafeObjectError(
                    f"{where}: record byteorder says {order[:16]!r}; tensors saved on this machine's {sys.byteorder}-endian "
                    "layout only (torch would byte-swap every tensor)"
                )
        if info.compress_type != zipfile.ZIP_STORED or info.file_size > len(raw):
            raise UnsafeObjectError(
                f"{where}: record {info.filename!r} is compressed or larger than its file "
                f"({info.file_size} bytes declared); torch.save writes uncompressed records"
            )
    _check_pickle_record(raw, infos, where)


#: a torch file's pickle, against the storages it holds: genuine ones take 130-660 bytes and 20-40 opcodes a storage
#: (at most 4.9 kB for a policy); torch's weights-only unpickler spends seconds on crafted ones of tens of kB
PICKLE_BYTES_BASE, PICKLE_BYTES_PER_STORAGE = 8192, 1024
PICKLE_OPS_BASE, PICKLE_OPS_PER_STORAGE = 2000, 200


def _inner_record(raw: bytes, info: zipfile.ZipInfo, where: str) -> bytes:
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as inner:
            return inner.read(info)
    except Exception as exc:  # zipfile raises NotImplementedError for unknown versions, BadZipFile, zlib errors ...
        raise ValueError(f"{where}: unreadable record {info.filename!r} ({type(exc).__name__}: {exc})") from None


def _check_pickle_record(raw: bytes, infos: list[zipfile.ZipInfo], where: str) -> None:
    """Bound the unpickling time: the pickle's size and opcode count must fit the storages the file holds."""
    import pickletools

    pickles = [i for i in infos if i.filename.endswith("/data.pkl")]
    if len(pickles) != 1:
        raise ValueError(f"{where}: {len(pickles)} data.pkl records; a torch.save file has one")
    storages = sum(1 for i in infos if "/data/" in i.filename)
    record = pickles[0]
    limit = PICKLE_BYTES_BASE + PICKLE_BYTES_PER_STORAGE * storages
    if record.file_size > limit:
        raise UnsafeObjectError(
            f"{where}: its pickle is {record.file_size} bytes for {storages} tensor storages; at most {limit} are read"
        )
    pickle_bytes = _inner_record(raw, record, where)
    ops_limit = PICKLE_OPS_BASE + PICKLE_OPS_PER_STORAGE * storages
    try:
        for count, _ in enumerate(pickletools.genops(pickle_bytes), 1):
            if count > ops_limit:
                raise UnsafeObjectError(
                    f"{where}: its pickle has more than {ops_limit} operations for {storages} tensor storages"
                )
    except UnsafeObjectError:
        raise
    except Exception as exc:
        raise ValueError(f"{where}: malformed pickle ({type(exc).__name__}: {exc})") from None


#: the pickle opcodes that push an integer (memo indices, BINPUT's and BINGET's arguments, are not sizes)
_INT_PUSHES = frozenset({"INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4"})


def _check_legacy_torch(raw: bytes, where: str) -> None:
    import pickletools

    stream = io.BytesIO(raw)
    declared = 0
    try:
        for index in range(4):  # magic number, protocol version, system info, then the object with its storages
            largest = 0  # the largest integer pushed since the last storage: at least its element count
            for opcode, arg, _pos in pickletools.genops(stream):
                if opcode.name in _INT_PUSHES and isinstance(arg, int):
                    if arg < 0:
                        raise UnsafeObjectError(f"{where}: a negative size ({arg}) in its pickle")
                    largest = max(largest, arg)
                elif opcode.name in ("BINPERSID", "PERSID") and index == 3:
                    declared += largest * 8  # element count x the widest element
                    largest = 0
    except UnsafeObjectError:
        raise
    except Exception as exc:
        raise ValueError(f"{where}: not a torch.save file ({type(exc).__name__}: {exc})") from None
    if declared > 8 * len(raw):
        raise UnsafeObjectError(f"{where}: declares storages of about {declared} bytes in a file of {len(raw)} bytes")


def is_within(path: Path, root: Path) -> bool:
    """``path`` resolves (symlinks followed) to a location inside ``root`` (resolved too)."""
    try:
        return Path(os.path.realpath(path)).is_relative_to(Path(os.path.realpath(root)))
    except OSError:
        return False


__all__ = ["CheckpointArchive", "is_within", "MAX_DATA_BYTES", "MAX_TENSOR_BYTES"]
