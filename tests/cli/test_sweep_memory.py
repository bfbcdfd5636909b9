"""``bandits-jax sweep --max-memory``: validated before any JAX work; memory per experiment in the
CSV, JSON and summary; a budget that forces batches gives the same table."""

import csv
import json

import jax
import jax.numpy as jnp
import pytest

from bandits_jax import cli
from bandits_jax.cli import sweep as sweep_cmd
from bandits_jax.sim import chunks, sweep
from bandits_jax.sim.runner import play

ARGV = [
    "sweep", "--settings", "bco-linear-2", "--learners", "sphere", "--scale-grid", "0.5,1,2",
    "--rounds", "6", "--trials", "2", "--eval-trials", "0", "--quiet", "--no-plots",
]  # fmt: skip
# Slices of 2 runs: a run's numbers do not depend on the batch width (bit-identical split tables).
MICRO = ["--microbatch", "2"]


@pytest.mark.parametrize(
    "option,value",
    [("--max-memory", v) for v in ["0", "-5", "lots", "1.5Q", "", "0.1"]] + [("--microbatch", "0")],
)
def test_bad_memory_options_are_one_line_and_compile_nothing(
    option, value, tmp_path, capsys, monkeypatch
):
    def forbidden(*args, **kwargs):
        raise AssertionError("a chunk was compiled before the options were validated")

    monkeypatch.setattr(chunks.ChunkFn, "compiled", forbidden)
    rc = cli.main([*ARGV, option, value, "--out", str(tmp_path / "out")])
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"bandits-jax: error: {option}")
    assert not (tmp_path / "out").exists()


def test_parse_bytes():
    assert sweep_cmd.parse_bytes("auto") == "auto"
    assert sweep_cmd.parse_bytes("123") == 123
    assert sweep_cmd.parse_bytes("2K") == 2048
    assert sweep_cmd.parse_bytes("1.5G") == 3 * 1024**3 // 2
    assert sweep_cmd.parse_bytes("512MiB") == 512 * 1024**2
    assert sweep_cmd.parse_bytes("0") is None and sweep_cmd.parse_bytes("x") is None


def _rows(out):
    with open(out / "sweep.csv") as f:
        return list(csv.DictReader(f))


def nbytes(tree):
    """Bytes of the arrays of a tree (typed PRNG keys: their key data)."""
    return sum(
        (jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x).nbytes
        for x in jax.tree_util.tree_leaves(tree)
    )


def test_memory_is_reported_and_a_forced_split_gives_the_same_table(tmp_path, bars, monkeypatch):
    """The reported bytes against the real bytes of the runs the command played (states built
    again from its experiments and seeds, a chunk of them played here)."""
    calls = []
    real_run_sweep = sweep.run_sweep

    def recorded(experiments, **kwargs):
        calls.append((experiments, kwargs["seeds"], kwargs["chunk_size"]))
        return real_run_sweep(experiments, **kwargs)

    monkeypatch.setattr(sweep, "run_sweep", recorded)
    one = tmp_path / "one"
    assert cli.main([*ARGV, *MICRO, "--out", str(one)]) == 0
    result = json.loads((one / "sweep.json").read_text())
    mem = result["memory"]["tuning"]
    assert mem["batches"] == 1 and mem["runs"] == 6 and mem["peak_bytes"] > 0
    assert mem["microbatch"] == 2
    ((exp,), seeds, chunk) = calls[0]
    states = sweep.build_runs(exp, seeds)
    new_states, metrics = jax.jit(jax.vmap(lambda s: play(exp.step, s, chunk)))(states)
    # The carry (6 runs' states) is the argument, donated; the outputs are the new states and
    # every metric of a chunk, plus XLA's output tuple (one 8-byte pointer per leaf at most);
    # the peak holds at least those.
    assert mem["argument_bytes"] == mem["alias_bytes"] == nbytes(states)
    real_out = nbytes(new_states) + nbytes(metrics)
    leaves = len(jax.tree_util.tree_leaves((new_states, metrics)))
    assert real_out <= mem["output_bytes"] <= real_out + 8 * leaves
    assert mem["peak_bytes"] >= mem["output_bytes"]
    rows = _rows(one)
    assert all(int(r["peak_bytes"]) == mem["peak_bytes"] for r in rows)
    assert all(int(r["state_bytes_per_run"]) * 6 == nbytes(states) for r in rows)
    assert [r["peak_bytes"] for r in result["rows"]] == [mem["peak_bytes"]] * 3
    assert "batches: 1 of 6 runs" in (one / "sweep_summary.txt").read_text()

    split = tmp_path / "split"
    budget = int(0.7 * mem["peak_bytes"])
    assert cli.main([*ARGV, *MICRO, "--out", str(split), "--max-memory", str(budget)]) == 0
    smem = json.loads((split / "sweep.json").read_text())["memory"]["tuning"]
    assert smem["batches"] > 1 and smem["peak_bytes"] <= budget
    text = (split / "sweep_summary.txt").read_text()
    assert f"batches: {smem['batches']} of 6 runs" in text
    # The bars count trial-rounds: 6 runs x 6 rounds, and in batches the padding runs too.
    one_bar, split_bar = bars
    assert one_bar.done == one_bar.total == 6 * 6
    assert split_bar.done == split_bar.total == smem["batches"] * smem["runs_per_batch"] * 6
    drop = set(sweep.MEMORY_COLUMNS)
    same = [{k: v for k, v in r.items() if k not in drop} for r in _rows(split)]
    assert same == [{k: v for k, v in r.items() if k not in drop} for r in _rows(one)]
