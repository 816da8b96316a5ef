"""Typed readers for settings that come from the environment.

Every reader fails start-up with ImproperlyConfigured naming the variable, so a
typo in a deployment is found at boot instead of becoming a silent default.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
)
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# The periods the throttles understand (memory_project/api/throttles.py reads only the
# first letter, as the REST framework does).
_RATE = re.compile(r"([1-9][0-9]*)/(s|sec|second|m|min|minute|h|hour|d|day)")
# HS256 and the ciphers want 256-bit keys; fewer characters than this is a mistake.
_SECRET_MIN_LENGTH = 32


def env_str(name: str, default: str, environ: Mapping[str, str] = os.environ) -> str:
    value = environ.get(name, "")
    return value if value.strip() else default


def env_bool(name: str, default: bool, environ: Mapping[str, str] = os.environ) -> bool:
    raw = environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name} must be one of 1/0, true/false, yes/no, on/off; got {raw!r}"
    )


def env_int(
    name: str,
    default: int,
    *,
    minimum: int,
    maximum: int | None = None,
    environ: Mapping[str, str] = os.environ,
) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number; got {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f" and at most {maximum}"
        raise ImproperlyConfigured(f"{name} must be at least {minimum}{upper}; got {value}")
    return value


def env_list(name: str, default: list[str], environ: Mapping[str, str] = os.environ) -> list[str]:
    raw = environ.get(name, "")
    if not raw.strip():
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_origins(
    name: str, default: list[str], environ: Mapping[str, str] = os.environ
) -> list[str]:
    """Read a list of origins, each exactly scheme://host[:port] with no path."""
    origins = [origin.lower() for origin in env_list(name, default, environ)]
    for origin in origins:
        scheme, sep, rest = origin.partition("://")
        if scheme not in {"http", "https"} or not sep or not rest or "/" in rest:
            raise ImproperlyConfigured(
                f"{name} entries must look like https://host[:port] with no path; got {origin!r}"
            )
    return origins


def base_url_problem(value: str) -> str | None:
    """Why `value` is not a service's base URL (http or https, a host, an optional port and
    path; no credentials, query or fragment), or None."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a malformed port raises only when read)
    except ValueError:
        return "not a URL"
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        return "it must look like https://host[:port][/path]"
    if parts.username is not None or parts.password is not None:
        return "credentials do not belong in the URL"
    if parts.query or parts.fragment:
        return "it must have no query or fragment"
    return None


def env_base_url(name: str, environ: Mapping[str, str] = os.environ) -> str:
    """Read an optional base URL ("" when unset), refusing a malformed one by name. The
    value itself is not echoed: a URL may carry what its owner did not mean to show."""
    value = env_str(name, "", environ).strip()
    if value and (problem := base_url_problem(value)):
        raise ImproperlyConfigured(f"{name} is not a base URL: {problem}")
    return value.rstrip("/")


# The brokers Celery reaches with what requirements.txt installs, and the Redis cache's URLs.
BROKER_SCHEMES = {"amqp", "amqps", "pyamqp", "redis", "rediss"}
REDIS_SCHEMES = {"redis", "rediss", "unix"}


def service_url_problem(value: str, schemes: set[str]) -> str | None:
    """Why `value` is not the URL of a broker or cache with one of `schemes`, or None. The
    clients find out only at their first use, in a request or a task. The value is not
    echoed, as it may carry a password."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a malformed port raises only when read)
    except ValueError:
        return "not a URL (is its port a number?)"
    if parts.scheme not in schemes:
        return f"its scheme must be one of {sorted(schemes)}"
    # A host left out is the client's localhost; a socket path cannot be.
    if parts.scheme == "unix" and not parts.path:
        return "it names no socket path"
    return None


