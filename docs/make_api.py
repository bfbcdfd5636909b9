"""Writes ``docs/API.md``, the API reference index, from the package's docstrings.

Run ``python docs/make_api.py`` after changing a public name or its docstring (``--check``: exit
status 1 if ``docs/API.md`` is stale; ``tests/test_docs.py`` runs the check). Per module, in
package order: the module's summary line, then every public name (its ``__all__``, else the
functions and classes defined there without a leading underscore) with its full signature and the
first paragraph of its docstring. Each object is described once, in the module that defines it
(its home); a module that re-exports it lists it by name with a pointer to that home. The full
rendered reference, every docstring in HTML, comes from pdoc (the ``docs`` extra):
``pdoc bandits_jax --docformat google -o site``.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import pkgutil
import sys
from collections.abc import Iterator
from typing import Any

OUT = pathlib.Path(__file__).resolve().parent / "API.md"


def modules() -> Iterator[Any]:
    """The package and its modules, in walk order (``__main__`` left out)."""
    import bandits_jax

    yield bandits_jax
    for info in pkgutil.walk_packages(bandits_jax.__path__, "bandits_jax."):
        if not info.name.endswith("__main__"):
            yield importlib.import_module(info.name)


def public(mod: Any) -> Iterator[tuple[str, Any]]:
    """``(name, object)`` of the module's public functions and classes."""
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [
            n
            for n, v in vars(mod).items()
            if not n.startswith("_")
            and (inspect.isfunction(v) or inspect.isclass(v))
            and v.__module__ == mod.__name__
        ]
    for n in names:
        v = getattr(mod, n)
        if inspect.isfunction(v) or inspect.isclass(v):
            yield n, v


def _first_paragraph(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _default(value: Any) -> str:
    """A default value as source-like text: functions and classes by name (their repr carries
    an address), everything else by ``repr``."""
    name = getattr(value, "__qualname__", None)
    if name is not None and (callable(value) or inspect.ismodule(value)):
        return name
    text = repr(value)
    return type(value).__name__ if " at 0x" in text else text


def _parameters(sig: inspect.Signature) -> str:
    """``(a, b=1, *, c=None)``: names, defaults and the ``/``, ``*`` markers, no annotations
    (their text differs between Python versions)."""
    out: list[str] = []
    star = False
    params = list(sig.parameters.values())
    for i, p in enumerate(params):
        if p.kind is p.VAR_POSITIONAL:
            star = True
            out.append(f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            out.append(f"**{p.name}")
        else:
            if p.kind is p.KEYWORD_ONLY and not star:
                star = True
                out.append("*")
            text = p.name if p.default is p.empty else f"{p.name}={_default(p.default)}"
            out.append(text)
        nxt = params[i + 1] if i + 1 < len(params) else None
        if p.kind is p.POSITIONAL_ONLY and (nxt is None or nxt.kind is not p.POSITIONAL_ONLY):
            out.append("/")
    return f"({', '.join(out)})"


def _own_constructor(cls: type) -> bool:
    """Whether ``cls`` defines a constructor of its own (not ``object``'s, a protocol's, an
    enum's or an exception's ``(*args, **kwargs)``)."""
    import enum
    import typing

    if issubclass(cls, enum.Enum | BaseException) or getattr(cls, "_is_protocol", False):
        return False
    for base in cls.__mro__:
        if base in (object, typing.Generic):
            return False
        if "__init__" in vars(base) or "__new__" in vars(base):
            return True
    return False


def _signature(obj: Any) -> str:
    """The full call signature: a NamedTuple's fields (with their defaults), a class's
    constructor where it defines one (else nothing), a function's parameters."""
    if inspect.isclass(obj):
        fields = getattr(obj, "_fields", None)
        if fields is not None:
            defaults = getattr(obj, "_field_defaults", {})
            parts = [f"{f}={_default(defaults[f])}" if f in defaults else f for f in fields]
            return f"({', '.join(parts)})"
        if not _own_constructor(obj):
            return ""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""
    return _parameters(sig)


def listings() -> list[tuple[Any, list[tuple[str, Any]]]]:
    """``(module, its public (name, object) pairs)`` for every module, in walk order."""
    return [(mod, list(public(mod))) for mod in modules()]


def homes(listed: list[tuple[Any, list[tuple[str, Any]]]]) -> dict[int, str]:
    """``id(object) -> name of the module whose section describes it``: the module that defines
    it when that module lists it, else the first module (walk order) that lists it."""
    listing = {mod.__name__: {id(v) for _, v in names} for mod, names in listed}
    home: dict[int, str] = {}
    for mod, names in listed:
        for _, obj in names:
            defined = getattr(obj, "__module__", None)
            if id(obj) in home:
                continue
            home[id(obj)] = defined if id(obj) in listing.get(defined, ()) else mod.__name__
    return home


def entry(name: str, obj: Any) -> str:
    """One described name: ``- `def name(params)`: first paragraph``."""
    kind = "class" if inspect.isclass(obj) else "def"
    return f"- `{kind} {name}{_signature(obj)}`: {_first_paragraph(obj)}"


def render() -> str:
    """The text of ``docs/API.md``."""
    lines = [
        "# API reference (index)",
        "",
        "Generated by `python docs/make_api.py` from the docstrings; the full reference is",
        '`pdoc bandits_jax --docformat google -o site` (`pip install -e ".[docs]"`). Each object',
        "is described once, in the module that defines it; a module that re-exports names lists",
        "them under *Also here*.",
        "",
    ]
    listed = listings()
    home = homes(listed)
    for mod, names in listed:
        lines += [f"## `{mod.__name__}`", "", _first_paragraph(mod), ""]
        elsewhere: dict[str, list[str]] = {}
        for name, obj in names:
            if home[id(obj)] == mod.__name__:
                lines.append(entry(name, obj))
            else:
                elsewhere.setdefault(home[id(obj)], []).append(f"`{name}`")
        if elsewhere:
            if lines[-1]:
                lines.append("")
            lines.append("*Also here*:")
            lines += [f"- from `{m}`: {', '.join(ns)}" for m, ns in elsewhere.items()]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in argv:
        if not OUT.is_file() or OUT.read_text() != text:
            print(f"{OUT.name} is stale: run python docs/make_api.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
