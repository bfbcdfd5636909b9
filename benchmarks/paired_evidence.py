"""Paired evidence (issue 45): on classification data, LinUCB, buffered EOFD-MLogB and the exact
logistic refit at their recipes out of the box with no known bound (``S=None``, what
``mlogb.practical(..., S=None)`` is used with there); on the synthetic stream with a known bound
``S``, what ``practical`` returns in each regime of ``K d`` against the other candidates.

Settings (:data:`SETTINGS`): the digits at K = 1 with each class rewarded in turn, on the
reported (odd-indexed) half and on the whole data, and the multinomial K = 4 digits variant
(fixed outcome levels: no rewarded class, the pairs are seeds) on the same two parts. Every
learner plays the same pairs (class, seed): pair ``i`` of a draw rewards ``classes[i % C]`` and
runs on ``jax.random.key(base + i)``, the draws' bases 20000, 30000, ... (disjoint from the
tuning seeds 0-2 and the evaluation seeds 10000.. of ``mlogb_evidence``). Per setting and draw it
prints a markdown table (mean final regret +- standard error, the mean paired difference against
each reference, LinUCB and the exact refit, with its bootstrap 95% interval, the ratio of means,
the verdict of :func:`bandits_jax.sim.paired.verdict` over the draws, and ms per trial-round
after compilation: all draws' pairs run in one batch a learner) and writes JSON with the
per-pair final regrets. The known-bound settings ``synth-d-K-S`` (Section 4's stream, ``S = 4``
or 8 known, pairs are seeds) compare ``practical``'s kind with OFUL, robust and buffered EOFD and
LinUCB; the rule keeps the cheapest kind level with it unless another wins. The
high-dimensional settings (:data:`HIGH`, issue 56: the digits through 4,096 random features and
MNIST's 5,000 images as a K = 9 bandit with no known bound, a 10,000-d stream near a
10-dimensional subspace with ``S = 8`` known)
compare robust EOFD, SOFUL, LinUCB and uniform play the same way, with each learner's state in
MiB a trial (``--skip`` leaves learners out, e.g. LinUCB at d = 10,000)::

    python -m benchmarks.paired_evidence --rounds 1000 --trials 2 --json out.json

``--settings``/``--learners`` split a long run; ``--merge A.json B.json --json C.json`` joins
runs (a setting's learners from runs on the same pairs side by side) and prints the tables.
``--quick``: 40 rounds, classes 0 and 1, 2 trials a class, the reported half at K = 1 and 4.
float64, one XLA CPU thread.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from bandits_jax.cli.process import configure_threads
from bandits_jax.sim.paired import compare, verdict
from benchmarks._options import parser
from benchmarks._report import finish

# name -> (K, half of the digits: 1 the reported odd-indexed half, None the whole data), or for
# a stream with a known bound (K, d, S), the command's setting names: one per regime of
# practical's former table (K d <= 32, 32 < K d <= 128, K d > 128).
SETTINGS = {
    "digits-h1": (1, 1),
    "digits-whole": (1, None),
    "digits-k4-h1": (4, 1),
    "digits-k4-whole": (4, None),
    "synth-8-1-S4": (1, 8, 4.0),
    "synth-20-4-S4": (4, 20, 4.0),
    "synth-40-4-S4": (4, 40, 4.0),
    "synth-8-1-S8": (1, 8, 8.0),  # the same regimes at high kappa
    "synth-20-4-S8": (4, 20, 8.0),
    "synth-40-4-S8": (4, 40, 8.0),
    # the known-bound K = 1 settings of mlogb_evidence's table (the command's names)
    "synth-20-1-S8": (1, 20, 8.0),
    "synth-20-1-S1": (1, 20, 1.0),
    "lowrank-100-1-5-S8": (1, 100, 8.0),
    "heavy-200-1-1-S8": (1, 200, 8.0),
    # high dimension (issue 56): (K, d, S or None), the command's names, pairs are seeds
    "digits-rf4096": (1, 4097, None),
    "mnist5k-k9": (9, 785, None),
    "lowrank-10000-1-10-S8": (1, 10000, 8.0),
}
LEARNERS = ("linucb", "eofd-buffered", "exact")
KNOWN_LEARNERS = ("oful", "eofd-robust", "eofd-buffered", "linucb")
HIGH = ("digits-rf4096", "mnist5k-k9", "lowrank-10000-1-10-S8")
HIGH_LEARNERS = ("eofd-robust", "soful", "linucb", "uniform")
REFERENCES = ("linucb", "exact")
LABELS = {"linucb": "LinUCB", "eofd-buffered": "buffered EOFD", "exact": "exact refit",
          "oful": "OFUL", "eofd-robust": "robust EOFD", "soful": "SOFUL",
          "uniform": "uniform"}  # fmt: skip


def streamed(name: str) -> bool:
    """Whether a setting is built by ``envs.make`` from its name, its pairs seeds (the known-bound
    streams ``synth-d-K-S`` and the high-dimensional settings)."""
    return len(SETTINGS[name]) == 3


def known_bound(name: str) -> bool:
    """Whether a setting is a stream with a known bound (``synth-d-K-S``)."""
    return streamed(name) and SETTINGS[name][2] is not None


RESAMPLES, BOOT_SEED = 10_000, 0


def play(name: str, kinds: list[str], rounds: int, pairs: list[dict]) -> dict:
    """Every kind on the same ``pairs`` (class, seed): per kind the final regrets and the ms per
    trial-round of the compiled program (compiled once, outside the timing)."""
    import jax
    import jax.numpy as jnp

    from bandits_jax import envs, mlogb, sim
    from bandits_jax.envs.synthetic_mlogb import default_rewards

    K, S = SETTINGS[name][0], None
    if streamed(name):
        from bandits_jax.envs import make

        K, d, S = SETTINGS[name]
        env = make(name).env
        keys = jnp.stack([jax.random.key(p["seed"]) for p in pairs])
        env_state = jax.vmap(env.init)(keys)
    elif K == 1:
        half = SETTINGS[name][1]
        env = envs.digits(target=0, half=half)
        keys = jnp.stack([jax.random.key(p["seed"]) for p in pairs])
        classes = jnp.asarray([p["class"] for p in pairs], jnp.int32)
        env_state = jax.vmap(env.init_target)(keys, classes)
    else:
        env = envs.digits_multinomial(num_outcomes=K, half=SETTINGS[name][1])
        keys = jnp.stack([jax.random.key(p["seed"]) for p in pairs])
        env_state = jax.vmap(env.init)(keys)
    out = {}
    for kind in kinds:
        rewards = default_rewards(K) if known_bound(name) else env.rewards
        rec = mlogb.tuned(kind, num_outcomes=K, dim=env.dim, S=S, horizon=rounds,
                          rewards=list(rewards))  # fmt: skip
        state_mib = mlogb.cost.state_bytes(rec.learner, rec.hparams) / 2**20
        run = sim.make_rollout(mlogb.interact(rec.learner, env), rounds, trials=True)
        ls = rec.learner.init(rec.hparams)
        t0 = time.perf_counter()
        compiled = run.lower(ls, env_state, keys).compile()
        t1 = time.perf_counter()
        m = jax.block_until_ready(compiled(ls, env_state, keys))
        t2 = time.perf_counter()
        out[kind] = {
            "final_regret": np.asarray(m.regret.sum(-1), np.float64).tolist(),
            "ms_per_round": 1e3 * (t2 - t1) / (len(pairs) * rounds),
            "compile_s": round(t1 - t0, 2),
            "run_s": round(t2 - t1, 2),
            "state_mib": state_mib,
        }
        print(f"  {kind}: {out[kind]['run_s']} s (+{out[kind]['compile_s']} s compile)", flush=True)
    return out


def against(setting: dict, ref: str) -> dict[str, dict]:
    """Every other learner against ``ref``: its comparison on each draw and the verdict."""
    per: dict[str, list] = {}
    for draw in setting["draws"]:
        for k, c in compare(draw["final_regret"], ref, resamples=RESAMPLES,
                            seed=BOOT_SEED).items():  # fmt: skip
            per.setdefault(k, []).append(c._asdict())
    return {k: {"draws": cs, "verdict": verdict([(c["low"], c["high"]) for c in cs])}
            for k, cs in per.items()}  # fmt: skip


def judge(setting: dict) -> None:
    """Adds each learner's comparisons against each reference on every draw and the verdicts."""
    kinds = list(setting["draws"][0]["final_regret"])
    setting["comparisons"] = {
        ref: against(setting, ref) for ref in setting.get("references", REFERENCES) if ref in kinds
    }


