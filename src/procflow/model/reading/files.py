"""Reading definition files and the project files they name: regular files only, size bounded.

A named pipe would make a read wait forever and a link to ``/dev/zero`` would grow without end, so
a file is opened without blocking, checked with ``fstat`` (on the open file, so it cannot be
swapped in between) and read only when it is a regular file within the size limit; at most
``limit + 1`` bytes are read, in case it grows meanwhile. A link to a regular file is read.
"""

from __future__ import annotations

import os
import stat

from procflow.config import Config, env_name, format_size
from procflow.errors import UsageError

__all__ = ["DEFAULT_MAX_FILE_SIZE", "read_bytes", "read_text"]

DEFAULT_MAX_FILE_SIZE = Config().max_file_size
_SETTING = "PROCFLOW_MAX_FILE_SIZE"

_KINDS = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bytes(path: str, max_size: int = DEFAULT_MAX_FILE_SIZE) -> bytes:
    """The content of the regular file ``path``; :class:`UsageError` (exit 2) when there is no
    such file, it is not a regular file, it is over ``max_size`` bytes or it cannot be read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as exc:  # no permission, a socket, an I/O error
        raise UsageError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    try:
        _check(path, os.fstat(fd), max_size)
        data = _read_at_most(fd, max_size + 1)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > max_size:  # it grew after the check
        raise UsageError(_too_large(path, len(data), max_size, grew=True))
    return data


def read_text(path: str, max_size: int = DEFAULT_MAX_FILE_SIZE) -> str:
    """:func:`read_bytes` as UTF-8 text with universal newlines (as ``Path.read_text``);
    raises :class:`UnicodeDecodeError` for text that is not UTF-8."""
    text = read_bytes(path, max_size).decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _read_at_most(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _check(path: str, st: os.stat_result, max_size: int) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{path}: is a directory; name a *.intent or *.flow.yaml file")
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "an unknown kind")
        raise UsageError(f"{path}: not a regular file ({kind}); procflow reads only regular files")
    if st.st_size > max_size:
        raise UsageError(_too_large(path, st.st_size, max_size))


def _too_large(path: str, size: int, max_size: int, grew: bool = False) -> str:
    exact = f" ({size:,} bytes)" if size >= 1024 else ""
    what = "grew past" if grew else f"is {format_size(size)}{exact}, over"
    return (
        f"{path}: {what} the limit of {format_size(max_size)}; "
        f"raise it with --max-file-size or {env_name(_SETTING)}"
    )
