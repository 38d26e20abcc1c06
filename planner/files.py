"""Reading input files and writing output files safely.

:func:`read_text` reads a model, cluster or baseline file as UTF-8 text and refuses,
with a message saying what to do, what is not one: a missing path, a folder, a file
larger than :data:`~planner.limits.MAX_INPUT_FILE_BYTES`, a binary file, a UTF-16 or
Latin-1 file. The caller chooses the error class (``ModelError``, ``ClusterError`` ...).

:func:`write_output` is the one way shardplan writes a file (every ``--out`` and
``check --update``): the text goes to a temporary file in the target's folder, is
flushed and ``fsync``-ed, and is renamed over the target only when that is a regular
file or absent, so a reader never sees half a file. A symlink is followed and its
target written; a folder, a device node or other special file, a missing folder and
a protected path (the model being read) are refused with
:class:`~planner.errors.OutputError`. An existing file keeps its permission bits; a
new one gets the default the user's umask gives (``0o666 & ~umask``).

The temporary file is named ``.shardplan-HOST-PID-TOKEN.tmp`` (this machine's name, the writing
process's id, a random token) and listed in this process while it exists, so that
:func:`remove_temporary_files` can delete it when the process is told to stop (the command line does
so on SIGTERM and SIGHUP). A process killed outright (SIGKILL, a crash, a power cut) leaves its
temporary behind: the next :func:`write_output` into that folder removes every temporary of ours
written on this machine by a process that no longer exists.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
import sys
from typing import Iterable

from planner.errors import OutputError, ShardplanError
from planner.limits import MAX_INPUT_FILE_BYTES, format_bytes

#: How :func:`write_stdout`'s errors name standard output (their ``where``).
STDOUT = "standard output"

#: A temporary file :func:`write_output` makes: ``.shardplan-HOST-PID-TOKEN.tmp``.
TEMPORARY_NAME = re.compile(r"\.shardplan-(?P<host>[A-Za-z0-9.-]+)-(?P<pid>[0-9]+)-(?P<token>[0-9a-f]+)\.tmp")

#: The temporary files this process is writing now (paths), for :func:`remove_temporary_files`.
_WRITING: set[str] = set()

_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
         (codecs.BOM_UTF16_BE, "UTF-16"))


def read_text(path: str | os.PathLike, what: str, error: type[ShardplanError] = ShardplanError) -> str:
    """The UTF-8 text of the file at ``path`` (``what``, e.g. ``"model file"``, names it in errors).

    Raises ``error`` located at the path (and the line, for an encoding error).
    """
    where = os.fspath(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        hint = ""
        for ext in (".yaml", ".yml", ".json"):
            if os.path.isfile(where + ext):
                hint = f"; did you mean {where + ext}?"
                break
        raise error(f"cannot read the {what}: it does not exist{hint}", where=where) from None
    except OSError as e:
        raise error(f"cannot read the {what}: {e.strerror or e}", where=where) from None
    if stat.S_ISDIR(info.st_mode):
        raise error(f"this is a folder, not a {what}; give the path of a file in it", where=where)
    if stat.S_ISREG(info.st_mode) and info.st_size > MAX_INPUT_FILE_BYTES:
        raise error(f"the {what} is {format_bytes(info.st_size)}, more than shardplan reads "
                    f"({format_bytes(MAX_INPUT_FILE_BYTES)}); is it the right file?", where=where)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_INPUT_FILE_BYTES + 1)
    except OSError as e:
        raise error(f"cannot read the {what}: {e.strerror or e}", where=where) from None
    if len(data) > MAX_INPUT_FILE_BYTES:
        raise error(f"the {what} holds more than {format_bytes(MAX_INPUT_FILE_BYTES)}, more than shardplan reads; "
                    "is it the right file?", where=where)
    return decode_text(data, where, what, error)


def decode_text(data: bytes, where: str, what: str, error: type[ShardplanError] = ShardplanError) -> str:
    """``data`` decoded as UTF-8 (a UTF-8 byte-order mark is allowed), or ``error`` saying why not.

    >>> decode_text("name: café".encode("latin-1"), "m.yaml", "model file")
    Traceback (most recent call last):
    ...
    planner.errors.ShardplanError: m.yaml:1: the model file is not UTF-8 text (byte 0xe9 at line 1, column 10; Latin-1?): save it as UTF-8
    """
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise error(f"the {what} is {name} text; save it as UTF-8", where=where)
    if b"\0" in data[:8192]:
        raise error(f"the {what} is not text (it holds NUL bytes: a binary file?); give a YAML file", where=where)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(f"the {what} is not UTF-8 text (byte 0x{data[e.start]:02x} at line {line}, column {column}; "
                    "Latin-1?): save it as UTF-8", where=f"{where}:{line}") from None


def write_output(path: str | os.PathLike, text: str, *, protect: Iterable[str | os.PathLike] = ()) -> None:
    """Write ``text`` to ``path`` safely (see the module docstring); ``protect``: paths never overwritten."""
    where = os.fspath(path)
    target = os.path.realpath(where)  # a symlink (also a chain, or one to a file not there yet) is followed
    folder = os.path.dirname(target)
    if os.path.isdir(target):
        raise OutputError("this is a folder; give the path of a file to write", where=where)
    if not os.path.isdir(folder):
        raise OutputError(f"the folder {folder} does not exist; create it first, or write elsewhere", where=where)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as e:
        raise OutputError(f"cannot write here: {e.strerror or e}", where=where) from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise OutputError("this is not a regular file (a device, a pipe or a socket); shardplan writes only "
                          "regular files: leave out --out to write to standard output and redirect it", where=where)
    for p in protect:
        if info is not None and os.path.exists(p) and os.path.samefile(target, p):
            raise OutputError(f"this is the input file {os.fspath(p)}; writing here would overwrite it: "
                              "choose another output file", where=where)
    mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask()
    data = text.encode("utf-8")
    sweep_stale_temporaries(folder)
    tmp, written = None, False
    try:
        tmp, fd = _create_temporary(folder)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, target)
        written = True
        _sync_folder(folder)
    except OSError as e:
        raise OutputError(f"cannot write here: {e.strerror or e}; nothing was written", where=where) from None
    finally:
        if tmp is not None:
            if not written:
                _remove(tmp)
            _WRITING.discard(tmp)


def remove_temporary_files() -> None:
    """Delete the temporary files this process is writing (a write cut short by a signal); the target files are
    left as they were. Safe to call from a signal handler: it never raises."""
    for path in list(_WRITING):
        _remove(path)
    _WRITING.clear()


def sweep_stale_temporaries(folder: str) -> list[str]:
    """Delete the temporary files of writers that are gone from ``folder``: ours by name
    (:data:`TEMPORARY_NAME`), written on this machine, by a process id that no longer exists. Returns
    the names removed. A temporary of a running process, of another machine, or any other file is left."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    host, removed = host_tag(), []
    for name in sorted(names):
        m = TEMPORARY_NAME.fullmatch(name)
        if m is None or m["host"] != host or _process_exists(int(m["pid"])):
            continue
        if _remove(os.path.join(folder, name)):
            removed.append(name)
    return removed