def decide(settings: list[dict]) -> dict:
    """Per K: buffered EOFD's verdict against LinUCB on each part of the data and what
    ``practical(S=None)`` returns by the rule (buffered EOFD only where it wins on every part;
    level or behind: LinUCB, the cheaper per round)."""
    out = {}
    free = [s for s in settings if not streamed(s["name"])]
    for K in sorted({s["K"] for s in free}):
        verdicts = {
            s["name"]: s["comparisons"]["linucb"]["eofd-buffered"]["verdict"]
            for s in free
            if s["K"] == K and "eofd-buffered" in s["comparisons"].get("linucb", {})
        }
        if verdicts:
            wins = all(v == "wins" for v in verdicts.values())
            out[str(K)] = {"eofd-buffered vs linucb": verdicts,
                           "practical": "eofd-buffered" if wins else "linucb"}  # fmt: skip
    for s in (s for s in settings if streamed(s["name"])):
        pick = s["references"][0]
        if pick not in s["comparisons"]:  # a run split by --skip: judged once merged
            out[s["name"]] = {"practical": pick}
            continue
        verdicts = {k: c["verdict"] for k, c in s["comparisons"][pick].items()}
        beaten = beaten_by(s)
        ms = s["draws"][0]["ms_per_round"]
        by_rule = min((k for k in ms if not beaten[k]), key=ms.get, default=None)
        out[s["name"]] = {f"vs {pick}": verdicts, "beaten by": beaten, "practical": pick,
                          "by the rule": by_rule}  # fmt: skip
    return out


