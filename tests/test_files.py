"""planner.files: inputs read as UTF-8 with clear refusals; outputs written whole, in place of
regular files only, through symlinks, never over a protected input, with the right mode."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from planner import files
from planner.errors import ModelError, OutputError
from planner.files import read_text, write_output


def leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".shardplan-"))


# -- writing ---------------------------------------------------------------------------------------------------

def test_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_output(tmp_path / "out.txt", "hello\n")
    finally:
        os.umask(old)
    # 0o666 with the umask's bits cleared: 0o666 & ~0o027 = 0o640
    assert stat.S_IMODE((tmp_path / "out.txt").stat().st_mode) == 0o640
    assert (tmp_path / "out.txt").read_text() == "hello\n"


def test_existing_file_keeps_its_mode(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("old\n")
    out.chmod(0o604)
    write_output(out, "new\n")
    assert stat.S_IMODE(out.stat().st_mode) == 0o604 and out.read_text() == "new\n"


def test_symlink_chain_is_followed_and_kept(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old\n")
    (tmp_path / "b").symlink_to("real.txt")
    (tmp_path / "a").symlink_to("b")
    write_output(tmp_path / "a", "new\n")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()
    assert target.read_text() == "new\n"


def test_dangling_symlink_creates_its_target(tmp_path):
    (tmp_path / "link").symlink_to("made.txt")
    write_output(tmp_path / "link", "x\n")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "made.txt").read_text() == "x\n"


@pytest.mark.parametrize("where, words", [
    ("folder", "folder"),
    ("missing/out.txt", "does not exist"),
    ("/dev/null", "not a regular file"),
])
def test_refusals(tmp_path, where, words):
    (tmp_path / "folder").mkdir()
    path = where if where.startswith("/") else tmp_path / where
    with pytest.raises(OutputError, match=words):
        write_output(path, "x\n")
    assert leftovers(tmp_path) == []


def test_protected_path_is_refused_also_through_a_symlink(tmp_path):
    model = tmp_path / "model.yaml"
    model.write_text("name: m\n")
    (tmp_path / "alias.yaml").symlink_to("model.yaml")
    for path in (model, tmp_path / "alias.yaml"):
        with pytest.raises(OutputError, match="input file"):
            write_output(path, "x\n", protect=[str(model)])
    assert model.read_text() == "name: m\n"


def test_failed_rename_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    out = tmp_path / "out.txt"
    out.write_text("old\n")

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", fail)
    with pytest.raises(OutputError, match="No space left on device; nothing was written"):
        write_output(out, "new\n")
    assert out.read_text() == "old\n" and leftovers(tmp_path) == []


def test_data_is_synced_before_the_rename(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(files.os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(files.os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b))[1])
    write_output(tmp_path / "out.txt", "x\n")
    assert calls[:2] == ["fsync", "replace"]


def test_temporary_is_named_for_this_machine_and_process(tmp_path, monkeypatch):
    seen = []
    real_fsync = os.fsync
    monkeypatch.setattr(files.os, "fsync", lambda fd: (seen.extend(leftovers(tmp_path)), real_fsync(fd))[1])
    write_output(tmp_path / "out.txt", "x\n")
    m = files.TEMPORARY_NAME.fullmatch(seen[0])
    assert m is not None and int(m["pid"]) == os.getpid() and m["host"] == files.host_tag()
    assert leftovers(tmp_path) == []


def test_remove_temporary_files_deletes_the_one_being_written(tmp_path, monkeypatch):
    """What the command line's SIGTERM handler does mid-write: the temporary goes, the target keeps its content."""
    out = tmp_path / "out.txt"
    out.write_text("old\n")

    def interrupted(fd):
        assert len(leftovers(tmp_path)) == 1
        files.remove_temporary_files()
        assert leftovers(tmp_path) == []
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_output(out, "new\n")
    assert out.read_text() == "old\n" and leftovers(tmp_path) == []


def gone_pid() -> int:
    """The id of a process that has ended (and been reaped)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(child.stdout)


def test_stale_temporaries_of_ours_are_swept_and_nothing_else(tmp_path):
    host = files.host_tag()
    stale = f".shardplan-{host}-{gone_pid()}-0123456789ab.tmp"
    kept = [
        f".shardplan-{host}-{os.getppid()}-0123456789ab.tmp",  # its writer runs
        f".shardplan-{host}-{os.getpid()}-0123456789ab.tmp",  # this process's own
        f".shardplan-elsewhere.example-{gone_pid()}-0123456789ab.tmp",  # another machine's: its pids are not ours
        ".shardplan-k2j4h5g1.tmp",  # no writer in the name
        "notes.tmp",
    ]
    for name in [stale, *kept]:
        (tmp_path / name).write_text("partial")
    write_output(tmp_path / "out.txt", "x\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, "out.txt"])


# -- reading ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("data, words", [
    ("name: x\n".encode("utf-16"), "UTF-16"),
    ("name: x\n".encode("utf-32"), "UTF-32"),
    (b"\x7fELF\x02\x01\x01\x00", "NUL"),
    ("a: 1\nname: caf\u00e9\n".encode("latin-1"), r"byte 0xe9 at line 2, column 10"),
])
def test_read_text_refuses_what_is_not_utf8(tmp_path, data, words):
    path = tmp_path / "m.yaml"
    path.write_bytes(data)
    with pytest.raises(ModelError, match=words) as info:
        read_text(path, "model file", ModelError)
    assert str(path) in str(info.value)


def test_read_text_accepts_a_utf8_byte_order_mark(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_bytes(b"\xef\xbb\xbfname: caf\xc3\xa9\n")
    assert read_text(path, "model file") == "name: caf\u00e9\n"
