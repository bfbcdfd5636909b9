"""Two local CPU processes with ``jax.distributed`` play a sweep; the gathered table equals the
one-process sweep's."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bandits_jax.sim import distributed, sweep

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SETUP = textwrap.dedent(
    """
    from bandits_jax import envs, mlogb
    from bandits_jax.sim import sweep

    K, D, T, SEEDS = 1, 5, 20, [11, 12]
    GRID = sweep.grid_product(l=[0.0, 0.75], e=[0.0])


    def experiments():
        env = envs.synthetic_mlogb(num_outcomes=K, dim=D, S=2.0, min_actions=3, max_actions=5)
        rec = mlogb.section4(
            num_outcomes=K, dim=D, S=2.0, horizon=T, l=GRID["l"], e=GRID["e"], beta=0.5
        )
        learner = mlogb.eofd(num_outcomes=K, dim=D, sketch_size=2)
        step = mlogb.interact(learner, env)
        return [sweep.Experiment("EOFD", "synth", step, learner.init, rec.hparams, GRID, env.init)]
    """
)

WORKER = SETUP + textwrap.dedent(
    """
    import json, sys
    import jax
    from bandits_jax.sim import distributed

    addr, pid, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    distributed.initialize(addr, 2, pid, initialization_timeout=60)
    assert jax.process_count() == 2
    res = distributed.run_sweep(experiments(), num_rounds=T, seeds=SEEDS, gather="process0")
    if pid == 0:
        regret = res.experiments[0].metrics["regret"].tolist()
        with open(out, "w") as f:
            json.dump({"table": sweep.table(res), "regret": regret}, f)
    else:
        assert res is None
    jax.distributed.shutdown()
    """
)


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one_process():
    ns = {}
    exec(SETUP, ns)
    return sweep.run_sweep(ns["experiments"](), num_rounds=ns["T"], seeds=ns["SEEDS"])


@pytest.mark.long  # minutes of CPU: CI runs it after the default suite
@pytest.mark.slow
def test_two_processes_equal_one(tmp_path):
    out = str(tmp_path / "table.json")
    addr = f"127.0.0.1:{_free_port()}"
    env = dict(os.environ, JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    env.pop("XLA_FLAGS", None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, addr, str(i), out],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    logs = []
    try:
        ref = _one_process()  # while the two workers run
        for p in procs:
            logs.append(p.communicate(timeout=120)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log[-3000:]
    with open(out) as f:
        got = json.load(f)
    np.testing.assert_allclose(
        np.asarray(got["regret"]), ref.experiments[0].metrics["regret"], rtol=1e-10, atol=1e-12
    )
    # The memory columns describe how a sweep was played (the one-process sweep plans batches;
    # the distributed one splits runs over processes instead): the rest must agree.
    ref_rows = [
        {k: v for k, v in r.items() if k not in sweep.MEMORY_COLUMNS} for r in sweep.table(ref)
    ]
    assert len(got["table"]) == len(ref_rows) == 2
    for g, r in zip(got["table"], ref_rows, strict=True):
        assert g.keys() == r.keys()
        for k, v in r.items():
            if isinstance(v, float):
                np.testing.assert_allclose(g[k], v, rtol=1e-10, atol=1e-12, err_msg=k)
            else:
                assert g[k] == v, k


def test_share_covers_runs_once():
    for R in (1, 4, 7):
        for P in (1, 2, 3, 8):
            got = [distributed.share(R, P, p) for p in range(P)]
            runs = [i for start, stop, _ in got for i in range(start, stop)]
            assert runs == list(range(R))
            assert all(size == max(1, -(-R // P)) for _, _, size in got)


def test_bad_arguments():
    with pytest.raises(ValueError, match="process_id"):
        distributed.initialize("127.0.0.1:1", 2, 2)
    with pytest.raises(ValueError, match="coordinator_address"):
        distributed.initialize("localhost", 2, 0)
    with pytest.raises(ValueError, match="gather"):
        distributed.run_sweep([], num_rounds=1, seeds=[0], gather="some")
