"""Secrets at rest and in output: var encryption, the secret key, masking.

Decisions (normative for the store and the docs):

- Var values are JSON-serialized and sealed with AES-256-GCM (``cryptography``'s ``AESGCM``), a
  random 12-byte nonce per value, and the associated data ``run_id + NUL + var name``: a ciphertext
  copied to another run or var does not decrypt. Blob layout: ``0x01`` (format version), nonce,
  ciphertext with its 16-byte tag.
- The key is HKDF-SHA256 (salt ``procflow-vars-v1``, 32 bytes) of the secret string, which must be
  at least 32 characters. Surrounding whitespace of the secret is ignored (env var and key file
  alike, so both spellings of one secret give one key); an empty ``PROCFLOW_SECRET_KEY`` counts as
  unset.
- Key source, first that applies: ``PROCFLOW_SECRET_KEY``; ``PROCFLOW_SECRET_KEY_FILE``; for a
  SQLite file ``<db>.key`` beside the database, created on first use (64 random URL-safe
  characters, mode 0600 from the start, published atomically so concurrent first starts agree);
  for in-memory SQLite an ephemeral key; otherwise (PostgreSQL) an error saying what to set.
- No message here ever contains a secret, a key or a var's plain text.
- Masking replaces every occurrence of a secret's text forms with ``***``; overlapping and adjacent
  occurrences merge into one ``***`` so no fragment survives. Values whose text is shorter than
  4 characters, booleans and null are not masked: masking ``"ab"`` or ``1`` would mangle every
  line while hiding next to nothing (such values are still never stored in plain text).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from procflow.config import raw
from procflow.errors import SecretKeyError, VarValueError
from procflow.store.url import StoreUrl, dialect_of

MIN_SECRET_CHARS = 32
KEY_SALT = b"procflow-vars-v1"
ENV_KEY = "PROCFLOW_SECRET_KEY"
ENV_KEY_FILE = "PROCFLOW_SECRET_KEY_FILE"
MASK = "***"
MIN_MASK_CHARS = 4

_VERSION = b"\x01"
_NONCE_BYTES = 12
_TAG_BYTES = 16
_POSTGRES_NEEDS_KEY = (
    "PostgreSQL needs a shared secret key: set PROCFLOW_SECRET_KEY (at least 32 characters) "
    "or PROCFLOW_SECRET_KEY_FILE on every worker"
)


# --- encryption ------------------------------------------------------------------------------


class VarCipher:
    """Seals and opens var values; bound to one 32-byte key."""

    __slots__ = ("_aead",)

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise SecretKeyError("a var key is 32 bytes")
        # Imported here: cryptography costs ~20 ms at start-up, and most runs have no vars.
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(key)

    def __repr__(self) -> str:
        return "VarCipher(<key hidden>)"

    @classmethod
    def from_secret(cls, secret: str) -> VarCipher:
        """The cipher for a secret string (at least 32 characters, surrounding blanks ignored)."""
        text = _long_enough(secret)
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=KEY_SALT, info=None)
        return cls(hkdf.derive(text.encode("utf-8")))

    @classmethod
    def ephemeral(cls) -> VarCipher:
        """A cipher with a random key that lives as long as this object (in-memory stores)."""
        return cls(os.urandom(32))

    def encrypt(self, run_id: str, name: str, value: Any) -> bytes:
        try:
            plain = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError):
            raise VarValueError(
                f"var [{name}] of run [{run_id}] cannot be stored: its value "
                f"({type(value).__name__}) is not JSON data"
            ) from None
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, plain.encode("utf-8"), _aad(run_id, name))
        return _VERSION + nonce + sealed

    def decrypt(self, run_id: str, name: str, blob: bytes) -> Any:
        where = f"var [{name}] of run [{run_id}]"
        data = bytes(blob)
        if len(data) < 1 + _NONCE_BYTES + _TAG_BYTES or data[:1] != _VERSION:
            raise SecretKeyError(f"cannot decrypt {where}: the stored value is not a sealed var")
        nonce, sealed = data[1 : 1 + _NONCE_BYTES], data[1 + _NONCE_BYTES :]
        from cryptography.exceptions import InvalidTag

        try:
            plain = self._aead.decrypt(nonce, sealed, _aad(run_id, name))
        except InvalidTag:
            raise SecretKeyError(
                f"cannot decrypt {where}: wrong {ENV_KEY}? "
                "(or the value was sealed for another run or var)"
            ) from None
        return json.loads(plain.decode("utf-8"))


def _aad(run_id: str, name: str) -> bytes:
    return f"{run_id}\0{name}".encode()


def _long_enough(secret: str) -> str:
    """The secret without surrounding blanks, refused when shorter than the minimum."""
    text = secret.strip()
    if len(text) < MIN_SECRET_CHARS:
        raise SecretKeyError(
            f"the secret key is {len(text)} characters long; it must be at least {MIN_SECRET_CHARS}"
        )
    return text


# --- the key ---------------------------------------------------------------------------------


def load_cipher(db_url: str, environ: Mapping[str, str]) -> VarCipher:
    """The var cipher for the store at ``db_url`` (see the module notes for where the key is)."""
    secret = _secret_for(db_url, environ)
    return VarCipher.ephemeral() if secret is None else VarCipher.from_secret(secret)


def check_secret_key(db_url: str, environ: Mapping[str, str]) -> None:
    """Raises what :func:`load_cipher` would, without deriving the key: the start-up check that a
    PostgreSQL worker has one, for every command (deriving it loads ``cryptography``, some 40 ms
    of a command's start, which a command that touches no var need not pay)."""
    _secret_for(db_url, environ)


def _secret_for(db_url: str, environ: Mapping[str, str]) -> str | None:
    """The secret key's text for the store at ``db_url``, checked; None for an in-memory store."""
    secret = (raw(ENV_KEY, environ) or "").strip()
    if secret:
        return _checked(secret, ENV_KEY)
    key_file = (raw(ENV_KEY_FILE, environ) or "").strip()
    if key_file:
        read = _read_key_file(Path(key_file), ENV_KEY_FILE)
        return _checked(read, f"{ENV_KEY_FILE} [{key_file}]")
    if dialect_of(db_url) != "sqlite":
        raise SecretKeyError(_POSTGRES_NEEDS_KEY)
    path = StoreUrl.parse(db_url).sqlite_file  # the store's own reading of the URL
    if path is None:
        return None
    key_path = Path(f"{path}.key")
    return _checked(_sqlite_key(key_path), f"key file [{key_path}]")


def _checked(secret: str, source: str) -> str:
    try:
        return _long_enough(secret)
    except SecretKeyError as e:
        raise SecretKeyError(f"{source}: {e}") from None


def _read_key_file(path: Path, source: str) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise SecretKeyError(f"{source} names [{path}], which does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else "not UTF-8 text"
        raise SecretKeyError(f"{source}: cannot read [{path}]: {reason}") from None


def _sqlite_key(path: Path) -> str:
    """The key beside a SQLite database: read it, or create it (0600, all or nothing)."""
    if path.exists():
        return _read_key_file(path, "key file")
    key = secrets.token_urlsafe(48)  # 64 URL-safe characters
    try:
        _publish(path, key)
    except FileExistsError:
        pass  # another process created it first: use theirs
    except OSError as e:
        raise SecretKeyError(f"cannot create key file [{path}]: {e.strerror or e}") from None
    return _read_key_file(path, "key file")


def _publish(path: Path, key: str) -> None:
    """Create ``path`` holding ``key``, never world-readable, never seen half-written.

    The key goes to a private temp file first, which is then hard-linked into place (``link``
    fails if the name exists, so concurrent first starts agree on one key). Where hard links are
    not supported, fall back to creating the file itself with ``O_EXCL``.
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    _write_new(tmp, key)
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError:
        _write_new(path, key)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _write_new(path: Path, text: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, (text + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)


# --- masking ---------------------------------------------------------------------------------


class Masker:
    """Hides secret values in text and in JSON-like data (see the module notes)."""

    __slots__ = ("_pattern", "_scalars")

    def __init__(self, values: Iterable[Any]) -> None:
        forms: set[str] = set()
        for value in values:
            _forms(value, forms)
        ordered = sorted((f for f in forms if len(f) >= MIN_MASK_CHARS), key=lambda f: (-len(f), f))
        self._scalars = frozenset(ordered)
        self._pattern = (
            re.compile("(?=(" + "|".join(re.escape(f) for f in ordered) + "))") if ordered else None
        )

    def __repr__(self) -> str:
        return f"Masker(<{len(self._scalars)} forms hidden>)"

    def __bool__(self) -> bool:
        return self._pattern is not None

    def mask(self, text: str) -> str:
        """``text`` with every occurrence of a secret replaced by ``***``."""
        if self._pattern is None or not text:
            return text
        spans: list[list[int]] = []
        for m in self._pattern.finditer(text):
            start, end = m.start(1), m.end(1)
            if spans and start <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        if not spans:
            return text
        out: list[str] = []
        last = 0
        for start, end in spans:
            out.append(text[last:start])
            out.append(MASK)
            last = end
        out.append(text[last:])
        return "".join(out)

    def mask_data(self, obj: Any) -> Any:
        """``obj`` with secrets masked in every string (keys included) of its dicts and lists.

        A number equal to a secret number becomes ``"***"``. Tuples come back as lists.
        """
        if self._pattern is None:
            return obj
        if isinstance(obj, str):
            return self.mask(obj)
        if isinstance(obj, Mapping):
            return {
                (self.mask(k) if isinstance(k, str) else k): self.mask_data(v)
                for k, v in obj.items()
            }
        if isinstance(obj, (list, tuple)):
            return [self.mask_data(v) for v in obj]
        if isinstance(obj, (int, float)) and not isinstance(obj, bool):
            return MASK if _number_text(obj) in self._scalars else obj
        return obj


def _number_text(value: int | float) -> str:
    return json.dumps(value)


def _forms(value: Any, out: set[str]) -> None:
    """Every text form of ``value`` that may show up in output."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        out.add(value)
        for ascii_ in (False, True):
            out.add(json.dumps(value, ensure_ascii=ascii_)[1:-1])  # as inside a JSON string
        return
    if isinstance(value, (int, float)):
        out.add(str(value))
        with contextlib.suppress(ValueError):
            out.add(_number_text(value))
        return
    if isinstance(value, Mapping):
        leaves: Iterable[Any] = value.values()
    elif isinstance(value, (list, tuple, set, frozenset)):
        leaves = value
    else:
        out.add(str(value))
        return
    out.add(str(value))
    with contextlib.suppress(TypeError, ValueError):
        out.add(json.dumps(value))
        out.add(json.dumps(value, ensure_ascii=False))
        out.add(json.dumps(value, separators=(",", ":")))
        out.add(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    for leaf in leaves:
        _forms(leaf, out)
