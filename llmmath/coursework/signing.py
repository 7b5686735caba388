"""The teacher's key: each handed-out sheet's identity is signed with an HMAC.

`hand_out` writes into a sheet's metadata (``"llmmath_coursework"``) its chapter,
student, number of questions, bank version and language (when not English), and
``"signature"``: HMAC-SHA256 of those
fields under a key that only the teacher has. The grader recomputes it, so a student who
edits the ID, the chapter or the question count, or removes the metadata, hands in a
sheet that fails as tampered.

The key is 32 random bytes written as hex to a file outside the handed-out folder: by
default ``$LLMMATH_COURSEWORK_KEY`` or ``~/.config/llmmath/coursework.key``, created
(mode 600) the first time sheets are handed out. Grade with the key you handed out with;
keep it private."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from pathlib import Path

SIGNED_FIELDS = ("chapter", "student", "questions", "bank_version")
#: Fields signed when a sheet has them: ``"lang"``, a sheet's language other than
#: English (`llmmath.coursework.handout`). An English sheet has none, so its signature
#: is what it was before sheets had languages; adding, removing or changing it breaks
#: the signature.
OPTIONAL_SIGNED_FIELDS = ("lang",)


class KeyFileError(ValueError):
    """A missing or unusable key file; the message names the file."""


def default_key_path() -> Path:
    """``$LLMMATH_COURSEWORK_KEY``, else ``~/.config/llmmath/coursework.key``."""
    env = os.environ.get("LLMMATH_COURSEWORK_KEY")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".config" / "llmmath" / "coursework.key"


def load_key(path: str | os.PathLike | None = None, *, create: bool = False) -> bytes:
    """The key in ``path`` (default `default_key_path`), made first if ``create``.

    Raises:
        KeyFileError: no such file (and not ``create``), or not 64 hex digits.
    """
    path = Path(path) if path is not None else default_key_path()
    if not path.exists():
        if not create:
            raise KeyFileError(
                f"key file {path} does not exist: grade with the key the sheets were "
                "handed out with (--key KEYFILE)"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise KeyFileError(f"key file {path}: cannot read it ({e})") from None
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        raise KeyFileError(f"key file {path}: must hold 64 hexadecimal digits")
    return bytes.fromhex(text)


def signature(fields: dict, key: bytes) -> str:
    """HMAC-SHA256 (hex) of the `SIGNED_FIELDS` of ``fields``, and of those of
    `OPTIONAL_SIGNED_FIELDS` it has, under ``key``."""
    signed = {k: fields.get(k) for k in SIGNED_FIELDS}
    signed |= {k: fields[k] for k in OPTIONAL_SIGNED_FIELDS if k in fields}
    message = json.dumps(signed, sort_keys=True, ensure_ascii=True)
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def is_signed(fields: object, key: bytes) -> bool:
    """Whether ``fields`` (a sheet's metadata) carries its right ``"signature"``."""
    if not isinstance(fields, dict) or not isinstance(fields.get("signature"), str):
        return False
    try:
        expected = signature(fields, key)
    except (TypeError, ValueError):
        return False
    return hmac.compare_digest(expected, fields["signature"])
