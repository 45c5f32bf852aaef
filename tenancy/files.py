"""Files the operator asks for (`--out`): new, owner-only, never written through a symlink."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from typing import TextIO

# Written first, then linked to the asked-for name when complete.
PARTIAL_SUFFIX = ".partial"
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class FileRefused(Exception):
    """A path the operator must change; one line, nothing was written."""


def check_new_file(path: str, option: str = "--out") -> None:
    if not path:
        raise FileRefused(f"{option} needs a file name")
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        raise FileRefused(f"{option} names a folder, not a file: {path}")
    if os.path.lexists(path):
        raise FileRefused(f"{path} exists; remove it or choose another name")


@contextlib.contextmanager
def new_private_file(path: str, option: str = "--out") -> Iterator[TextIO]:
    """A new file of mode 0600 at `path`, complete or absent: written at `path.partial`
    (created exclusively, a symlink there is refused) and linked to `path` at the end (which
    fails rather than replace a file that appeared meanwhile)."""
    check_new_file(path, option)
    partial = path + PARTIAL_SUFFIX
    try:
        fd = os.open(partial, _FLAGS, 0o600)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ELOOP):
            raise FileRefused(
                f"{partial} exists (left by an export that did not finish, or "
                "planted); remove it and try again"
            ) from None
        raise FileRefused(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        _link(partial, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)


def _link(partial: str, path: str) -> None:
    try:
        os.link(partial, path, follow_symlinks=False)
    except FileExistsError:
        raise FileRefused(f"{path} exists; remove it or choose another name") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP):
            raise FileRefused(f"cannot write {path}: {exc.strerror}") from None
        # A file system without hard links: rename (not quite exclusive, checked just before).
        check_new_file(path)
        os.rename(partial, path)
