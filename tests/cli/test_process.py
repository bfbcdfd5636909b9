"""The command's process settings (:mod:`bandits_jax.cli.process`): ``--threads`` /
``$BANDITS_JAX_THREADS`` validation, the environment composition of threads, host devices and XLA
compiler options (a user's own settings always win), applied before JAX starts."""

import os
import subprocess
import sys
import warnings

import pytest

from bandits_jax import cli
from bandits_jax.cli import process as threads
from bandits_jax.sim import chunks


@pytest.fixture(autouse=True)
def no_runs(monkeypatch):
    """Validation must fail before anything is compiled or played."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a chunk was compiled before the options were validated")

    monkeypatch.setattr(chunks.ChunkFn, "compiled", forbidden)


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "nan", "", "2x"])
@pytest.mark.parametrize("command", ["reproduce", "sweep", "bco"])
def test_bad_threads_is_one_line(command, value, tmp_path, capsys):
    rc = cli.main([command, f"--threads={value}", "--out", str(tmp_path / "o"), "--quiet"])
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith("bandits-jax: error: --threads") and repr(value) in lines[0]
    assert not (tmp_path / "o").exists()


def test_bad_threads_environment_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(threads.ENV_VAR, "many")
    rc = cli.main(["reproduce", "--out", str(tmp_path / "o")])
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1 and f"${threads.ENV_VAR}" in lines[0], lines
    # The option wins over the variable: then the variable is not even read.
    capsys.readouterr()
    rc = cli.main(["reproduce", "--threads", "0", "--out", str(tmp_path / "o")])
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1 and "--threads" in lines[0], lines


def test_threads_in_config_file(tmp_path, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"threads": "zero"}')
    rc = cli.main(["sweep", "--config", str(cfg), "--out", str(tmp_path / "o")])
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1 and "--threads" in lines[0], lines


@pytest.mark.parametrize(
    "value,expected", [(None, None), ("auto", None), ("AUTO", None), ("1", 1), (3, 3), (" 2 ", 2)]
)
def test_parse_threads(value, expected):
    assert threads.parse_threads(value) == expected


@pytest.mark.parametrize("value", [0, -2, True, 1.5, "1e3", "auto1"])
def test_parse_threads_rejects(value):
    with pytest.raises(ValueError, match="--threads: expected an integer >= 1 or auto"):
        threads.parse_threads(value)


def _flags(env):
    return env.get("XLA_FLAGS", "").split()


def test_environment_from_nothing():
    one = threads.thread_environment(1, {})
    assert _flags(one) == ["--xla_cpu_multi_thread_eigen=false"] and one["PJRT_NPROC"] == "1"
    four = threads.thread_environment(4, {})
    assert _flags(four) == ["--xla_cpu_multi_thread_eigen=true"] and four["PJRT_NPROC"] == "4"


def test_host_devices_get_spare_pool_threads():
    assert threads.pool_size(1) == threads.pool_size(1, devices=1) == 1
    assert threads.pool_size(2, devices=2) == 4 and threads.pool_size(1, devices=3) == 4
    env = threads.thread_environment(2, {}, devices=2)
    assert env["PJRT_NPROC"] == "4"
    assert "PJRT_NPROC" not in threads.thread_environment(2, {"NPROC": "2"}, devices=2)


SHARDED_EOFD = """
import faulthandler, sys
faulthandler.dump_traceback_later(240, exit=True)  # a deadlock fails the test, not the suite
import os
from bandits_jax.cli import process as threads
os.environ["XLA_FLAGS"] = threads.host_device_flags(os.environ.get("XLA_FLAGS", ""), 2)
threads.configure_threads(None, devices=2)
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
from bandits_jax import envs, mlogb
from bandits_jax.sim import make_rollout, sharding
K, d, m, n = 4, 100, 40, 64
hp = mlogb.section4(num_outcomes=K, dim=d, S=1.0, horizon=10_000, dtype=jnp.float64).hparams
learner = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m)
env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=1.0, dtype=jnp.float64)
keys = jax.random.split(jax.random.PRNGKey(1), n)
es, keys = sharding.shard_runs((jax.vmap(env.init)(keys), keys), sharding.run_mesh())
out = make_rollout(mlogb.interact(learner, env), 3, trials=True)(learner.init(hp), es, keys)
print(jax.device_count(), os.environ["PJRT_NPROC"], int(jnp.sum(out.regret >= 0)))
"""


@pytest.mark.long  # minutes of CPU: CI runs it after the default suite
@pytest.mark.slow
def test_sharded_trials_over_host_devices_do_not_deadlock():
    """EOFD (100, 4, 40), 64 trials sharded over 2 host devices through the library's own
    thread set-up: with a pool of one thread per device this hung (every thread blocked)."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PJRT_NPROC", "NPROC")}
    env.pop(threads.ENV_VAR, None)
    out = subprocess.run(
        [sys.executable, "-c", SHARDED_EOFD], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["2", "4", str(64 * 3)]


def test_resolve_threads():
    assert threads.resolve_threads(None) == threads.AUTO_THREADS == 1
    assert threads.resolve_threads(None, devices=4) == 4  # one thread per host device
    assert threads.resolve_threads(2, devices=4) == 2  # an explicit count wins


def test_choose_cores_least_busy():
    busy = {0: 0.9, 1: 0.1, 2: 0.5, 3: 0.1}
    assert threads.choose_cores(range(4), busy, 1) == (3,)  # tie 1 vs 3: the higher core
    assert threads.choose_cores(range(4), busy, 2) == (1, 3)
    assert threads.choose_cores([0, 2], busy, 1) == (2,)  # only allowed cores
    assert threads.choose_cores(range(3), {}, 2) == (1, 2)  # no sample: the last cores
    assert threads.choose_cores(range(4), {0: 0.02, 1: 0.0, 2: 0.6, 3: 0.7}, 1) == (1,)
    # About equally idle cores: the salt (a process id) spreads processes started together.
    idle = {c: 0.01 * c for c in range(4)}
    assert {threads.choose_cores(range(4), idle, 1, salt=p)[0] for p in range(4)} == {0, 1, 2, 3}


def test_user_xla_flags_are_kept():
    user = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4  --xla_dump_to=/x"}
    env = threads.thread_environment(1, user)
    assert _flags(env) == [
        "--xla_force_host_platform_device_count=4",
        "--xla_dump_to=/x",
        "--xla_cpu_multi_thread_eigen=false",
    ]
    assert user["XLA_FLAGS"].startswith("--xla_force")  # the input is not modified


@pytest.mark.parametrize(
    "flags",
    [
        "--xla_cpu_multi_thread_eigen=true",
        "--xla_dump_to=/x --xla_cpu_multi_thread_eigen=false",
        "--xla_cpu_multi_thread_eigen",
    ],
)
def test_user_eigen_flag_wins(flags):
    env = threads.thread_environment(1, {"XLA_FLAGS": flags})
    assert "XLA_FLAGS" not in env  # nothing of ours added, nothing of the user's changed
    assert env["PJRT_NPROC"] == "1"


def test_similar_flag_name_is_not_the_users_eigen_flag():
    env = threads.thread_environment(1, {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen_x=1"})
    assert _flags(env)[-1] == "--xla_cpu_multi_thread_eigen=false"


@pytest.mark.parametrize("var", ["PJRT_NPROC", "NPROC"])
def test_user_pool_size_wins(var):
    env = threads.thread_environment(3, {var: "8"})
    assert "PJRT_NPROC" not in env and "NPROC" not in env
    assert _flags(env) == ["--xla_cpu_multi_thread_eigen=true"]


def test_everything_set_by_the_user_changes_nothing():
    user = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=true", "NPROC": "2", "OMP_NUM_THREADS": "2"}
    assert threads.thread_environment(1, user) == {}


@pytest.mark.parametrize("n", [1, 4])
def test_lapack_gets_one_blas_thread_unless_the_user_says(n):
    assert threads.thread_environment(n, {})["OPENBLAS_NUM_THREADS"] == "1"
    for var in threads.BLAS_VARS:
        assert "OPENBLAS_NUM_THREADS" not in threads.thread_environment(n, {var: "3"})


def test_configure_after_backend_started_warns_and_changes_nothing(monkeypatch):
    import jax.numpy as jnp

    jnp.zeros(1).block_until_ready()  # the backend has started in this process
    monkeypatch.delenv("PJRT_NPROC", raising=False)
    with pytest.warns(UserWarning, match="already started"):
        assert threads.configure_threads(2) == threads.ThreadConfig(2, {}, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert threads.configure_threads("auto").environment == {}  # automatic: silent
    assert "PJRT_NPROC" not in os.environ


def test_configure_in_a_fresh_process_reaches_xla():
    """In a fresh process the variables are set before JAX starts, and JAX starts with them."""
    code = (
        "import os, jax.numpy as jnp\n"
        "from bandits_jax.cli import process as threads\n"
        "cfg = threads.configure_threads(None)\n"
        "jnp.ones(3).block_until_ready()\n"
        "cores = os.sched_getaffinity(0) if hasattr(os, 'sched_getaffinity') else None\n"
        "print(cfg.environment['PJRT_NPROC'], os.environ['XLA_FLAGS'])\n"
        "print(cfg.cores is None or set(cfg.cores) == cores)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PJRT_NPROC", "NPROC")}
    env[threads.ENV_VAR] = "2"
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [
        "2",
        "--xla_force_host_platform_device_count=1",
        "--xla_cpu_multi_thread_eigen=true",
        "True",  # narrowed to 2 cores where the machine has more (else left alone)
    ]


def test_configure_in_a_fresh_process_gives_lapack_one_blas_thread():
    """The BLAS behind jaxlib's LAPACK calls (scipy's OpenBLAS, loaded at the first call) has one
    thread (numpy's, loaded at import, keeps the machine's count)."""
    code = (
        "import jax.numpy as jnp, threadpoolctl\n"
        "from bandits_jax.cli import process as threads\n"
        "threads.configure_threads(2)\n"
        "jnp.linalg.cholesky(jnp.eye(3)).block_until_ready()\n"
        "print(sorted({p['num_threads'] for p in threadpoolctl.threadpool_info()\n"
        "              if '/scipy.libs/' in p['filepath']}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in threads.BLAS_VARS}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["[1]"]


AFFINITY_PROBE = (
    "import json, os, sys, jax.numpy as jnp\n"
    "from bandits_jax.cli import process as threads\n"
    "allowed = len(os.sched_getaffinity(0))\n"
    "# the machine's cores: the allowed ones (whole), or one more (the user narrowed the process,\n"
    "# as taskset does, to fewer cores than the machine has)\n"
    "os.cpu_count = lambda: allowed + (sys.argv[1] == 'narrowed')\n"
    "cfg = threads.configure_threads(None)\n"
    "jnp.ones(3).block_until_ready()\n"
    "print(json.dumps([cfg.threads, cfg.cores, sorted(os.sched_getaffinity(0))]))\n"
)


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity and at least two allowed cores",
)
def test_auto_keeps_a_fresh_process_on_one_core():
    """Against the process's affinity after the backend started (read from the OS): auto
    narrows a process that may use every core of the machine to one, and keeps the affinity of
    one that a user narrowed. Both cases run on any machine with two allowed cores: the probe
    is told how many cores the machine has."""
    import json

    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PJRT_NPROC", "NPROC")}
    env.pop(threads.ENV_VAR, None)

    def probe(case):
        cmd = [sys.executable, "-c", AFFINITY_PROBE, case]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    allowed = sorted(os.sched_getaffinity(0))
    n, cores, affinity = probe("whole")
    assert n == 1 and len(cores) == 1 and cores == affinity and cores[0] in allowed
    assert probe("narrowed") == [1, None, allowed]  # nothing narrowed


def test_host_device_flags_replace_a_count_and_keep_other_flags():
    flags = "--xla_dump_to=/x --xla_force_host_platform_device_count=4"
    assert threads.host_device_flags(flags, 2).split() == [
        "--xla_dump_to=/x",
        "--xla_force_host_platform_device_count=2",
    ]
    assert threads.host_device_flags("", 3) == "--xla_force_host_platform_device_count=3"


def test_idle_cores_counts_cores_under_half_busy_and_at_least_one():
    assert threads.idle_cores({0: 0.1, 1: 0.2}, allowed=[0, 1]) == 2
    assert threads.idle_cores({0: 0.95, 1: 0.2}, allowed=[0, 1]) == 1
    assert threads.idle_cores({0: 0.95, 1: 0.9}, allowed=[0, 1]) == 1  # never 0
    assert threads.idle_cores({0: 0.0, 1: 0.0, 2: 0.0}, allowed=[1, 2]) == 2  # affinity only
    assert 1 <= threads.idle_cores() <= len(os.sched_getaffinity(0))


def test_xla_options_become_flags_and_a_users_own_flag_wins():
    options = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
    assert threads.xla_flags("", options).split() == [
        "--xla_backend_optimization_level=0",
        "--xla_cpu_use_fusion_emitters=false",
    ]
    users = "--xla_dump_to=/x --xla_backend_optimization_level=2"
    assert threads.xla_flags(users, options).split() == [
        "--xla_dump_to=/x",
        "--xla_backend_optimization_level=2",  # the user's
        "--xla_cpu_use_fusion_emitters=false",
    ]
    # a flag whose name only starts like ours is not ours
    similar = "--xla_backend_optimization_level_x=1"
    assert threads.xla_flags(similar, options).split()[:2] == [
        similar,
        "--xla_backend_optimization_level=0",
    ]


def test_configure_xla_before_and_after_jax_starts():
    """In a fresh process the options are in ``XLA_FLAGS`` when JAX starts; once it has
    started nothing changes and the caller is told (``None``)."""
    code = (
        "import os\n"
        "from bandits_jax.cli import process\n"
        "print(process.configure_xla({'xla_backend_optimization_level': 0,\n"
        "                              'xla_cpu_use_fusion_emitters': False}))\n"
        "import jax.numpy as jnp\n"
        "jnp.ones(3).block_until_ready()\n"
        "print(os.environ['XLA_FLAGS'])\n"
        "print(process.configure_xla({'xla_backend_optimization_level': 1}))\n"
        "print(os.environ['XLA_FLAGS'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["XLA_FLAGS"] = "--xla_cpu_use_fusion_emitters=true"  # a user's own: it wins, and says so
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    flags = "--xla_cpu_use_fusion_emitters=true --xla_backend_optimization_level=0"
    assert out.stdout.splitlines() == [
        "{'xla_backend_optimization_level': 0, 'xla_cpu_use_fusion_emitters': True}",
        flags,
        "None",
        flags,
    ]
