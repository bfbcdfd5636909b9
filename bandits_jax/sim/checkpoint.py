"""Checkpoints of run states as plain arrays in ``.npz`` files (no pickle).

A checkpoint stores the leaves of a pytree as ``leaf_00000, leaf_00001, ...`` with their tree
paths, a JSON metadata string and a SHA-256 checksum; typed PRNG keys are stored as their key
data and rewrapped. The tree structure itself is not stored, so :func:`restore` takes a template
of the same structure and checks paths, shapes and dtypes: a checkpoint of another configuration,
a truncated or a corrupt file is a :class:`CheckpointError` naming the path. Every write of the
package's runs and commands is atomic (:func:`atomic_file`, :func:`write_json`: a temporary file,
then ``os.replace``), and :class:`DirectoryLock` keeps two processes from writing the same
directory.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import pathlib
import secrets
import warnings
import zipfile
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "CheckpointError",
    "CheckpointLockError",
    "DirectoryLock",
    "atomic_file",
    "write_json",
    "HostTree",
    "to_host",
    "to_device",
    "save",
    "restore",
    "read_meta",
    "checksum",
]

PyTree = Any


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable or does not match the run it should resume (a
    one-line message, which a command prints as it is)."""


class CheckpointLockError(CheckpointError):
    """Another live process holds the directory's lock file."""


# Errors numpy's lazy .npz reader raises on truncated or corrupt files.
_READ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error)


def checksum(arrays: list[np.ndarray]) -> str:
    """SHA-256 of the arrays' dtypes, shapes and bytes (hex)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class DirectoryLock:
    """An exclusive lock file (``O_CREAT | O_EXCL``, holding the pid) in a directory, used as a
    context manager: a dead process's lock is taken over with a warning; a live one's raises
    :class:`CheckpointLockError` at once."""

    def __init__(self, directory: str | os.PathLike, name: str = ".lock"):
        self.directory = pathlib.Path(directory)
        self.path = self.directory / name
        self.held = False

    def acquire(self) -> DirectoryLock:
        self.directory.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    pid = int(self.path.read_text().strip() or "-1")
                except (OSError, ValueError):
                    pid = -1
                if pid > 0 and _pid_alive(pid):
                    raise CheckpointLockError(
                        f"{self.directory}: in use by process {pid} (lock file {self.path}); "
                        "wait for it to finish or use another directory"
                    ) from None
                warnings.warn(
                    f"{self.path}: taking over a stale lock (process {pid} is not running)",
                    stacklevel=2,
                )
                self.path.unlink(missing_ok=True)
                continue
            except OSError as e:
                if e.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
                    raise CheckpointError(
                        f"{self.directory}: not writable ({e.strerror})"
                    ) from None
                raise
            with os.fdopen(fd, "w") as f:
                f.write(f"{os.getpid()}\n")
            self.held = True
            return self
        raise CheckpointLockError(f"{self.directory}: could not take the lock file {self.path}")

    def release(self) -> None:
        if self.held:
            self.held = False
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w"):
    """Opens a new file beside ``path`` (its directory created if needed) for writing in
    ``mode`` (``"w"`` or ``"wb"``) and moves it onto ``path`` when the block ends (``os.replace``:
    readers see the old file or the whole new one); on an error the new file is removed."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, mode.replace("w", "x")) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _plain(x: Any) -> Any:
    """``x`` as JSON values: numpy arrays and scalars converted, non-finite floats ``None``."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray | np.generic):
        return _plain(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Writes ``obj`` as indented JSON to ``path`` atomically (:func:`atomic_file`); numpy
    values become numbers and lists, NaN and infinities ``null``."""
    with atomic_file(path) as f:
        json.dump(_plain(obj), f, indent=2)
        f.write("\n")


def _is_key(x: Any) -> bool:
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key)


class HostTree(NamedTuple):
    """A pytree on the host (:func:`to_host`): its structure, its leaves as numpy arrays (typed
    PRNG keys as their key data) and each leaf's key implementation (``None``: an array)."""

    treedef: Any
    leaves: list
    impls: list

    def map(self, fn: Callable[[np.ndarray], np.ndarray]) -> HostTree:
        """The same tree with ``fn`` applied to every leaf (key data included)."""
        return self._replace(leaves=[fn(x) for x in self.leaves])


