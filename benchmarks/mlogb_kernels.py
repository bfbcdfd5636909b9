"""Where one EOFD-MLogB round spends its time, kernel by kernel (XLA's compiled program).

Run as ``python -m benchmarks.mlogb_kernels`` (``--case D,K,m`` any number of times, default the
paper's three smaller sizes; ``--json PATH``). Method: the round of ``benchmarks.mlogb_speed``
(replayed stream, select then update, through the library's runner, float64, one core) is
compiled, run once, then run ``--repeats`` times under ``jax.profiler`` with a Perfetto trace;
every kernel of XLA's CPU runtime is one trace event. Printed per case: the wall time per round
without the profiler, and the kernels with the largest time per round under it, with how many
times each runs per round (above 1: inside a loop, e.g. the secular root iteration) and the
HLO shape and operation they compute. A ``while`` or ``conditional`` entry includes the kernels
it runs (which are listed too). The profiler adds a fixed cost to every kernel, so small kernels
and loops of them look more expensive than they are: read the shares of the large kernels
(products, LAPACK calls such as ``eigh``) and the loop counts, not the sum.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import re
import tempfile
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bandits_jax import mlogb  # noqa: E402
from benchmarks._device import add_device_option, select_device  # noqa: E402
from benchmarks._report import finish  # noqa: E402
from benchmarks.mlogb_speed import _stream, replay_round  # noqa: E402

CASES = [(100, 4, 40), (400, 1, 40), (785, 1, 78)]


def _compiled_round(d: int, K: int, m: int, rounds: int):
    """The jitted ``rounds``-round replay run of EOFD (as in ``mlogb_speed``), compiled, and
    its start state."""
    hp = mlogb.section4(num_outcomes=K, dim=d, S=1.0, horizon=10_000, dtype=jnp.float64).hparams
    learner = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m)
    run, s0 = replay_round(learner, hp, _stream(K, d, rounds), jnp.float64)
    jax.block_until_ready(run(s0))
    return run, s0


def _instructions(hlo: str) -> dict[str, str]:
    """Instruction name -> ``shape op(`` of every instruction in the compiled HLO text."""
    out = {}
    for line in hlo.splitlines():
        m = re.match(r"\s*(?:ROOT )?%([\w.-]+) = (\(.*?\)|\S+) ([\w-]+)\(", line)
        if m:
            out[m.group(1)] = f"{m.group(2)} {m.group(3)}"
    return out


def profile_case(d: int, K: int, m: int, rounds: int, repeats: int, top: int) -> dict:
    run, s0 = _compiled_round(d, K, m, rounds)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(run(s0))
        times.append(time.perf_counter() - t0)
    per_round_ms = 1e3 * float(np.median(times)) / rounds
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=True):
            for _ in range(repeats):
                jax.block_until_ready(run(s0))
        (path,) = glob.glob(f"{tmp}/**/perfetto_trace.json.gz", recursive=True)
        with gzip.open(path) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    shapes = _instructions(run.lower(s0).compile().as_text())
    dur, count = collections.Counter(), collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("name") in shapes:
            dur[e["name"]] += e.get("dur", 0)
            count[e["name"]] += 1
    n = repeats * rounds
    kernels = [
        {
            "kernel": name,
            "us_per_round_profiled": total / n,
            "calls_per_round": count[name] / n,
            "hlo": shapes[name],
        }
        for name, total in dur.most_common(top + 1)
        if count[name] >= n  # the scan's own loop runs once per repeat, not per round
    ][:top]
    print(f"({d}, {K}, {m}): {per_round_ms:.3f} ms per round without the profiler")
    for k in kernels:
        print(
            f"  {k['us_per_round_profiled']:8.2f} us/round  x{k['calls_per_round']:5.2f}  "
            f"{k['kernel']:<28} {k['hlo']}"
        )
    return {"d": d, "K": K, "m": m, "ms_per_round": per_round_ms, "kernels": kernels}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--case", action="append", default=None, help="D,K,m (repeatable)")
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--top", type=int, default=15, help="kernels printed per case")
    p.add_argument("--json", type=str, default=None)
    add_device_option(p)
    args = p.parse_args(argv)
    select_device(args)
    cases = [tuple(int(v) for v in c.split(",")) for c in args.case] if args.case else CASES
    rows = [profile_case(d, K, m, args.rounds, args.repeats, args.top) for d, K, m in cases]
    return finish({"rounds": args.rounds, "repeats": args.repeats, "cases": rows}, args.json)


if __name__ == "__main__":
    main()
