"""Models named by hub id: ``config.json`` read from the local Hugging Face cache.

``python -m llmmath params meta-llama/Llama-3.1-8B [--revision REV]`` counts the
``config.json`` that ``huggingface_hub`` (or ``transformers``) stored in the cache, read
through the one hardened reader (`llmmath.config.parse_config_text`: 10 MB at most, no
duplicate keys, ...). Offline by default; with the environment variable
``LLMMATH_ALLOW_DOWNLOAD=1`` a config missing from the cache is fetched, that one file
only, with ``huggingface_hub.hf_hub_download``.

``huggingface_hub`` is optional: this module imports it only inside `cached_config_path`
and `download_config`. Without it the cache is read by `_cached_path`, a small reader of
the documented layout (source: huggingface_hub's guide "Understand caching" and its
``try_to_load_from_cache``)::

    <cache>/models--{org}--{name}/refs/{revision}      a file holding a commit hash
    <cache>/models--{org}--{name}/snapshots/{commit}/config.json

``<cache>`` is ``HF_HUB_CACHE``, else ``HUGGINGFACE_HUB_CACHE`` (the older name), else
``$HF_HOME/hub``, with ``HF_HOME`` defaulting to ``$XDG_CACHE_HOME/huggingface`` or
``~/.cache/huggingface``: the precedence of ``huggingface_hub.constants``.

Every refusal is a `ConfigError` (the CLI prints it as one line and exits with 2).
Standard library only at import time.
"""

from __future__ import annotations

import os
import re

from llmmath.config import (
    MAX_CONFIG_BYTES,
    ConfigError,
    ModelConfig,
    _too_big,
    not_json,
    parse_config_text,
    unreadable,
)
from llmmath.messages import gettext as _
from llmmath.messages import join

#: ``org/name``: ASCII letters, digits, ``-``, ``_`` and ``.``, at most 96 characters
#: each side, no ``--`` or ``..`` (huggingface_hub's ``validate_repo_id`` rules; a
#: namespace is required here, so that a bare word stays a preset name).
REPO_ID = re.compile(r"\w(?:[\w.-]{0,94}\w)?", re.ASCII)
#: A branch, a tag (``refs/pr/1`` included) or a commit hash.
REVISION = re.compile(r"[A-Za-z0-9_](?:[\w.-]|/(?!/)){0,254}", re.ASCII)
COMMIT = re.compile(r"[0-9a-f]{40}")
#: Set to 1 to allow fetching a config.json that the cache lacks (default: offline).
DOWNLOAD_ENV = "LLMMATH_ALLOW_DOWNLOAD"
FILENAME = "config.json"


def check_repo_id(model: str) -> str:
    """``model`` if it is a hub id ``org/name``; else a `ConfigError` naming the rule
    (so ``../../etc``, ``/abs`` and ``org/name/../x`` are refused before any path is
    built from them)."""
    parts = model.split("/")
    if (
        len(parts) != 2
        or not all(REPO_ID.fullmatch(p) for p in parts)
        or any("--" in p or ".." in p for p in parts)
    ):
        raise ConfigError(
            _(
                "model {model} is no file, no preset and no hub id: a hub id is "
                "org/name (letters, digits, '-', '_', '.'; no '--' or '..'; at most "
                "96 characters each side)"
            ).format(model=repr(model))
        )
    return model


def check_revision(revision: str) -> str:
    """``revision`` if it is a commit hash or a branch or tag name; else a
    `ConfigError` (no ``..``, no leading ``/`` or ``-``, no trailing ``/``)."""
    if not REVISION.fullmatch(revision) or ".." in revision or revision.endswith("/"):
        raise ConfigError(
            _(
                "--revision {revision} must be a commit hash or a branch or tag name "
                "(letters, digits, '-', '_', '.', '/'; no '..'; at most 255 "
                "characters)"
            ).format(revision=repr(revision))
        )
    return revision


def hub_cache_dir(environ: os._Environ | dict | None = None) -> str:
    """The hub cache folder, by ``huggingface_hub.constants``' precedence:
    ``HF_HUB_CACHE``, ``HUGGINGFACE_HUB_CACHE``, ``$HF_HOME/hub``, and ``HF_HOME``
    defaults to ``$XDG_CACHE_HOME/huggingface`` or ``~/.cache/huggingface``. Read at
    each call (huggingface_hub reads it once, at import)."""
    env = os.environ if environ is None else environ

    def expand(path: str) -> str:
        return os.path.expandvars(os.path.expanduser(path))

    xdg = env.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))
    home = expand(env.get("HF_HOME", os.path.join(xdg, "huggingface")))
    legacy = env.get("HUGGINGFACE_HUB_CACHE", os.path.join(home, "hub"))
    return expand(env.get("HF_HUB_CACHE", legacy))