def to_host(tree: PyTree) -> HostTree:
    """``tree`` (jax arrays, typed PRNG keys) copied to the host as a :class:`HostTree`."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    impls = [str(jax.random.key_impl(x)) if _is_key(x) else None for x in leaves]
    data = [np.asarray(jax.random.key_data(x) if i else x)
            for x, i in zip(leaves, impls, strict=True)]  # fmt: skip
    return HostTree(treedef, data, impls)


def to_device(host: HostTree) -> PyTree:
    """Fresh device arrays of a :class:`HostTree` (keys rewrapped). Moving arrays compiles no
    program, where eager copies, indexing or broadcasting on the device compile one per shape."""
    leaves = [jax.device_put(x) if i is None else jax.random.wrap_key_data(x, impl=i)
              for x, i in zip(host.leaves, host.impls, strict=True)]  # fmt: skip
    return jax.tree_util.tree_unflatten(host.treedef, leaves)


def _shape_dtype(x: Any) -> tuple[tuple[int, ...], Any]:
    if hasattr(x, "shape") and hasattr(x, "dtype"):  # arrays and jax.ShapeDtypeStruct
        return tuple(x.shape), x.dtype
    x = np.asarray(x)
    return x.shape, x.dtype


def _paths_and_leaves(tree: PyTree) -> tuple[list[str], list[Any]]:
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [jax.tree_util.keystr(p) for p, _ in flat], [leaf for _, leaf in flat]


def save(path: str | os.PathLike, tree: PyTree, meta: dict | None = None) -> None:
    """Writes ``tree``'s leaves (gathered to the host) and ``meta``, a small JSON-serialisable
    dict, to the ``.npz`` file ``path`` atomically (its directory created if needed)."""
    paths, leaves = _paths_and_leaves(tree)
    arrays: dict[str, np.ndarray] = {}
    kinds = []
    for i, leaf in enumerate(leaves):
        if _is_key(leaf):
            kinds.append("key:" + str(jax.random.key_impl(leaf)))
            leaf = jax.random.key_data(leaf)
        else:
            kinds.append("array")
        arrays[f"leaf_{i:05d}"] = np.asarray(jax.device_get(leaf))
    arrays["__checksum__"] = np.asarray(checksum(list(arrays.values())))
    arrays["__paths__"] = np.asarray(paths, dtype=np.str_)
    arrays["__kinds__"] = np.asarray(kinds, dtype=np.str_)
    arrays["__meta__"] = np.asarray(json.dumps(meta or {}, sort_keys=True))
    with atomic_file(path, "wb") as f:
        np.savez(f, **arrays)


@contextlib.contextmanager
def _reading(path: pathlib.Path):
    """The open ``.npz`` file; a missing, truncated or corrupt one is a :class:`CheckpointError`."""
    if not path.is_file():
        raise CheckpointError(f"{path}: no checkpoint there")
    try:
        with np.load(path, allow_pickle=False) as z:
            yield z
    except _READ_ERRORS as e:
        raise CheckpointError(f"{path}: unreadable or truncated checkpoint ({e})") from None


def read_meta(path: str | os.PathLike) -> dict:
    """The metadata dict stored by :func:`save`."""
    with _reading(pathlib.Path(path)) as z:
        return json.loads(str(z["__meta__"]))


def restore(
    path: str | os.PathLike, like: PyTree, *, require_finite: bool = False
) -> tuple[PyTree, dict]:
    """``(tree, meta)``: the checkpoint written by :func:`save` to ``path``, as jax arrays in the
    structure of ``like`` (a template of the same tree structure, leaf shapes and dtypes, e.g.
    ``jax.ShapeDtypeStruct`` leaves), and its metadata.

    Raises:
      CheckpointError: missing/unreadable/truncated file, a checksum mismatch, a different
        structure, shape or dtype, or (``require_finite``) non-finite values.
    """
    path = pathlib.Path(path)
    want_paths, want_leaves = _paths_and_leaves(like)
    _, treedef = jax.tree_util.tree_flatten(like)
    with _reading(path) as z:
        got_paths = [str(p) for p in z["__paths__"]]
        kinds = [str(k) for k in z["__kinds__"]]
        meta = json.loads(str(z["__meta__"]))
        stored = [z[f"leaf_{i:05d}"] for i in range(len(got_paths))]
        stored_sum = str(z["__checksum__"]) if "__checksum__" in z.files else None
    if stored_sum is not None and checksum(stored) != stored_sum:
        raise CheckpointError(f"{path}: checksum mismatch (corrupt checkpoint)")
    if got_paths != want_paths:
        raise CheckpointError(
            f"{path}: stored tree has leaves {got_paths[:6]}{'...' if len(got_paths) > 6 else ''}"
            f" but the run expects {want_paths[:6]}{'...' if len(want_paths) > 6 else ''}"
        )
    leaves = []
    for name, kind, arr, want in zip(got_paths, kinds, stored, want_leaves, strict=True):
        if kind.startswith("key:"):
            if not _is_key(want):
                raise CheckpointError(
                    f"{path}: {name} is a typed PRNG key, the run expects an array"
                )
            leaf = jax.random.wrap_key_data(jnp.asarray(arr), impl=kind[4:])
        else:
            leaf = jnp.asarray(arr)
        want_shape, want_dtype = _shape_dtype(want)
        if leaf.shape != want_shape or leaf.dtype != want_dtype:
            raise CheckpointError(
                f"{path}: {name} stored as {leaf.dtype}{list(leaf.shape)}, the run expects "
                f"{want_dtype}{list(want_shape)} (a checkpoint of another configuration?)"
            )
        if require_finite and np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)):
            raise CheckpointError(f"{path}: {name} holds NaN or inf; refusing to resume from it")
        leaves.append(leaf)
    return jax.tree_util.tree_unflatten(treedef, leaves), meta