def beaten_by(setting: dict) -> dict[str, list[str]]:
    """Per learner, the learners that win against it (every pair of learners, both draws); the
    rule's pick in a setting is the cheapest learner that none beats."""
    kinds = list(setting["draws"][0]["final_regret"])
    return {ref: [k for k, c in against(setting, ref).items() if c["verdict"] == "wins"]
            for ref in kinds}  # fmt: skip


def _f(x: float) -> str:
    return f"{x:+.1f}" if abs(x) < 1e4 else f"{x:+.3g}"


def tables(settings: list[dict]) -> str:
    """The markdown tables: one per setting and draw."""
    lines = []
    for s in settings:
        refs = list(s["comparisons"])
        for j, draw in enumerate(s["draws"]):
            n = len(draw["pairs"])
            lines += [
                f"\n**{s['name']}** (K = {s['K']}, {s['part']}, T = {s['rounds']}, draw {j + 1}: "
                f"seeds {draw['base']}..{draw['base'] + n - 1}, n = {n} pairs)\n",
                "| learner | final regret | "
                + " | ".join(f"vs {LABELS[r]}: diff [95%] | ratio | verdict" for r in refs)
                + " | ms/round | MiB a trial |",
                "|---|---|" + "---|---|---|" * len(refs) + "---|---|",
            ]
            for k, r in draw["final_regret"].items():
                r = np.asarray(r)
                cells = [LABELS[k], f"{r.mean():.1f} ± {r.std(ddof=1) / math.sqrt(r.size):.1f}"]
                for ref in refs:
                    if k == ref:
                        cells += ["(reference)", "1", "—"]
                        continue
                    c = s["comparisons"][ref][k]
                    d = c["draws"][j]
                    cells += [f"{_f(d['diff'])} [{_f(d['low'])}, {_f(d['high'])}]",
                              f"{d['ratio']:.2f}", c["verdict"]]  # fmt: skip
                mib = draw.get("state_mib", {}).get(k)
                cells += [f"{draw['ms_per_round'][k]:.3f}", "-" if mib is None else f"{mib:.3g}"]
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def run_settings(a: argparse.Namespace) -> list[dict]:
    classes = [int(c) for c in a.classes.split(",")]
    out = []
    for name in a.settings.split(","):
        K, known = SETTINGS[name][0], streamed(name)
        rounds = a.rounds if K == 1 or a.k4_rounds is None else a.k4_rounds
        n = len(classes) * a.trials if K == 1 or a.k4_pairs is None else a.k4_pairs
        kinds = [k for k in a.learners.split(",") if K == 1 or k not in a.k1_only.split(",")]
        references = list(REFERENCES)
        if known:
            from bandits_jax import mlogb

            n, kinds = a.known_pairs, list(HIGH_LEARNERS if name in HIGH else KNOWN_LEARNERS)
            kinds = [k for k in kinds if k not in a.skip.split(",")]
            _, d, S = SETTINGS[name]
            references = [mlogb.practical(num_outcomes=K, dim=d, S=S, horizon=rounds).kind]
            family = {"synth": "synthetic", "lowrank": "low-rank", "heavy": "heavy-tailed",
                      "digits": "digits", "mnist5k": "MNIST 5k"}  # fmt: skip
            bound = "no known bound" if S is None else f"S = {S:g} known"
            part = f"{family[name.split('-')[0]]}, d = {d}, {bound}"
        else:
            half = SETTINGS[name][1]
            part = "whole data" if half is None else "reported (odd) half"
        s = {"name": name, "K": K, "part": part, "rounds": rounds, "learners": kinds,
             "references": references, "draws": []}  # fmt: skip
        bases = [20000 + 10000 * j for j in range(a.first_draw, a.first_draw + a.draws)]
        draws = [[{"class": classes[i % len(classes)] if K == 1 and not known else None,
                   "seed": b + i} for i in range(n)] for b in bases]  # fmt: skip
        print(f"{name}: {a.draws} draws of {n} pairs, one batch a learner", flush=True)
        res = play(name, kinds, rounds, [p for d in draws for p in d])
        for j, pairs in enumerate(draws):
            sl = slice(j * n, (j + 1) * n)
            s["draws"].append({
                "base": pairs[0]["seed"], "pairs": pairs,
                "final_regret": {k: v["final_regret"][sl] for k, v in res.items()},
                "ms_per_round": {k: v["ms_per_round"] for k, v in res.items()},
                "state_mib": {k: v["state_mib"] for k, v in res.items()},
                "seconds": {k: {"compile": v["compile_s"], "run": v["run_s"]}
                            for k, v in res.items()},
            })  # fmt: skip
        judge(s)
        out.append(s)
    return out


