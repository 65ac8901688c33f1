"""Var encryption, the secret key's sources, and masking."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from procflow.errors import ProcflowError, SecretKeyError, VarValueError
from procflow.runtime.data.secrets import Masker, VarCipher, check_secret_key, load_cipher

SECRET = "correct horse battery staple, 32+ chars"
OTHER = "another secret key that is long enough!!"
POSTGRES_MESSAGE = (
    "PostgreSQL needs a shared secret key: set PROCFLOW_SECRET_KEY (at least 32 characters) "
    "or PROCFLOW_SECRET_KEY_FILE on every worker"
)


# --- encryption ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["hunter2-password", "", "päßwörd ✓", 42, 1.5, True, None, [1, "a"], {"user": "u", "pw": "p"}],
)
def test_round_trip(value: Any) -> None:
    cipher = VarCipher.from_secret(SECRET)
    blob = cipher.encrypt("run-1", "dbPassword", value)
    assert isinstance(blob, bytes)
    assert cipher.decrypt("run-1", "dbPassword", blob) == value
    # a second cipher from the same secret (another worker) opens it too
    assert VarCipher.from_secret(SECRET).decrypt("run-1", "dbPassword", blob) == value


def test_nonce_is_random() -> None:
    cipher = VarCipher.from_secret(SECRET)
    assert cipher.encrypt("r", "v", "same") != cipher.encrypt("r", "v", "same")


def test_ciphertext_does_not_contain_the_plaintext() -> None:
    plain = "super-secret-plaintext-value"
    blob = VarCipher.from_secret(SECRET).encrypt("run-1", "v", plain)
    assert plain.encode() not in blob
    assert plain[:8].encode() not in blob
    assert json.dumps(plain).encode() not in blob


@pytest.mark.parametrize(("run_id", "name"), [("run-2", "dbPassword"), ("run-1", "other")])
def test_ciphertext_is_bound_to_run_and_var(run_id: str, name: str) -> None:
    cipher = VarCipher.from_secret(SECRET)
    blob = cipher.encrypt("run-1", "dbPassword", "pw-value-1234")
    with pytest.raises(SecretKeyError) as info:
        cipher.decrypt(run_id, name, blob)
    assert str(info.value).startswith(
        f"cannot decrypt var [{name}] of run [{run_id}]: wrong PROCFLOW_SECRET_KEY?"
    )
    assert "pw-value-1234" not in str(info.value)


def test_wrong_key_fails_cleanly() -> None:
    blob = VarCipher.from_secret(SECRET).encrypt("run-1", "v", "pw-value-1234")
    with pytest.raises(SecretKeyError, match=r"^cannot decrypt var \[v\] of run \[run-1\]: wrong "):
        VarCipher.from_secret(OTHER).decrypt("run-1", "v", blob)


@pytest.mark.parametrize("blob", [b"", b"\x01short", b"\x02" + bytes(40)])
def test_garbage_blob(blob: bytes) -> None:
    with pytest.raises(SecretKeyError, match="the stored value is not a sealed var"):
        VarCipher.from_secret(SECRET).decrypt("r", "v", blob)


def test_tampered_blob() -> None:
    cipher = VarCipher.from_secret(SECRET)
    blob = bytearray(cipher.encrypt("r", "v", "value"))
    blob[-1] ^= 1
    with pytest.raises(SecretKeyError, match="wrong PROCFLOW_SECRET_KEY"):
        cipher.decrypt("r", "v", bytes(blob))


@pytest.mark.parametrize("value", [{1, 2}, object(), float("nan")])
def test_non_json_value_is_refused_without_showing_it(value: Any) -> None:
    with pytest.raises(VarValueError, match=r"^var \[v\] of run \[r\] cannot be stored") as info:
        VarCipher.from_secret(SECRET).encrypt("r", "v", value)
    assert "nan" not in str(info.value)
    assert isinstance(info.value, ProcflowError)


@pytest.mark.parametrize("secret", ["", "short", "x" * 31, "   " + "y" * 31 + "  "])
def test_short_secret_refused(secret: str) -> None:
    with pytest.raises(SecretKeyError, match=r"it must be at least 32$") as info:
        VarCipher.from_secret(secret)
    assert "y" * 31 not in str(info.value)


def test_surrounding_blanks_ignored() -> None:
    blob = VarCipher.from_secret(SECRET).encrypt("r", "v", 1)
    assert VarCipher.from_secret(f"  {SECRET}\n").decrypt("r", "v", blob) == 1


def test_repr_hides_key() -> None:
    assert repr(VarCipher.from_secret(SECRET)) == "VarCipher(<key hidden>)"


# --- the key ---------------------------------------------------------------------------------


def sealed(cipher: VarCipher) -> bytes:
    return cipher.encrypt("r", "v", "probe")


def opens(cipher: VarCipher, blob: bytes) -> bool:
    try:
        return bool(cipher.decrypt("r", "v", blob) == "probe")
    except SecretKeyError:
        return False


def test_env_key_wins(tmp_path: Path) -> None:
    key_file = tmp_path / "k"
    key_file.write_text(OTHER)
    env = {"PROCFLOW_SECRET_KEY": SECRET, "PROCFLOW_SECRET_KEY_FILE": str(key_file)}
    cipher = load_cipher(f"sqlite:///{tmp_path}/db.sqlite", env)
    assert opens(cipher, sealed(VarCipher.from_secret(SECRET)))
    assert not (tmp_path / "db.sqlite.key").exists()


def test_env_key_too_short() -> None:
    with pytest.raises(SecretKeyError) as info:
        load_cipher("postgresql://h/db", {"PROCFLOW_SECRET_KEY": "abc"})
    assert str(info.value) == (
        "PROCFLOW_SECRET_KEY: the secret key is 3 characters long; it must be at least 32"
    )


def test_key_file_env_var(tmp_path: Path) -> None:
    key_file = tmp_path / "key.txt"
    key_file.write_text(SECRET + "\n")
    cipher = load_cipher("postgresql://h/db", {"PROCFLOW_SECRET_KEY_FILE": str(key_file)})
    assert opens(cipher, sealed(VarCipher.from_secret(SECRET)))


def test_empty_env_key_counts_as_unset(tmp_path: Path) -> None:
    key_file = tmp_path / "key.txt"
    key_file.write_text(SECRET)
    env = {"PROCFLOW_SECRET_KEY": "", "PROCFLOW_SECRET_KEY_FILE": str(key_file)}
    assert opens(load_cipher("postgresql://h/db", env), sealed(VarCipher.from_secret(SECRET)))


def test_key_file_env_var_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.key"
    with pytest.raises(SecretKeyError) as info:
        load_cipher("postgresql://h/db", {"PROCFLOW_SECRET_KEY_FILE": str(missing)})
    assert str(info.value) == f"PROCFLOW_SECRET_KEY_FILE names [{missing}], which does not exist"


def test_key_file_env_var_short_key(tmp_path: Path) -> None:
    key_file = tmp_path / "key.txt"
    key_file.write_text("tiny\n")
    with pytest.raises(SecretKeyError) as info:
        load_cipher("postgresql://h/db", {"PROCFLOW_SECRET_KEY_FILE": str(key_file)})
    assert str(info.value) == (
        f"PROCFLOW_SECRET_KEY_FILE [{key_file}]: the secret key is 4 characters long; "
        "it must be at least 32"
    )


@pytest.mark.parametrize(
    "url", ["postgresql://u@h/db", "postgres://h/db", "postgresql+psycopg://h/db", "mysql://h/db"]
)
def test_postgres_without_key_refused(url: str) -> None:
    with pytest.raises(SecretKeyError) as info:
        load_cipher(url, {})
    assert str(info.value) == POSTGRES_MESSAGE


def test_sqlite_key_file_created_0600_and_reused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/procflow.db"
    first = load_cipher(url, {})
    key_path = tmp_path / "procflow.db.key"
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    content = key_path.read_text()
    assert len(content.strip()) == 64
    assert content.strip().replace("-", "").replace("_", "").isalnum()
    blob = sealed(first)
    assert opens(load_cipher(url, {}), blob)  # reused, not replaced
    assert key_path.read_text() == content
    assert opens(VarCipher.from_secret(content), blob)  # the file holds the secret itself
    assert sorted(p.name for p in tmp_path.iterdir()) == ["procflow.db.key"]  # no temp left


def test_sqlite_key_file_not_world_readable_under_lax_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        load_cipher(f"sqlite:///{tmp_path}/a.db", {})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.db.key").stat().st_mode) == 0o600


def test_sqlite_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    load_cipher("sqlite:///./procflow.db", {})
    assert (tmp_path / "procflow.db.key").exists()


def test_sqlite_existing_short_key_file(tmp_path: Path) -> None:
    (tmp_path / "db.key").write_text("short")
    with pytest.raises(SecretKeyError, match=r"^key file \[.*db\.key\]: the secret key is 5 "):
        load_cipher(f"sqlite:///{tmp_path}/db", {})


def test_sqlite_key_file_in_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(SecretKeyError, match=r"^cannot create key file \[.*nodir/db\.key\]"):
        load_cipher(f"sqlite:///{tmp_path}/nodir/db", {})


def test_concurrent_first_starts_agree(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/db"
    ciphers: list[VarCipher] = []
    threads = [
        threading.Thread(target=lambda: ciphers.append(load_cipher(url, {}))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    blob = sealed(ciphers[0])
    assert len(ciphers) == 8
    assert all(opens(c, blob) for c in ciphers)


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file::memory:?cache=shared"]
)
def test_in_memory_sqlite_gets_ephemeral_key(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    a, b = load_cipher(url, {}), load_cipher(url, {})
    blob = sealed(a)
    assert opens(a, blob)
    assert not opens(b, blob)
    assert list(tmp_path.iterdir()) == []


# --- masking ---------------------------------------------------------------------------------


MASK_CASES: list[tuple[list[Any], str, str]] = [
    (["hunter2pw"], "login with hunter2pw now", "login with *** now"),
    (["hunter2pw"], "hunter2pwhunter2pw", "***"),
    (["abcd", "abcdefgh"], "x abcdefgh y abcd z", "x *** y *** z"),
    (["abcdef", "defghi"], "--abcdefghi--", "--***--"),
    (["abcd", "efgh"], "abcdefgh", "***"),
    (["abc", "", None, True, "xy"], "abc xy true null", "abc xy true null"),
    ([123456], "code 123456 sent", "code *** sent"),
    ([1.5, 12], "amount 1.5 of 12", "amount 1.5 of 12"),
    ([1234.5], "amount 1234.5", "amount ***"),
    (['pa"ss\\word'], 'json {"pw": "pa\\"ss\\\\word"}', 'json {"pw": "***"}'),
    (["pässwörd"], 'raw pässwörd ascii "p\\u00e4ssw\\u00f6rd"', 'raw *** ascii "***"'),
    ([{"user": "admin", "pw": "s3cr3t-value"}], "pw=s3cr3t-value", "pw=***"),
    ([["token-aaaa", 99999]], "t=token-aaaa n=99999", "t=*** n=***"),
    ([{"pw": "s3cr3t-value"}], 'dump {"pw": "s3cr3t-value"}', "dump ***"),
    (["a.b*c"], "x a.b*c aXbbc", "x *** aXbbc"),
    (["secret"], "", ""),
    ([], "nothing secret", "nothing secret"),
]


@pytest.mark.parametrize(("values", "text", "masked"), MASK_CASES)
def test_mask(values: list[Any], text: str, masked: str) -> None:
    assert Masker(values).mask(text) == masked


def test_mask_data_nested() -> None:
    masker = Masker(["tok-secret", 987654])
    data = {
        "a": "Bearer tok-secret",
        "b": [1, 987654, "x", ("tok-secret", None)],
        "c": {"tok-secret": {"d": True, "e": 2.5}},
    }
    assert masker.mask_data(data) == {
        "a": "Bearer ***",
        "b": [1, "***", "x", ["***", None]],
        "c": {"***": {"d": True, "e": 2.5}},
    }
    assert data["a"] == "Bearer tok-secret"  # not modified in place


def test_masker_without_values_passes_through() -> None:
    masker = Masker([])
    data = {"a": 1}
    assert not masker
    assert masker.mask_data(data) is data
    assert bool(Masker(["long-enough"]))


def test_masker_repr_hides_values() -> None:
    assert "hunter2pw" not in repr(Masker(["hunter2pw"]))


@pytest.mark.parametrize(
    "env",
    [{}, {"PROCFLOW_SECRET_KEY": "abc"}, {"PROCFLOW_SECRET_KEY_FILE": "/nonexistent/procflow.key"}],
    ids=["none", "too-short", "missing-file"],
)
def test_the_start_up_check_refuses_what_loading_the_key_refuses(env: dict[str, str]) -> None:
    with pytest.raises(SecretKeyError) as loading:
        load_cipher("postgresql://h/db", env)
    with pytest.raises(SecretKeyError) as checking:
        check_secret_key("postgresql://h/db", env)
    assert str(checking.value) == str(loading.value)


def test_the_start_up_check_passes_a_good_key_without_loading_cryptography() -> None:
    """Every command on PostgreSQL checks the key; only one that seals or opens a var derives it."""
    code = (
        "import sys\n"
        "from procflow.runtime.data.secrets import check_secret_key\n"
        f"check_secret_key('postgresql://h/db', {{'PROCFLOW_SECRET_KEY': {SECRET!r}}})\n"
        "print(sorted(m for m in sys.modules if m.startswith('cryptography')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
