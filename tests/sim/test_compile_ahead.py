"""Compiling ahead on several threads (``sim.chunks.compile_ahead``): errors and the affinity
helpers it uses (``threads.on_cores``, ``threads.compile_cores``). That the command's
programs, compiled ahead, give the library's numbers is ``tests/cli/test_library_parity.py``'s
check (the command compiles every learner ahead)."""

import os
import threading

import jax
import pytest

from bandits_jax import envs, mlogb, threads
from bandits_jax.sim.chunks import ChunkFn, DrawFn, compile_ahead
from bandits_jax.sim.runner import init_run

T, K, D = 7, 1, 4
ENV = envs.synthetic_mlogb(num_outcomes=K, dim=D, S=2.0, max_actions=5, min_actions=3)
HP = mlogb.hyperparams(lam=1.0, eta=0.5, S=2.0, beta=0.3)
LEARNERS = (mlogb.eofd(num_outcomes=K, dim=D, sketch_size=2), mlogb.oful(num_outcomes=K, dim=D))


def split_chunks():
    draws = DrawFn(mlogb.draw_round(ENV))
    fns = [ChunkFn(mlogb.respond_round(learner, ENV), draws=draws) for learner in LEARNERS]
    states = [
        init_run(learner.init(HP), ENV.init(jax.random.key(5)), jax.random.key(6))
        for learner in LEARNERS
    ]
    return draws, fns, states


def test_a_failing_job_raises_after_the_others_finish():
    done = []

    def fail():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        compile_ahead([fail, lambda: done.append(1)], workers=2)
    assert done == [1]


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_bad_workers_are_refused(workers):
    with pytest.raises(ValueError, match="workers: expected an int >= 1"):
        compile_ahead([], workers=workers)


def test_compile_cores_are_the_idle_ones_else_the_processs_own():
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    idle = {c: 0.0 for c in allowed}
    assert threads.compile_cores(idle) == tuple(allowed)
    busy = {c: 1.0 for c in allowed}
    assert threads.compile_cores(busy) == tuple(allowed)  # none idle: its own cores
    if len(allowed) > 1:
        assert threads.compile_cores({**idle, allowed[0]: 0.9}) == tuple(allowed[1:])


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux thread affinity")
def test_on_cores_moves_the_non_python_threads_and_puts_them_back():
    jax.numpy.ones(3).block_until_ready()  # XLA's threads exist

    def affinities():
        out = {}
        for name in os.listdir("/proc/self/task"):
            try:
                out[int(name)] = os.sched_getaffinity(int(name))
            except OSError:  # ended meanwhile
                pass
        return out

    # a Python thread on a core set of its own (where there are two cores): left alone
    allowed, ready, stop = sorted(os.sched_getaffinity(0)), threading.Event(), threading.Event()

    def helper():
        os.sched_setaffinity(0, {allowed[-1]})
        ready.set()
        stop.wait()

    thread = threading.Thread(target=helper)
    thread.start()
    ready.wait()
    try:
        python = {t.native_id for t in threading.enumerate()}
        before = affinities()
        one = {allowed[0]}
        with threads.on_cores(one):
            inside = affinities()
        after = affinities()
    finally:
        stop.set()
        thread.join()
    others = [t for t in before if t not in python and t in inside]
    assert others, "JAX started no threads of its own"
    assert all(inside[t] == one for t in others)
    assert all(inside[t] == before[t] for t in python if t in inside)  # Python's untouched
    assert all(after[t] == before[t] for t in before if t in after)
    assert after[thread.native_id] == {allowed[-1]}


def test_thread_groups_are_disjoint_and_as_wide_as_the_caller():
    assert threads.thread_groups(None) == []
    assert threads.thread_groups([3, 0, 1, 2], size=2) == [(0, 1), (2, 3)]
    assert threads.thread_groups([0, 1, 2], size=2) == [(0, 1)]
    assert threads.thread_groups([0], size=2) == []
    if hasattr(os, "sched_getaffinity"):
        own = sorted(os.sched_getaffinity(0))
        assert threads.thread_groups(own) == [tuple(own)]  # one group: the caller's width


def _caller_on(cores, fn):
    """``fn()`` and its thread's id, in a thread that may run on ``cores`` only (like the
    command's runs, on one core)."""
    out = {}

    def caller():
        os.sched_setaffinity(0, cores)
        out["result"] = fn(), threading.get_ident()

    thread = threading.Thread(target=caller)
    thread.start()
    thread.join()
    return out["result"]


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs thread affinity and two cores",
)
def test_each_compile_thread_runs_on_a_core_group_of_its_own():
    cores, both = sorted(os.sched_getaffinity(0))[:2], threading.Barrier(2)

    def job():
        both.wait(timeout=30)  # the two jobs run at once, on two threads
        return tuple(sorted(os.sched_getaffinity(0))), threading.get_ident()

    (got, _, used), caller = _caller_on(
        cores[:1], lambda: compile_ahead([job, job], workers=2, cores=cores)
    )
    assert used == 2 and sorted(c for c, _ in got) == [(cores[0],), (cores[1],)]
    assert caller not in {t for _, t in got}
    # a caller on both cores: one group as wide as it, so the jobs run in its own thread
    (got, _, used), caller = _caller_on(
        cores, lambda: compile_ahead([threading.get_ident] * 2, workers=2, cores=cores)
    )
    assert used == 1 and got == [caller, caller]  # reported as used, not as asked
