"""JAX's persistent compilation cache as the command uses it: where it lives (``--compile-cache
DIR|off``, ``$BANDITS_JAX_COMPILE_CACHE``, else ``<data root>/xla``), one subdirectory per
checkout and JAX version (:func:`source_key`), the programs this run asked of it and found there,
and the lines every summary ends with (where, how big, how to clear it or turn it off).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shlex
from typing import Any

ENV = "BANDITS_JAX_COMPILE_CACHE"  # a directory or "off"; --compile-cache wins
MIN_SECONDS = 0.1  # programs compiled faster than this are not cached (a chunk of --quick: ~1 s)
_OFF = f"--compile-cache off or {ENV}=off"
_ON = f"--compile-cache DIR, or unset ${ENV}"
_EVENTS = {"asked": 0, "hits": 0}  # this run's compiles that asked the cache, and its hits
_KEYS = {"/jax/compilation_cache/compile_requests_use_cache": "asked",
         "/jax/compilation_cache/cache_hits": "hits"}  # fmt: skip
_LISTENING: list[bool] = []  # whether _count is registered with JAX


def cache_dir(args: argparse.Namespace) -> pathlib.Path | None:
    """The cache's root (``None``: off): ``--compile-cache``, else ``$BANDITS_JAX_COMPILE_CACHE``,
    else ``$BANDITS_JAX_DATA/xla`` or ``~/.cache/bandits_jax/xla``."""
    value = getattr(args, "compile_cache", None) or os.environ.get(ENV)
    if value == "off":
        return None
    if value:
        return pathlib.Path(value).expanduser()
    return (
        pathlib.Path(os.environ.get("BANDITS_JAX_DATA") or "~/.cache/bandits_jax").expanduser()
        / "xla"
    )


def source_key(root: pathlib.Path | None = None) -> str:
    """This checkout's subdirectory, ``src-<hash>-jax-<version>``: the hash (12 hex digits of
    SHA-256) covers the relative path and bytes of every ``*.py`` under ``root`` (default: the
    installed ``bandits_jax``), so entries of another checkout or version cannot shorten this
    one's cold start (JAX keys every entry by its program: no result depends on them)."""
    import hashlib

    import jax

    root = pathlib.Path(__file__).resolve().parents[1] if root is None else root
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix()):
        data = path.read_bytes()
        h.update(f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return f"src-{h.hexdigest()[:12]}-jax-{jax.__version__}"


def cache_path(args: argparse.Namespace) -> pathlib.Path | None:
    """Where the command's programs go: :func:`cache_dir`'s :func:`source_key` subdirectory
    (``None``: off, and nothing is hashed)."""
    root = cache_dir(args)
    return None if root is None else root / source_key()


def _count(event: str, **kwargs: Any) -> None:
    if event in _KEYS:
        _EVENTS[_KEYS[event]] += 1


def use(path: pathlib.Path | None) -> None:
    """Points JAX's persistent compilation cache at ``path`` (``None``: off) and counts this
    run's programs. JAX opens its cache once per process: a change (a second command in one
    process) resets it."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    if not _LISTENING:  # once per process
        jax.monitoring.register_event_listener(_count)
        _LISTENING.append(True)
    _EVENTS.update(asked=0, hits=0)
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_SECONDS)
    value = None if path is None else str(path)
    if jax.config.jax_compilation_cache_dir != value:
        jax.config.update("jax_compilation_cache_dir", value)
        compilation_cache.reset_cache()


def report(args: argparse.Namespace) -> dict[str, Any]:
    """The cache now: ``dir`` (this checkout's entries; ``None`` when off), ``root`` (every
    checkout's), ``enabled``, ``entries`` (JAX's ``*-cache`` files), ``bytes`` (under ``dir``),
    ``xla_options`` (``args.xla_applied``, what the programs compiled with; ``{}``: XLA's
    defaults; ``None``: the calling process's own, JAX had started before the command) and
    ``programs`` (compiles asked of the cache in this process, ``hits``: served from it)."""
    path = args.compile_cache_path
    out = {"dir": None, "root": None, "enabled": False, "entries": 0, "bytes": 0,
           "xla_options": args.xla_applied, "programs": dict(_EVENTS)}  # fmt: skip
    if path is None:
        return out
    out.update(dir=str(path), root=str(path.parent), enabled=True)
    for p in path.rglob("*") if path.is_dir() else ():
        try:  # another process may evict an entry meanwhile
            if p.is_file():
                out["bytes"] += p.stat().st_size
                out["entries"] += p.name.endswith("-cache")
        except OSError:
            continue
    return out


def text(rep: dict[str, Any]) -> str:
    """The summary's lines on compiling: the XLA options; the cache (where, how big, how to
    clear or turn it off)."""
    xla = rep.get("xla_options")
    if xla is None:
        options = "\nCompiled with: the calling process's XLA options (JAX had already started)"
    else:
        level = xla.get("xla_backend_optimization_level", "XLA's default")
        emitters = "classic" if xla.get("xla_cpu_use_fusion_emitters") is False else "MLIR"
        parts = xla.get("xla_cpu_parallel_codegen_split_count", "XLA's own number of")
        options = (f"\nCompiled with: optimisation level {level}, {emitters} fusion emitters, "
                   f"machine code in {parts} part(s) on CPU (--xla-opt-level, "
                   "--xla-fusion-emitters, --xla-codegen-split)")  # fmt: skip
    if not rep["enabled"]:
        return f"{options}\nCompile cache: off (turn it on with {_ON})\n"
    d, root, programs = shlex.quote(rep["dir"]), shlex.quote(rep["root"]), rep["programs"]
    return (
        f"{options}\nCompile cache: on, in {rep['dir']}: {rep['entries']} entries, "
        f"{rep['bytes'] / 1e6:.1f} MB; {programs['hits']} of {programs['asked']} programs of "
        "this run came from it\n  (JAX's persistent compilation cache, keyed by this checkout's "
        "source and JAX's version: it saves compiling, no result depends on it)\n"
        f"  clear: rm -rf {d} (this checkout) or rm -rf {root}/src-* (every checkout); "
        f"turn off: {_OFF}\n"
    )


def line(rep: dict[str, Any]) -> str:
    """The last line on stderr: the cache in one line."""
    if not rep["enabled"]:
        return f"bandits-jax: compile cache off (on: {_ON})"
    return (f"bandits-jax: compile cache on: {rep['dir']}, {rep['entries']} entries, "
            f"{rep['programs']['hits']} of {rep['programs']['asked']} programs from it, "
            f"{rep['bytes'] / 1e6:.1f} MB; clear: rm -rf {shlex.quote(rep['dir'])}; "
            f"off: {_OFF}")  # fmt: skip