def download_allowed(environ: os._Environ | dict | None = None) -> bool:
    """True when ``LLMMATH_ALLOW_DOWNLOAD`` is 1 (or true, yes, on); unset, empty, 0,
    false, no or off: offline. Anything else is a `ConfigError`."""
    value = (os.environ if environ is None else environ).get(DOWNLOAD_ENV, "")
    value = value.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise ConfigError(
        _("{name} must be 1 (download allowed) or 0, got {value}").format(
            name=DOWNLOAD_ENV, value=repr(value)
        )
    )


def _repo_folder(cache: str, repo_id: str) -> str:
    return os.path.join(cache, "models--" + repo_id.replace("/", "--"))


def _cached_path(repo_id: str, revision: str, cache: str) -> str | None:
    """The fallback of `cached_config_path` when huggingface_hub is not installed:
    what its ``try_to_load_from_cache`` returns for a file that is cached, else None
    (a revision is a name under ``refs/`` holding a commit, or a commit itself)."""
    repo = _repo_folder(cache, repo_id)
    commit = _read_ref(repo, revision)
    if not isinstance(commit, str):  # no such ref: a commit hash, or not cached
        commit = revision if commit is None else ""
    path = os.path.join(repo, "snapshots", commit, FILENAME)
    return path if COMMIT.fullmatch(commit) and os.path.isfile(path) else None


def _read_ref(repo: str, revision: str) -> str | None | OSError | ValueError:
    """What ``refs/{revision}`` of ``repo`` holds (text, as huggingface_hub reads it:
    no stripping), None when there is no such file, or the error reading it raised (a
    file that is not UTF-8: ValueError)."""
    ref = os.path.join(repo, "refs", revision)
    if not os.path.isfile(ref):
        return None
    try:
        with open(ref, "rb") as f:
            return f.read(4096).decode("utf-8")
    except (OSError, ValueError) as e:
        return e


def cached_config_path(repo_id: str, revision: str, cache: str) -> str | None:
    """The cached ``config.json`` of ``repo_id`` at ``revision``, or None: found with
    ``huggingface_hub.try_to_load_from_cache`` when it is installed, else with
    `_cached_path`. Raises `ConfigError` when the cache records that the revision has
    no config.json."""
    try:
        from huggingface_hub import try_to_load_from_cache
        from huggingface_hub.file_download import _CACHED_NO_EXIST
    except ImportError:
        return _cached_path(repo_id, revision, cache)
    try:
        found = try_to_load_from_cache(
            repo_id, FILENAME, cache_dir=cache, revision=revision
        )
    except (OSError, ValueError):  # a ref it cannot read: `_not_cached` says which
        return None
    if found is _CACHED_NO_EXIST:
        raise ConfigError(_no_file(_model(repo_id), revision))
    return found if isinstance(found, str) else None


def _model(repo_id: str) -> str:
    return _("model {model}").format(model=repr(repo_id))


def _no_file(who: str, revision: str) -> str:
    return _("{who} has no {file} at revision {revision}").format(
        who=who, file=FILENAME, revision=repr(revision)
    )


