"""Secrets a tool or MCP server declares by name, looked up by the worker when a call needs them, and
the redaction that keeps their values out of everything recorded.

``SecretVault`` reads a value from the worker's configured sources (``SecretsConfig``: its
environment, a file, a secret-manager hook) at call time. Every value a vault of this process has
read is remembered (``remember``), process-wide: ``redact_secrets`` replaces each of them, in every
form a tool's output may carry it (as it is, JSON-escaped, URL-encoded, base64), by
``[secret:NAME]`` (whole values only; an output cut to a window is redacted before the cut,
``redacted_window``) before a result, an error or a failure message is stored or crosses Temporal.
That holds for every tool's output, not only the declaring one's: a ``shell.run`` that reads the
worker's ``/proc/PID/environ`` under ``danger_full_access`` gets the same markers. Values shorter than
``MIN_SECRET_VALUE_CHARS`` are refused: their redaction would tell a model which string is the secret.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import importlib
import inspect
import json
import os
import re
import stat
import threading
import tomllib
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from agentrt.schemas import (
    MIN_SECRET_VALUE_CHARS,
    SECRET_NAME,
    ConfigurationError,
    SecretNotFound,
    SecretSourceFailed,
    SecretsConfig,
    SecretsMissing,
    ToolError,
    secret_marker,
)

__all__ = [
    "REDACTION_MARGIN",
    "SecretValues",
    "SecretVault",
    "forget_secrets",
    "redact_secrets",
    "redacted_window",
    "remember_secret",
]

# Hook lookups past their time bound whose threads may still run before a vault refuses new ones.
HOOK_THREADS = 4
# What an output cut to a window keeps beyond each cut edge, for ``redacted_window`` to see whole a
# value that crosses the edge (characters or bytes): more than the longest form of a value.
REDACTION_MARGIN = 64 * 1024
# The most values a process remembers for redaction.
MAX_REMEMBERED = 4096
# The longest value a vault hands out (characters): its every form fits in ``REDACTION_MARGIN``.
MAX_SECRET_VALUE_CHARS = 4096
# The largest secrets file (or file of a secrets directory) read (bytes).
MAX_SECRETS_FILE_BYTES = 1024 * 1024

_known: dict[str, str] = {}  # value -> name: every value a vault of this process has read
_forms: dict[str, str] = {}  # each form of a known value -> its name, longest first when redacting
_known_lock = threading.Lock()


def _value_forms(value: str) -> set[str]:
    """``value`` as a tool's output may carry it: as it is, JSON-escaped (ASCII or not, ``/`` as
    ``\\/``, ``<>&`` as ``\\u003c``...), URL-encoded (``%20`` or ``+``) and base64 (standard and URL-safe)."""
    escaped = json.dumps(value)[1:-1]
    html = escaped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    raw = value.encode("utf-8", errors="surrogatepass")
    forms = {
        value, escaped, json.dumps(value, ensure_ascii=False)[1:-1], escaped.replace("/", "\\/"), html,
        urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value),
        base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode(),
        base64.b64encode(raw).decode().rstrip("="),
    }
    return {form for form in forms if len(form) >= MIN_SECRET_VALUE_CHARS}


def remember_secret(name: str, value: str) -> None:
    """Add ``value`` (of secret ``name``) to what ``redact_secrets`` replaces in this process; past
    ``MAX_REMEMBERED`` values (a hook that mints a token per call), the least recently read goes."""
    if len(value) < MIN_SECRET_VALUE_CHARS:
        return
    with _known_lock:
        if _known.get(value) == name:
            _known[value] = _known.pop(value)  # most recently read last
            return
        _known[value] = name
        for form in _value_forms(value):
            _forms.setdefault(form, name)
        if len(_known) > MAX_REMEMBERED:
            del _known[next(iter(_known))]
            _forms.clear()
            for known, known_name in _known.items():
                for form in _value_forms(known):
                    _forms.setdefault(form, known_name)


def forget_secrets() -> None:
    """Forget every remembered value (for tests that start over)."""
    with _known_lock:
        _known.clear()
        _forms.clear()


def redact_secrets(text: str) -> str:
    """``text`` with every form of every value this process's vaults have read replaced by
    ``[secret:NAME]``, longest first. Only whole values are replaced: replacing a part (the start of
    a value where an output ends) would let a model learn a value one character at a time. Where
    an output is cut, cut it after redacting (``redacted_window``)."""
    with _known_lock:
        forms = sorted(_forms.items(), key=lambda item: len(item[0]), reverse=True)
    if not forms or not text:
        return text
    for form, name in forms:
        if form in text:
            text = text.replace(form, secret_marker(name))
    return text


def redacted_window(text: str, start: int, end: int) -> str:
    """``text[start:end]`` (characters) redacted, where a value that overlaps the window's edge
    is replaced whole by its marker: an output cut to a window keeps no part of a value (give
    ``text`` ``REDACTION_MARGIN`` characters beyond each edge that is a cut)."""
    with _known_lock:
        names = dict(_forms)
    if not names:
        return text[start:end]
    pattern = re.compile("|".join(re.escape(form) for form in sorted(names, key=len, reverse=True)))
    out: list[str] = []
    pos = start
    for match in pattern.finditer(text):
        if match.end() <= start:
            continue
        if match.start() >= end:
            break
        out.append(text[pos:match.start()] if match.start() > pos else "")
        out.append(secret_marker(names[match.group()]))
        pos = max(pos, match.end())
    out.append(text[pos:end] if pos < end else "")
    return "".join(out)


class SecretValues(Mapping[str, str]):
    """The secrets one call may read, by name (``ToolContext.secrets``): only those its tool
    declared. Reading another name raises ``ToolError``; its ``repr`` shows names, never values."""

    def __init__(self, values: Mapping[str, str] | None = None, owner: str = "") -> None:
        self._values = dict(values or {})
        self._owner = owner

    def __getitem__(self, name: str) -> str:
        try:
            return self._values[name]
        except KeyError:
            raise ToolError(
                f"secret {name!r} is not declared by {self._owner or 'this tool'}; declare it: @tool(secrets=[{name!r}])"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        """The value of ``name``, or ``default`` when the tool did not declare it."""
        return self._values.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"SecretValues({sorted(self._values)})"


def _checked_file(path: Path, what: str) -> os.stat_result:
    """``path``'s ``lstat``, refused (``ConfigurationError``) when it is a symbolic link, not of this
    user, readable or writable by every user, or writable by its group (as the codec's keys file)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise ConfigurationError(f"secrets {what} {path} does not exist") from None
    except OSError as err:
        raise ConfigurationError(f"secrets {what} {path} cannot be read: {err.strerror or err}") from None
    if stat.S_ISLNK(info.st_mode):
        raise ConfigurationError(f"secrets {what} {path} is a symbolic link; give the file itself")
    if os.name == "posix":
        mode = stat.filemode(info.st_mode)
        if info.st_uid != os.geteuid():
            raise ConfigurationError(f"secrets {what} {path} belongs to another user (uid {info.st_uid})")
        if info.st_mode & (stat.S_IROTH | stat.S_IWOTH):
            raise ConfigurationError(f"secrets {what} {path} is readable or writable by every user (mode {mode}); `chmod 600 {path}`")
        if info.st_mode & stat.S_IWGRP:
            raise ConfigurationError(f"secrets {what} {path} is writable by its group (mode {mode}); `chmod 600 {path}`")
    return info


def _read_text(path: Path, what: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigurationError(f"secrets {what} {path} is not a regular file")
        data = os.read(fd, MAX_SECRETS_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_SECRETS_FILE_BYTES:
        raise ConfigurationError(f"secrets {what} {path} is larger than {MAX_SECRETS_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigurationError(f"secrets {what} {path} is not UTF-8 text (byte {err.start})") from None


def read_secrets_path(path: Path) -> dict[str, str]:
    """Every secret of ``path``: a directory holds one file per secret (named as the secret; its
    text, one trailing newline dropped), any other path is a TOML file of ``NAME = "value"``.
    Raises ``ConfigurationError`` for a path another user may read or any user but its owner may
    write (``chmod 600``, ``700`` for a directory), a symbolic link, a file that is not UTF-8 or a
    TOML value that is not a string."""
    info = _checked_file(path, "directory" if path.is_dir() else "file")
    if stat.S_ISDIR(info.st_mode):
        found: dict[str, str] = {}
        for entry in sorted(path.iterdir()):
            if SECRET_NAME.fullmatch(entry.name):
                _checked_file(entry, "file")
                text = _read_text(entry, "file")
                found[entry.name] = text[:-1] if text.endswith("\n") else text
        return found
    try:
        data = tomllib.loads(_read_text(path, "file"))
    except tomllib.TOMLDecodeError as err:
        raise ConfigurationError(f"secrets file {path}: invalid TOML: {err}") from None
    bad = sorted(name for name, value in data.items() if not isinstance(value, str))
    if bad:
        raise ConfigurationError(f"secrets file {path}: {', '.join(bad)} must be strings (NAME = \"value\")")
    return dict(data)


def load_hook(spec: str) -> Callable[[str], Any]:
    """The callable ``module:function`` names; ``ConfigurationError`` when it cannot be imported."""
    module_name, _, attribute = spec.partition(":")
    try:
        hook = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as err:
        raise ConfigurationError(f"[secrets] hook {spec!r} cannot be loaded: {err}") from err
    if not callable(hook):
        raise ConfigurationError(f"[secrets] hook {spec!r} is not callable")
    return hook


class SecretVault:
    """Looks up secrets by name in ``config``'s sources, in order, at each call (nothing is cached
    but what redaction needs); ``env``: the environment source (default ``os.environ``, read live).
    A hook is loaded on first use and each lookup runs on a thread of its own, waited for at most
    ``config.timeout_seconds``."""

    def __init__(self, config: SecretsConfig | None = None, env: Mapping[str, str] | None = None) -> None:
        self.config = config or SecretsConfig()
        self._env = os.environ if env is None else env
        self._hook: Callable[[str], Any] | None = None
        self._stuck: list[threading.Thread] = []  # hook lookups past their time bound, still running
        self._lock = threading.Lock()

    @property
    def sources(self) -> list[str]:
        """The sources, as error messages name them (``env``, ``file <path>``, ``hook <module:function>``)."""
        named = {"env": "env", "file": f"file {self.config.path}", "hook": f"hook {self.config.hook}"}
        return [named[source] for source in self.config.sources]

    def resolve(self, names: Iterable[str], owner: str) -> SecretValues:
        """The values of ``names`` for a call of ``owner`` (a tool's name, ``mcp:<server>``), each
        remembered for redaction. Raises ``SecretNotFound`` (no source has one) or
        ``SecretSourceFailed`` (a source failed, or the value is too short)."""
        values: dict[str, str] = {}
        for name in names:
            value = self._lookup(name, owner)
            if value is None:
                raise SecretNotFound(name, owner, self.sources)
            values[name] = value
        return SecretValues(values, owner)

    def missing(self, declared: Mapping[str, list[str]]) -> None:
        """Check, at worker start, that a source has each of ``declared`` (name -> who declares it),
        remembering the values (so that even a tool that reads one before any declaring call is
        redacted), and every value of a secrets file. Raises ``SecretsMissing`` naming those none
        has, ``ConfigurationError`` when a source fails."""
        if "file" in self.config.sources and self.config.path:
            try:
                found = read_secrets_path(Path(self.config.path))
            except OSError as err:
                raise ConfigurationError(f"secrets path {self.config.path} cannot be read: {err.strerror or err}") from None
            for name, value in found.items():
                remember_secret(name, value)
        absent: dict[str, list[str]] = {}
        for name, owners in sorted(declared.items()):
            try:
                value = self._lookup(name, owners[0])
            except SecretSourceFailed as err:
                raise ConfigurationError(str(err)) from None
            if value is None:
                absent[name] = sorted(owners)
        if absent:
            raise SecretsMissing(absent, self.sources)

    def _lookup(self, name: str, owner: str) -> str | None:
        for source in self.config.sources:
            try:
                value = self._from(source, name, owner)
            except (ConfigurationError, OSError) as err:  # an insecure or vanished file, a hook that does not load
                raise SecretSourceFailed(name, owner, redact_secrets(str(err))) from None
            if value is None:
                continue
            if not isinstance(value, str) or not value:
                raise SecretSourceFailed(name, owner, f"the {source} source gave a {type(value).__name__}, not a string")
            if len(value) > MAX_SECRET_VALUE_CHARS:
                raise SecretSourceFailed(name, owner, f"its value is longer than {MAX_SECRET_VALUE_CHARS} characters")
            if len(value) < MIN_SECRET_VALUE_CHARS:
                raise SecretSourceFailed(
                    name, owner, f"its value is shorter than {MIN_SECRET_VALUE_CHARS} characters, too short to redact safely"
                )
            remember_secret(name, value)
            return value
        return None

    def _from(self, source: str, name: str, owner: str) -> Any:
        if source == "env":
            return self._env.get(name) or None
        if source == "file":
            assert self.config.path is not None
            return read_secrets_path(Path(self.config.path)).get(name)
        return self._from_hook(name, owner)

    def _from_hook(self, name: str, owner: str) -> Any:
        with self._lock:
            if self._hook is None:
                assert self.config.hook is not None
                self._hook = load_hook(self.config.hook)
            hook = self._hook
            self._stuck = [thread for thread in self._stuck if thread.is_alive()]
            if len(self._stuck) >= HOOK_THREADS:
                raise SecretSourceFailed(name, owner, f"{len(self._stuck)} earlier lookups of hook {self.config.hook} never returned")
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def target() -> None:
            try:
                future.set_result(_call_hook(hook, name))
            except BaseException as err:  # noqa: BLE001 - raised in the waiting thread
                future.set_exception(err)

        # A daemon thread: a hook that never returns holds neither the call nor the process's exit.
        thread = threading.Thread(target=target, name="agentrt-secrets-hook", daemon=True)
        thread.start()
        try:
            return future.result(self.config.timeout_seconds)
        except concurrent.futures.TimeoutError:
            with self._lock:
                self._stuck.append(thread)
            raise SecretSourceFailed(
                name, owner, f"hook {self.config.hook} gave no answer within {self.config.timeout_seconds:g} s"
            ) from None
        except Exception as err:  # noqa: BLE001 - whatever a hook raises is this secret's typed failure
            reason = redact_secrets(f"hook {self.config.hook} raised {type(err).__name__}: {err}")
            raise SecretSourceFailed(name, owner, reason) from None


def _call_hook(hook: Callable[[str], Any], name: str) -> Any:
    """``hook(name)``, awaited on a loop of this thread when it is async."""
    value = hook(name)
    if inspect.isawaitable(value):
        return asyncio.run(_awaited(value))
    return value


async def _awaited(value: Any) -> Any:
    return await value