def env_directory(name: str, default: Path, environ: Mapping[str, str] = os.environ) -> Path:
    """Read a directory the service writes to, creating it, and refuse one it cannot write."""
    path = Path(env_str(name, str(default), environ)).resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ImproperlyConfigured(
            f"{name} ({path}) cannot be made a directory: {error.strerror}"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ImproperlyConfigured(f"{name} ({path}) is not writable by this process")
    return path


def env_choice(
    name: str, default: str, choices: set[str], environ: Mapping[str, str] = os.environ
) -> str:
    value = env_str(name, default, environ)
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {sorted(choices)}; got {value!r}")
    return value


def env_rate(name: str, default: str, environ: Mapping[str, str] = os.environ) -> str:
    """Read a request rate such as `300/min`, which the throttles would otherwise only
    parse on the first request."""
    value = env_str(name, default, environ).strip()
    if _RATE.fullmatch(value) is None:
        raise ImproperlyConfigured(
            f"{name} must be a count of at least 1 per s, min, h or day, like 300/min; "
            f"got {value!r}"
        )
    return value


def env_signing_key(name: str, default: str, environ: Mapping[str, str] = os.environ) -> str:
    """Read a signing key given in the environment, else `default` (derived by the caller)."""
    value = environ.get(name, "").strip()
    return _long_enough(name, value) if value else default


def env_secret(name: str, fallback_file: Path, environ: Mapping[str, str] = os.environ) -> str:
    """Read a secret from the environment, else from a generated file kept beside the data.

    The file fallback gives the embedded default a stable key across restarts (a key
    that changed on every start would make stored ciphertext unreadable). Production
    deployments set the variable; the file is created with mode 0600 and never logged.
    """
    value = environ.get(name, "").strip()
    if value:
        return _long_enough(name, value)
    if not fallback_file.exists():
        _create_secret_file(fallback_file)
    value = fallback_file.read_text().strip()
    if len(value) < _SECRET_MIN_LENGTH:
        # A file cut short (a full disk, a bad copy) would otherwise sign with whatever it
        # holds, even nothing. It is not replaced: data sealed under it would be lost.
        raise ImproperlyConfigured(
            f"{fallback_file}, which holds {name} when the variable is unset, has fewer than "
            f"{_SECRET_MIN_LENGTH} characters; restore it from a backup or set {name}"
        )
    return value


def env_ed25519_key(name: str, fallback_file: Path, environ: Mapping[str, str] = os.environ) -> str:
    """Read an Ed25519 private key from the environment, else from a generated file kept
    beside the data, and return its 32-byte seed in base64.

    The variable holds the seed in base64 or a PKCS#8 PEM; the file holds the seed in
    base64 and, like `env_secret`'s, is created once with mode 0600, so the embedded
    default signs with one stable key across restarts.
    """
    value = environ.get(name, "").strip()
    source = name
    if not value:
        if not fallback_file.exists():
            seed = base64.b64encode(secrets.token_bytes(32)).decode()
            private_file_write(fallback_file, seed, replace=False)
        value = fallback_file.read_text().strip()
        source = str(fallback_file)
    seed_bytes = _ed25519_seed(value)
    if seed_bytes is None:
        raise ImproperlyConfigured(
            f"{source} must hold an Ed25519 private key: its 32-byte seed in base64, or a "
            "PKCS#8 PEM"
        )
    return base64.b64encode(seed_bytes).decode()


def _ed25519_seed(value: str) -> bytes | None:
    if value.startswith("-----BEGIN"):
        try:
            key = load_pem_private_key(value.encode(), password=None)
        except (ValueError, TypeError):
            return None
        if not isinstance(key, Ed25519PrivateKey):
            return None
        return key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    try:
        seed = base64.b64decode(value, validate=True)
    except binascii.Error:
        return None
    return seed if len(seed) == 32 else None


def _long_enough(name: str, value: str) -> str:
    if len(value) < _SECRET_MIN_LENGTH:
        raise ImproperlyConfigured(f"{name} must be at least {_SECRET_MIN_LENGTH} characters long")
    return value


def _create_secret_file(path: Path) -> None:
    # An existing file wins, so two processes starting at once (test workers, gunicorn)
    # agree on one secret.
    private_file_write(path, secrets.token_urlsafe(48), replace=False)


def private_file_write(path: Path, text: str, *, replace: bool = True) -> None:
    """Write `text` to `path`, readable only by its owner (mode 0600 from the start).

    It is written to a private temporary name first and then moved (or, with `replace`
    False, hard-linked) into place, so no reader ever sees half a file. Without `replace`
    a file already at `path` is kept.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    try:
        if replace:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
    except FileExistsError:
        pass
    finally:
        temporary.unlink(missing_ok=True)
