"""Writing an output file complete or not at all, without a name another user can plant."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .._model._errors import UsageError

#: flags of the temporary file: created here or not at all (O_EXCL never follows a link, even a
#: dangling one), and not inherited by a child the program starts meanwhile
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@contextlib.contextmanager
def replacing(target: Path) -> Iterator[BinaryIO]:
    """A new file beside *target* to write; renamed over *target* when the block ends, removed
    when it raises. The name is random and the file created exclusively, so a link planted in the
    folder cannot redirect the write (a fixed ``.partial`` name could be); the file gets the
    usual mode (0666 less the umask) and a link at *target* itself is replaced, not followed.

    :raises UsageError: *target* is a folder, or its folder is missing (said before anything is written)
    """
    if target.is_dir() and not target.is_symlink():
        raise UsageError(f"{target} is a folder: give the path of a file to write")
    if not target.parent.is_dir():
        raise UsageError(
            f"{target}: the folder {target.parent} does not exist: make it first, or write elsewhere"
        )
    for _ in range(16):
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.partial")
        try:
            fd = os.open(temporary, _CREATE, 0o666)
            break
        except FileExistsError:  # (a name taken: another, 16 times running is not chance)
            continue
    else:
        raise FileExistsError(f"{target.parent}: no free temporary name beside {target.name}")
    try:
        with open(fd, "wb") as stream:
            yield stream
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
