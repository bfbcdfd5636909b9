"""Progress bars count trial-rounds (a round of one run) and announce what the command plays;
the compile cache lives in a subdirectory keyed by the checkout's source, and every summary says
where it is, how big, and how to clear it or turn it off."""

import json
import shutil

import jax
import pytest
from jax.experimental.compilation_cache import compilation_cache

from bandits_jax import cli
from bandits_jax.cli import cache

REPRODUCE = [
    "reproduce", "--settings", "synth-3-2", "--learners", "uniform,ecolog", "--rounds", "5",
    "--trials", "2", "--chunk", "2", "--quiet", "--no-plots",
]  # fmt: skip


def _tree(root, files):
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_source_key_follows_the_source_bytes(tmp_path):
    files = {"__init__.py": "x = 1\n", "sim/chunks.py": "y = 2\n", "data.txt": "z"}
    a, b = _tree(tmp_path / "a", files), _tree(tmp_path / "b", files)
    key = cache.source_key(a)
    assert key == cache.source_key(b)  # equal trees, wherever they are
    assert key.startswith("src-") and key.endswith(f"-jax-{jax.__version__}")
    (b / "data.txt").write_text("other")  # not Python source
    assert cache.source_key(b) == key
    (b / "sim" / "chunks.py").write_text("y = 3\n")  # one byte
    assert cache.source_key(b) != key
    shutil.rmtree(b)
    renamed = {"__init__.py": files["__init__.py"], "sim/other.py": files["sim/chunks.py"]}
    assert cache.source_key(_tree(b, renamed)) != key  # a rename
    assert cache.source_key(_tree(tmp_path / "c", files)) == key
    assert cache.source_key() == cache.source_key()  # the installed package


def test_compile_cache_path_is_keyed_and_off_hashes_nothing(tmp_path, monkeypatch):
    parser = cli.build_parser()
    args = parser.parse_args(["reproduce", "--compile-cache", str(tmp_path)])
    assert cache.cache_path(args) == tmp_path / cache.source_key()
    monkeypatch.setattr(cache, "source_key", lambda root=None: 1 / 0)
    assert cache.cache_path(parser.parse_args(["reproduce", "--compile-cache", "off"])) is None


@pytest.fixture
def no_cache_after():
    """The command points this process's JAX at the test's cache: point it nowhere after."""
    yield
    jax.config.update("jax_compilation_cache_dir", None)
    compilation_cache.reset_cache()


def test_summary_names_the_cache_its_entries_and_how_to_clear_it(
    tmp_path, capsys, monkeypatch, no_cache_after
):
    monkeypatch.setattr(cache, "MIN_SECONDS", 0.0)  # cache every program
    jax.numpy.ones(1).block_until_ready()  # this process's JAX has started (its XLA_FLAGS stand)
    out, root = tmp_path / "out", tmp_path / "xla"
    assert cli.main([*REPRODUCE, "--out", str(out), "--compile-cache", str(root)]) == 0
    where = root / cache.source_key()
    files = [p for p in where.iterdir() if p.is_file()]
    entries = sum(p.name.endswith("-cache") for p in files)
    size = sum(p.stat().st_size for p in files)
    assert entries > 0
    summary = (out / "reproduce_summary.txt").read_text()
    assert f"{where}: {entries} entries, {size / 1e6:.1f} MB" in summary
    assert f"rm -rf {where} (this checkout) or rm -rf {root}/src-* (every" in summary
    assert "--compile-cache off" in summary and "BANDITS_JAX_COMPILE_CACHE=off" in summary
    report = json.loads((out / "reproduce.json").read_text())["compile_cache"]
    assert report == {
        "dir": str(where),
        "root": str(root),
        "enabled": True,
        "entries": entries,
        "bytes": size,
        # JAX had started (this test process): the command could not set its XLA options
        "xla_options": None,
        "programs": report["programs"],
    }
    assert "Compiled with: the calling process's XLA options" in summary
    asked, hits = report["programs"]["asked"], report["programs"]["hits"]
    assert asked > 0 and 0 <= hits < asked  # a fresh cache: most programs compiled
    assert f"{hits} of {asked} programs of this run came from it" in summary
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"compile cache on: {where}, {entries} entries, {hits} of {asked} programs" in last
    assert "rm -rf" in last and "--compile-cache off" in last

    # The same run again: what it compiles (its chunks are new jit objects, so not found in
    # JAX's in-memory cache) comes from the persistent cache, every program of it
    assert cli.main([*REPRODUCE, "--out", str(out), "--compile-cache", str(root)]) == 0
    again = json.loads((out / "reproduce.json").read_text())["compile_cache"]["programs"]
    assert again["hits"] == again["asked"] > 0, again
    capsys.readouterr()

    assert cli.main([*REPRODUCE, "--out", str(out), "--compile-cache", "off"]) == 0
    assert jax.config.jax_compilation_cache_dir is None
    assert "Compile cache: off" in (out / "reproduce_summary.txt").read_text()
    report = json.loads((out / "reproduce.json").read_text())["compile_cache"]
    assert report["enabled"] is False and report["dir"] is None
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .startswith("bandits-jax: compile cache off")
    )


def test_reproduce_announces_the_trial_rounds_it_plays(tmp_path, bars):
    assert cli.main([*REPRODUCE, "--out", str(tmp_path)]) == 0
    # ECOLog is for K = 1 only: skipped on K = 2, so 1 learner x 2 trials x 5 rounds.
    assert [(b.total, b.done) for b in bars] == [(1 * 2 * 5, 1 * 2 * 5)]


def test_sweep_announces_the_trial_rounds_it_plays(tmp_path, bars):
    argv = [
        "sweep", "--settings", "bco-linear-2", "--learners", "sphere", "--scale-grid", "0.5,2",
        "--rounds", "6", "--chunk", "4", "--trials", "2", "--eval-trials", "3", "--quiet",
        "--no-plots", "--out", str(tmp_path),
    ]  # fmt: skip
    assert cli.main(argv) == 0
    tuning, evaluation = 2 * 2 * 6, 1 * 3 * 6  # grid points x seeds x rounds
    assert [(b.total, b.done) for b in bars] == [(tuning, tuning), (evaluation, evaluation)]
