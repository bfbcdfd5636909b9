"""Every module and every public function or class of the package has a docstring, and the API
reference index ``docs/API.md`` is current.

Public: listed in the module's ``__all__`` where it has one, else every module-level function or
class defined there whose name does not start with an underscore (``docs/make_api.py``).
"""

import importlib.util
import inspect
import pathlib

_PATH = pathlib.Path(__file__).resolve().parent.parent / "docs" / "make_api.py"
_SPEC = importlib.util.spec_from_file_location("make_api", _PATH)
make_api = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(make_api)


def test_every_module_and_public_name_has_a_docstring():
    missing = []
    modules = list(make_api.modules())
    assert len(modules) > 40  # the walk found the package
    for mod in modules:
        if not (mod.__doc__ or "").strip():
            missing.append(mod.__name__)
        missing += [f"{mod.__name__}.{n}" for n, v in make_api.public(mod) if not inspect.getdoc(v)]
    assert not missing, f"no docstring: {missing}"


def test_the_api_reference_index_is_current():
    """``docs/API.md`` is what ``python docs/make_api.py`` writes from today's docstrings, and it
    lists every public name of every module: described in its home module's section, named under
    *Also here* in every other section that exports it."""
    text = make_api.OUT.read_text()
    assert text == make_api.render(), "stale: run python docs/make_api.py"
    sections = {s.split("`", 1)[0]: s for s in text.split("\n## `")[1:]}
    listed = make_api.listings()
    home = make_api.homes(listed)
    for mod, names in listed:
        section = sections[mod.__name__]
        for name, obj in names:
            if home[id(obj)] == mod.__name__:
                assert make_api.entry(name, obj) in section.splitlines(), f"{mod.__name__}.{name}"
            else:
                assert f"- from `{home[id(obj)]}`: " in section and f"`{name}`" in section, (
                    f"{mod.__name__}.{name}"
                )


def test_the_api_reference_gives_every_signature_in_full_once():
    """No elided signature, and every object is described by exactly one entry."""
    text = make_api.OUT.read_text()
    assert "(...)" not in text
    listed = make_api.listings()
    home = make_api.homes(listed)
    described = [
        (name, obj) for mod, names in listed for name, obj in names if home[id(obj)] == mod.__name__
    ]
    assert len({id(obj) for _, obj in described}) == len(described)
    lines = text.splitlines()
    for name, obj in described:
        assert lines.count(make_api.entry(name, obj)) == 1, name
