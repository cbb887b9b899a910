"""Writing results: output paths checked before any work, files and folders replaced whole or not at all.

A command that writes a folder (`simulate --out DIR`) calls `check_output_dir` before it reads its inputs,
so a path it could never write fails at once (exit 2) instead of after a long run. It then writes into a
fresh temporary folder beside the target (`atomic_directory`) and renames it into place at the end: a
reused `--out` never mixes the files of two runs, and an error or Ctrl-C leaves the old folder as it was
and no half-written one. `atomic_write_text` does the same for a single file.

Because a folder is replaced whole, an existing `--out` folder must be empty or one kubesched wrote (it
holds `MARKER`, or a `summary.json` of an earlier version): kubesched never deletes files it did not write.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kubesched.errors import InputError

MARKER = ".kubesched-output"
# Files that mark a folder written by kubesched before MARKER existed.
_EARLIER_MARKERS = ("summary.json",)


def _nearest_existing(p: Path) -> Path:
    cur = p
    while not cur.exists() and not cur.is_symlink():
        if cur.parent == cur:
            break
        cur = cur.parent
    return cur


def _check_parent_writable(path: Path, option: str) -> None:
    parent = path.parent if str(path.parent) else Path(".")
    base = _nearest_existing(parent)
    if base.is_symlink() and not base.exists():
        raise InputError(f"{base} is a broken symbolic link", field=option)
    if not base.is_dir():
        raise InputError(f"cannot create {path}: {base} is not a folder", field=option)
    if not os.access(base, os.W_OK | os.X_OK):
        raise InputError(f"cannot create {path}: no permission to write in {base}", field=option)
    # Permissions are not the whole story (root, read-only or virtual file systems): try, and leave nothing.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".kubesched-probe.", dir=base))
    except OSError as e:
        raise InputError(f"cannot create {path}: {e.strerror or e}", field=option) from None


def _folder(path: str | os.PathLike[str], option: str) -> Path:
    """The path of an output folder: a name, not a broken link, and a folder if it exists."""
    p = Path(path)
    if str(path) == "":
        raise InputError("expected a folder name", field=option)
    if p.is_symlink() and not p.exists():
        raise InputError(f"{p} is a broken symbolic link", field=option)
    if p.exists() and not p.is_dir():
        raise InputError(f"{p} exists and is not a folder", field=option)
    return p


def check_output_dir(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """A folder kubesched may (re)write whole; InputError naming `option` otherwise. Nothing is created."""
    p = _folder(path, option)
    if p.exists():
        try:
            entries = [e.name for e in p.iterdir()]
        except OSError as e:
            raise InputError(f"cannot read folder {p}: {e.strerror or e}", field=option) from None
        if entries and MARKER not in entries and not any(m in entries for m in _EARLIER_MARKERS):
            raise InputError(f"{p} exists and holds files kubesched did not write; kubesched replaces its output "
                             "folder whole, so give a new or empty folder, or one of its earlier outputs",
                             field=option)
        if p.resolve() == Path.cwd().resolve() or p.resolve() == Path.home().resolve():
            raise InputError(f"{p} is the current or home folder; give a folder of its own", field=option)
    _check_parent_writable(p.absolute(), option)
    return p


def check_resumable_dir(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """A folder a resumable command (tune, sweep) adds to: it may hold earlier results, but must be a folder
    kubesched can create or write in; InputError naming `option` otherwise. Nothing is created."""
    p = _folder(path, option)
    if p.exists():
        if not os.access(p, os.W_OK | os.X_OK):
            raise InputError(f"cannot write in {p}: permission denied", field=option)
        return p
    _check_parent_writable(p.absolute(), option)
    return p


def check_output_file(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """A file kubesched may (re)write; InputError naming `option` otherwise. Nothing is created."""
    p = Path(path)
    if str(path) == "":
        raise InputError("expected a file name", field=option)
    if p.exists() and p.is_dir():
        raise InputError(f"{p} is a folder; expected a file name", field=option)
    if p.exists() and not os.access(p, os.W_OK):
        raise InputError(f"cannot write {p}: permission denied", field=option)
    _check_parent_writable(p.absolute(), option)
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty temporary folder; on success it replaces `path` whole, on any exception it is removed."""
    target = Path(path)
    parent = target.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=parent))
    try:
        yield tmp
        (tmp / MARKER).write_text("written by kubesched; the whole folder is replaced by the next run\n")
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; the result is an ordinary folder
        _replace_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _replace_dir(new: Path, target: Path) -> None:
    if not target.exists():
        os.replace(new, target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.absolute().parent))
    os.rmdir(old)
    os.replace(target, old)
    try:
        os.replace(new, target)
    except BaseException:
        os.replace(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary file path beside `path`; on success it replaces `path`, on any exception it is removed."""
    target = Path(path)
    parent = target.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text(text)