def _create_temporary(folder: str) -> tuple[str, int]:
    """A new temporary file in ``folder`` (read and write for the owner only), its name listed in
    :data:`_WRITING` before it is created, so that a signal arriving at any point finds it."""
    for _ in range(100):
        path = os.path.join(folder, f".shardplan-{host_tag()}-{os.getpid()}-{os.urandom(6).hex()}.tmp")
        _WRITING.add(path)
        try:
            return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        except FileExistsError:
            _WRITING.discard(path)
        except BaseException:  # a failed open creates nothing; an interrupt just after it leaves our file
            _remove(path)
            _WRITING.discard(path)
            raise
    raise FileExistsError(f"no free temporary file name in {folder}")


def host_tag() -> str:
    """This machine's name as a temporary file's name holds it (letters, digits, dots and hyphens)."""
    try:
        name = os.uname().nodename
    except AttributeError:  # not a POSIX system
        name = os.environ.get("COMPUTERNAME", "")
    return re.sub(r"[^A-Za-z0-9.-]", "-", name)[:64] or "host"


def _process_exists(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (one of another user counts); where that cannot be asked
    without harm (on Windows ``os.kill`` would end the process), every process is taken to exist."""
    if pid == os.getpid() or os.name != "posix":
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # it exists but is not ours, or it cannot be told: keep its file
    return True


def _remove(path: str) -> bool:
    """Delete ``path`` if it is there; whether it was."""
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def write_stdout(text: str) -> None:
    """Write ``text`` to standard output and flush it; a write error (a full disk) is an :class:`OutputError`.

    A closed pipe (``| head``) is left to the caller as :class:`BrokenPipeError`.
    """
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise OutputError(f"cannot write: {e.strerror or e}; free space on its disk or write elsewhere",
                          where=STDOUT) from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _sync_folder(folder: str) -> None:
    """Make the rename durable; not every system lets a folder be opened or synced."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