def _not_cached(repo_id: str, revision: str, cache: str) -> ConfigError:
    """Why the cache has no config.json for ``repo_id`` at ``revision``."""
    repo = _repo_folder(cache, repo_id)
    fetch = _("set {name}=1 to fetch its {file}, or run `{command}`").format(
        name=DOWNLOAD_ENV, file=FILENAME, command=f"hf download {repo_id} {FILENAME}"
    )
    if not os.path.isdir(repo):
        return ConfigError(
            _("{who} is not in the local hub cache ({cache}); {fetch}").format(
                who=_model(repo_id), cache=cache, fetch=fetch
            )
        )
    held = _read_ref(repo, revision)
    where = _("refs/{revision} of model {model} in the local hub cache").format(
        revision=revision, model=repr(repo_id)
    )
    if isinstance(held, (OSError, ValueError)):
        why = held.strerror if isinstance(held, OSError) else _("not UTF-8 text")
        return ConfigError(
            _("{where} cannot be read ({why}); delete that file, then {fetch}").format(
                where=where, why=why or held, fetch=fetch
            )
        )
    if held is not None and not COMMIT.fullmatch(held):
        shown = held if len(held) <= 80 else f"{held[:40]}...{held[-10:]}"
        return ConfigError(
            _(
                "{where} is corrupt: it holds {value}, not a commit hash (40 hex "
                "digits); delete that file, then {fetch}"
            ).format(where=where, value=repr(shown), fetch=fetch)
        )
    if held is not None:
        return ConfigError(
            _(
                "revision {revision} of model {model} is commit {commit}, whose "
                "{file} is not in the local hub cache; {fetch}"
            ).format(
                revision=repr(revision),
                model=repr(repo_id),
                commit=held,
                file=FILENAME,
                fetch=fetch,
            )
        )
    top = os.path.join(repo, "refs")
    refs = sorted(
        os.path.relpath(os.path.join(folder, name), top).replace(os.sep, "/")
        for folder, _, names in os.walk(top)
        for name in names
    )
    known = _(" (cached: {refs})").format(refs=join(refs)) if refs else ""
    return ConfigError(
        _(
            "revision {revision} of model {model} is not in the local hub cache"
            "{known}; {fetch}"
        ).format(revision=repr(revision), model=repr(repo_id), known=known, fetch=fetch)
    )


def download_config(repo_id: str, revision: str, cache: str) -> str:
    """Fetch ``config.json`` of ``repo_id`` at ``revision`` into ``cache`` with
    ``huggingface_hub.hf_hub_download`` (that file only); its path.

    Raises:
        ConfigError: huggingface_hub is not installed; the model is gated, private or
        missing; the revision or the file is missing; the network failed.
    """
    try:
        import huggingface_hub
        from huggingface_hub import errors
    except ImportError:
        raise ConfigError(
            _(
                "{name}=1 needs huggingface_hub (pip install 'llmmath[hub]'); "
                "without it llmmath reads only the local hub cache"
            ).format(name=DOWNLOAD_ENV)
        ) from None
    who = _model(repo_id)
    try:
        return huggingface_hub.hf_hub_download(
            repo_id, FILENAME, revision=revision, cache_dir=cache
        )
    except errors.GatedRepoError:
        message = _(
            "{who} is gated: accept its terms on its hub page, then `hf auth login`"
        ).format(who=who)
    except errors.RepositoryNotFoundError:
        message = _(
            "{who} is not on the hub, or is private (log in: `hf auth login`)"
        ).format(who=who)
    except errors.RevisionNotFoundError:
        message = _("{who} has no revision {revision} on the hub").format(
            who=who, revision=repr(revision)
        )
    except (errors.OfflineModeIsEnabled, errors.LocalEntryNotFoundError):
        message = _(
            "cannot fetch {file} of {who}: no connection to the hub, or "
            "HF_HUB_OFFLINE is set"
        ).format(file=FILENAME, who=who)
    except errors.EntryNotFoundError:  # on the hub (the local one is caught above)
        message = _no_file(who, revision)
    except (OSError, ValueError) as e:  # HTTP errors, bad ids the hub refuses, disk
        message = _("cannot fetch {file} of {who}: {error}").format(
            file=FILENAME, who=who, error=f"{type(e).__name__}: {e}"
        )
    raise ConfigError(message)


def load_config(
    model: str, revision: str | None = None, download: bool | None = None
) -> ModelConfig:
    """The `ModelConfig` of hub id ``model`` at ``revision`` (default ``"main"``: a
    branch or tag under ``refs/``, or a commit hash), from the local hub cache; when it
    is not there and ``download`` (default: `download_allowed`) is true, fetched.

    Raises:
        ConfigError: an invalid hub id or revision, a model or revision missing from
        the cache (offline), a failed download, or an invalid config.
    """
    repo_id = check_repo_id(model)
    revision = check_revision("main" if revision is None else revision)
    cache = hub_cache_dir()
    path = cached_config_path(repo_id, revision, cache)
    if path is None:
        if not (download_allowed() if download is None else download):
            raise _not_cached(repo_id, revision, cache)
        path = download_config(repo_id, revision, cache)
    source = _("{file} of {model} at {revision}").format(
        file=FILENAME, model=repr(repo_id), revision=repr(revision)
    )
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(unreadable(source, e.strerror or e)) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(_too_big(source))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(not_json(source, e)) from None
    return ModelConfig.from_hf_config(parse_config_text(text, source))