def merged(parts: list[dict]) -> list[dict]:
    """Settings of several runs joined by name: the learners of runs on the same pairs and
    rounds (e.g. split by ``--learners``) side by side, judged again."""
    out: dict[str, dict] = {}
    for s in parts:
        if s["name"] not in out:
            out[s["name"]] = s
            continue
        t = out[s["name"]]
        if t["rounds"] != s["rounds"]:
            raise ValueError(f"{s['name']}: runs of other rounds cannot be joined")
        t["learners"] = [k for k in LABELS if k in t["learners"] + s["learners"]]
        draws = {d["base"]: d for d in t["draws"]}
        for ds in s["draws"]:  # a new draw, or more learners on a draw's pairs
            dt = draws.setdefault(ds["base"], ds)
            if dt["pairs"] != ds["pairs"]:
                raise ValueError(f"{s['name']}: runs on other pairs cannot be joined")
            for key in ("final_regret", "ms_per_round", "state_mib", "seconds"):
                dt[key] = {**dt.get(key, {}), **ds.get(key, {})}
        t["draws"] = [draws[b] for b in sorted(draws)]
    for s in out.values():
        if streamed(s["name"]):  # judged against what practical returns now
            from bandits_jax import mlogb

            K, d, S = SETTINGS[s["name"]]
            s["references"] = [
                mlogb.practical(num_outcomes=K, dim=d, S=S, horizon=s["rounds"]).kind
            ]
        for d in s["draws"]:
            for key in ("final_regret", "ms_per_round", "state_mib", "seconds"):
                d[key] = {k: d[key][k] for k in LABELS if k in d.get(key, {})}
        judge(s)
    return list(out.values())


def main(argv: list[str] | None = None) -> dict:
    quick = "40 rounds, classes 0 and 1, 2 trials a class, the reported half at K = 1 and 4"
    p = parser(__file__, __doc__, quick=quick)
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument("--trials", type=int, default=2, help="trials per class (K = 1)")
    p.add_argument("--classes", default="0,1,2,3,4,5,6,7,8,9")
    p.add_argument("--draws", type=int, default=2)
    p.add_argument("--first-draw", type=int, default=0, help="0: seeds 20000.., 1: 30000..")
    p.add_argument("--settings", default=",".join(s for s in SETTINGS if not known_bound(s)))
    p.add_argument("--learners", default=",".join(LEARNERS))
    p.add_argument("--k1-only", default="exact", help="learners not run at K = 4 (cost)")
    p.add_argument("--k4-rounds", type=int, default=None, help="rounds at K = 4 (default --rounds)")
    p.add_argument("--k4-pairs", type=int, default=None, help="seeds a draw at K = 4")
    p.add_argument(
        "--known-pairs", type=int, default=20, help="seeds a draw, known bound and high dimension"
    )
    p.add_argument("--skip", default="", help="learners left out of the streamed settings")
    p.add_argument("--merge", nargs="+", default=None, help="JSON files of earlier runs")
    a = p.parse_args(argv)
    if a.merge:
        runs = [json.load(open(f)) for f in a.merge]
        settings = merged([s for r in runs for s in r["settings"]])
        commands = [c for r in runs for c in r["commands"]]
        commands.append("python -m benchmarks.paired_evidence " + " ".join(argv or []))
    else:
        if a.quick:
            a.rounds, a.trials, a.classes = 40, 2, "0,1"
            a.settings, a.k4_rounds, a.k4_pairs = "digits-h1,digits-k4-h1", 40, 4
        configure_threads(1)
        import jax

        jax.config.update("jax_enable_x64", True)
        settings = run_settings(a)
        commands = ["python -m benchmarks.paired_evidence " + " ".join(argv or [])]
    text = tables(settings)
    decision = decide(settings)
    print(text)
    print("decision:", json.dumps(decision))
    result = {
        "commands": commands,
        "resamples": RESAMPLES,
        "bootstrap_seed": BOOT_SEED,
        "settings": settings,
        "decision": decision,
        "tables": text,
    }
    return finish(result, a.json)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
