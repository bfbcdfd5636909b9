"""Plain-numpy references for the EOFD-MLogB variants beyond Algorithm 2 (float64, one Python
iteration per round, dense SVDs).

Written from the equations of ``bandits_jax.mlogb.eofd``'s and ``bandits_jax.mlogb.confidence``'s
docstrings and the papers, not from the JAX code; the round skeleton (selection by eq. 16/19,
the eq. 36 increment, the Hessian at ``W_{t+1}``) is :class:`~.mlogb_numpy.NumpyEOFD`'s.

* Robust Frequent Directions (Luo, Chen, Zhang & Zhang 2019; ``regularization="robust"``):
  ``Z_t = lam_t I + V diag(mu) V^T`` with ``lam_t = lam + rho_{1:t-1}/2``, used wherever Z is:
  the surrogate and its Woodbury step (eq. 8, 20-22), Lemma 2's projection (eq. 23-25, the
  ridge of ``Ztilde`` is ``lam_t``), Lemma 1's ``A(x)`` (eq. 16-19) and the
  ``||W_{s+1} - W_s||_{Z_s}`` of eq. (36) (whose coefficient ``24 eta K d / lam - 1`` keeps
  ``lam``: Lemma 9 only needs ``Z_s >= lam I``).
* An adaptive sketch size (``max_sketch_size``, ``delta_target``): at each truncation the rank
  becomes the smallest ``r'`` in ``[rank, m_max]`` whose discarded eigenvalue keeps
  ``Delta_{t+1} <= tau`` (``m_max`` if none); the radius uses the active rank.
* Fast Frequent Directions (Ghashami, Liberty, Phillips & Woodruff 2016, Algorithm 3) in
  spectral form (``sketch_rule="fast"``): the sketch holds at most ``c`` directions between
  rounds. Each round's block is added to it without truncation; when the block does not fit
  (the directions held plus K exceed ``c``), the sum is shrunk to its top m directions by
  ``delta = lambda_{m+1}`` (``rho`` is the sum of the deltas). After a shrink the sketch holds
  m directions, so ``c >= m + K`` leaves room for one round between shrinks. The radius rank is
  ``max(rank, 1)``.

The robust radius (Theorem 1, eq. 36 and 27) is derived in :meth:`NumpyEOFDVariant.beta`'s
docstring: ``Z - rho/2 I <= H <= Z + rho/2 I``, the factor ``Delta_Z = (lam + rho)/(lam + rho/2)``
in front of the sketch terms, and ``+ 2 S^2 rho_{1:n}`` (order form ``+ 2 rho/lam``) from the
telescoping; the distortion ``Delta`` in :meth:`NumpyEOFDVariant.delta_factor`'s.

Conventions as in :mod:`.mlogb_numpy` (``vec(W) = W.reshape(-1)``, outcomes ``0..K``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from references.mlogb_numpy import (
    NumpyEOFD,
    _check_int,
    _kron_col,
    _psd_sqrt_factor,
    project_spectral,
    sample_outcome,
    sigma,
)

__all__ = ["NumpyEOFDVariant", "simulate_trace"]


class NumpyEOFDVariant(NumpyEOFD):
    """EOFD-MLogB with the robust regularisation, an adaptive sketch size or the fast sketch rule
    (module docstring); with none of them it is :class:`NumpyEOFD` (Algorithm 2).

    Attributes (beyond NumpyEOFD's): ``robust``, ``fast``, ``capacity`` (the adaptive ``m_max``
    or the fast rule's ``c``, capped at K d), ``tau`` (None: fixed size), ``rank`` (the active
    rank, or the number of directions of the fast sketch), ``last_kappa`` (condition number of
    the last surrogate ``Ztilde``), ``last_discard`` (the last round's addition to ``rho``).
    ``V`` holds at most ``rank`` columns (a rank beyond the spectrum's support is padded by
    zero weights, which need no column).
    """

    def __init__(
        self,
        num_outcomes: int,
        dim: int,
        sketch_size: int,
        *,
        regularization: str = "paper",
        max_sketch_size: int | None = None,
        delta_target: float | None = None,
        sketch_rule: str = "per_round",
        buffer_size: int | None = None,
        **hparams: Any,
    ) -> None:
        super().__init__(num_outcomes, dim, sketch_size, **hparams)
        if regularization not in ("paper", "robust"):
            raise ValueError(f"regularization must be 'paper' or 'robust', got {regularization!r}")
        if sketch_rule not in ("per_round", "fast"):
            raise ValueError(f"sketch_rule must be 'per_round' or 'fast', got {sketch_rule!r}")
        if (max_sketch_size is None) != (delta_target is None):
            raise ValueError("an adaptive sketch size takes both max_sketch_size and delta_target")
        self.robust = regularization == "robust"
        self.fast = sketch_rule == "fast"
        m = self.m_eff
        self.tau = None if delta_target is None else float(delta_target)
        if self.fast:
            if self.tau is not None:
                raise ValueError("the fast rule has no adaptive size")
            # Ghashami et al.: a buffer of 2m; m + K when K > m (room for one block), <= K d.
            if buffer_size is None:
                c = m + max(m, self.K)
            else:
                c = _check_int("buffer_size", buffer_size, m + self.K)
            self.capacity = min(c, self.D)
            self.V, self.mu, self.rank = np.zeros((self.D, 0)), np.zeros(0), 0
        else:
            if buffer_size is not None:
                raise ValueError("buffer_size needs the fast rule")
            m_max = m
            if max_sketch_size is not None:
                m_max = _check_int("max_sketch_size", max_sketch_size, m)
            self.capacity = min(m_max, self.D)
            self.rank = m
        self.last_kappa = 1.0
        self.last_discard = 0.0

    # -- Z's scalar part and the distortion factors -------------------------------------------
    @property
    def lam_z(self) -> float:
        """Z's scalar part: ``lam`` (paper) or ``lam + rho_{1:t-1}/2`` (robust)."""
        return self.lam + 0.5 * self.rho if self.robust else self.lam

    def delta_factor(self, rho: float) -> float:
        """The distortion ``Delta`` (module docstring): ``1 + rho/lam``; robust
        ``1 + rho/(2 lam)``.

        The least ``Delta`` with ``Z <= Delta H`` and ``H <= Delta Z``: paper ``1 + rho/lam``
        (``H <= Z + rho I`` and ``Z >= lam I``); robust ``1 + rho/(2 lam)`` (``Z <= H + rho/2 I``
        and ``H >= lam I``, which is also ``>= Delta_Z``, :meth:`beta`)."""
        return 1.0 + rho / (2.0 * self.lam if self.robust else self.lam)

    def front_factor(self, rho: float) -> float:
        """Lemma 5/12's least ``c`` with ``H <= c Z``: ``1 + rho/lam`` (paper),
        ``(lam + rho)/(lam + rho/2)`` (robust)."""
        if self.robust:
            return (self.lam + rho) / (self.lam + 0.5 * rho)
        return 1.0 + rho / self.lam

    def radius_rank(self) -> int:
        """Lemma 6's m: ``m_eff``, the active rank (adaptive), ``max(rank, 1)`` (fast)."""
        return max(self.rank, 1) if self.fast else self.rank

    def _sketch_stats(self) -> tuple[int, float]:
        return self.radius_rank(), self.rho

    def z_dense(self) -> np.ndarray:
        """``Z = lam_t I + V diag(mu) V^T`` as a dense matrix (for checks only)."""
        return self.lam_z * np.eye(self.D) + self.gram()

    def gram(self) -> np.ndarray:
        """The sketch ``V diag(mu) V^T`` (dense)."""
        return (self.V * self.mu) @ self.V.T

    # -- the radius: eq. (36) / (27) with the robust changes (module docstring) ------------------
    def beta(self) -> float:
        """``beta`` after ``n`` updates: eq. (36) ("theory") or eq. (27) ("order") read as
        :meth:`NumpyEOFD.beta`, with ``front_factor`` in front of the sketch terms and, robust,
        ``+ 2 S^2 rho`` (theory) or ``+ 2 rho/lam`` (order); scaled by ``beta_scale``.

        The robust radius (Theorem 1, eq. 36 and 27), derived. ``M`` is the sum of the absorbed
        Hessians, ``H = lam I + M`` (what Lemma 6/13's self-normalised bound controls),
        ``G = V diag(mu) V^T``, ``rho = rho_{1:t-1}``; FD gives ``G <= M <= G + rho I``, so with
        ``Z = (lam + rho/2) I + G``:

        1. ``Z - rho/2 I <= H <= Z + rho/2 I`` (the paper's ``Z <= H <= Z + rho I`` is one-sided).
        2. Lemma 5/12 needs the least ``c`` with ``H <= c Z``. In a unit direction ``v``,
           ``v^T H v <= lam + rho + g`` and ``v^T Z v = lam + rho/2 + g`` (``g = v^T G v >= 0``);
           the ratio decreases in ``g``, so ``c`` is its value at ``g = 0``,
           ``Delta_Z = (lam + rho)/(lam + rho/2) < 2``. It replaces the paper's
           ``Delta = 1 + rho/lam`` in front of eq. (36)'s third line and of eq. (27).
        3. Lemma 6/13 bound ``log det H``, which does not involve Z: the terms
           ``K d ln Delta^{lam/2} + m ln(1 + 2 D^2 n/(m lam))`` (``ln Delta^{lam/2}`` read as
           ``ln(1 + 2 rho/lam)``, as in ``NumpyEOFD.beta``) and eq. (27)'s ``K d ln Delta`` stay.
        4. The telescoping after eq. (34) used ``Z_{t+1} <= Z_t + grad^2 l_t(W_{t+1})``. A
           truncation that discards ``sigma2_t`` gives ``G_{t+1} = G_t + grad^2 l_t - E_t`` with
           ``0 <= E_t <= sigma2_t I`` and the robust ridge grows by ``sigma2_t/2``, so
           ``Z_{t+1} - Z_t - grad^2 l_t <= sigma2_t/2 I``: each step loses at most
           ``sigma2_t/2 ||W_* - W_{t+1}||^2 <= 2 S^2 sigma2_t`` (both points in the S-ball), in
           all ``+ 2 S^2 rho_{1:n}`` to the theory radius. Eq. (27) is eq. (36) with
           ``lam S^2 = O(1)``, i.e. ``S^2 = O(1/lam)``: the order form gains ``+ 2 rho/lam``."""
        if self.beta_mode == "fixed":
            return self.beta_value
        K, d, n, lam, rho = self.K, self.d, self.n, self.lam, self.rho
        m = self.radius_rank()
        front = self.front_factor(rho)
        lk = math.log(K + 1)
        if self.beta_mode == "order":
            val = (
                front
                * lk
                * (lk + math.log(n + 1))
                * (m * math.log(n + 1) + K * d * math.log1p(rho / lam) - math.log(self.delta))
            )
            if self.robust:
                val += 2.0 * rho / lam
            return max(self.beta_scale * val, 0.0)
        eta, S, dx = self.eta, self.S, self.action_bound
        val = (
            lam * S * S
            + 2.0
            * eta
            * (dx * S + lk + 2.0 * math.log((K + 1) * n + 2))
            * (1.25 + 4.0 * math.log(math.sqrt(1.0 + 2.0 * n) / self.delta))
            + 2.0 * eta * (2.0 + lk)
            + (math.sqrt(6.0) * eta / (12.0 * K * d))
            * lam
            * front
            * (K * d * math.log1p(2.0 * rho / lam) + m * math.log1p(2.0 * dx * dx * n / (m * lam)))
            + self.acc
        )
        if self.robust:
            val += 2.0 * S * S * rho
        return max(self.beta_scale * val, 0.0)

    # -- Z in the round's computations ---------------------------------------------------------
    def a_matrix(self, actions: np.ndarray) -> np.ndarray:
        """Lemma 1, eq. (18) with Z's scalar part ``lam_t``:
        ``A_ij = sum_k (1/(mu_k + lam_t) - 1/lam_t) <x,u_ki><x,u_kj> + ||x||^2/lam_t delta_ij``."""
        x = self._as_actions(actions)
        K, d, r = self.K, self.d, self.V.shape[1]
        lam = self.lam_z
        proj = np.einsum("na,iak->nik", x, self.V.reshape(K, d, r))  # <x_n, u_ki>
        c = -self.mu / (lam * (lam + self.mu))
        a = (proj * c) @ proj.transpose(0, 2, 1)
        a = 0.5 * (a + a.transpose(0, 2, 1))
        a += (np.einsum("na,na->n", x, x) / lam)[:, None, None] * np.eye(K)
        return a

    def _znorm2(self, v: np.ndarray) -> float:
        p = self.V.T @ v
        return self.lam_z * float(v @ v) + float(self.mu @ (p * p))

    def _step_and_project(
        self, w: np.ndarray, g: np.ndarray, gs: np.ndarray, x: np.ndarray
    ) -> tuple[np.ndarray, float, int, bool]:
        # Eq. 20-22 with ridge lam_t: Ztilde = lam_t I + Vt diag(mut) Vt^T from one SVD; eq. 8 by
        # Woodbury; Lemma 2 (eq. 23-25) in the same Ztilde.
        lam = self.lam_z
        f = math.sqrt(self.eta) * _psd_sqrt_factor(gs)
        c = np.concatenate([self.V * np.sqrt(self.mu), _kron_col(f, x)], axis=1)
        vt, sv, _ = np.linalg.svd(c, full_matrices=False)
        mut = sv * sv
        self.last_kappa = (lam + float(mut.max(initial=0.0))) / lam
        zinv_g = (g - vt @ (mut / (lam + mut) * (vt.T @ g))) / lam
        w_prime = w - self.eta * zinv_g
        return project_spectral(w_prime, vt, mut, lam, self.S)

    # -- the sketch -------------------------------------------------------------------------------
    def _absorb(self, gs_new: np.ndarray, x: np.ndarray) -> None:
        # The sketch plus the new block B B^T (eq. 12-14): one SVD of [V mu^{1/2}, B].
        b = _kron_col(_psd_sqrt_factor(gs_new), x)
        c = np.concatenate([self.V * np.sqrt(self.mu), b], axis=1)
        u, sv, _ = np.linalg.svd(c, full_matrices=False)
        ev = sv * sv  # eigenvalues of G + B B^T, descending

        def ev_at(j: int) -> float:  # lambda_{j+1}; 0 beyond the spectrum's support
            return float(ev[j]) if j < ev.shape[0] else 0.0

        if self.fast:
            # Directions: the numerical rank of [V mu^{1/2}, B].
            count = int(np.sum(sv > sv[0] * max(c.shape) * np.finfo(float).eps)) if sv.size else 0
            if self.rank + self.K > self.capacity:  # the incoming block does not fit: shrink
                keep = min(count, self.m_eff)
                delta = ev_at(self.m_eff)
                self.V, self.mu, self.rank = u[:, :keep], ev[:keep] - delta, keep
            else:
                delta = 0.0
                self.V, self.mu, self.rank = u[:, :count], ev[:count], count
            self.rho += delta
            self.last_discard = delta
            return
        if self.tau is None:
            rank = self.rank
        else:
            # Smallest r' in [rank, m_max] whose discard keeps Delta_{t+1} <= tau, else m_max.
            fits = [
                j
                for j in range(self.rank, self.capacity + 1)
                if self.delta_factor(self.rho + ev_at(j)) <= self.tau
            ]
            rank = fits[0] if fits else self.capacity
        tail = ev_at(rank)  # eq. 15: sigma_{r'+1}^2 (0 when it does not exist, errata 1)
        keep = min(rank, ev.shape[0])
        self.V, self.mu, self.rank = u[:, :keep], ev[:keep] - tail, rank
        self.rho += tail
        self.last_discard = tail


def simulate_trace(
    learner: NumpyEOFDVariant,
    W_star: np.ndarray,
    actions: np.ndarray,
    mask: np.ndarray | None,
    uniforms: np.ndarray,
    rewards: np.ndarray | None = None,
) -> dict:
    """:func:`~.mlogb_numpy.simulate` that records every round.

    Returns a dict of per-round arrays (leading axis T): ``chosen``, ``y``, ``regret``,
    ``index`` (T, N) the selection index of every action (eq. 16/19), ``beta`` the radius it
    used, ``projected``, and after the update ``W`` (T, K, d), ``rho``, ``rank``, ``acc``,
    ``discard`` (the round's addition to ``rho``), ``kappa`` (the surrogate's condition
    number), ``factor`` (a list of ``V diag(mu)^{1/2}``, so the sketch is ``F F^T``).
    """
    w_star = np.asarray(W_star, dtype=np.float64)
    acts = np.asarray(actions, dtype=np.float64)
    T, N = acts.shape[:2]
    valid = np.ones((T, N), bool) if mask is None else np.asarray(mask, bool)
    u = np.asarray(uniforms, dtype=np.float64)
    r = learner.rewards if rewards is None else np.asarray(rewards, dtype=np.float64)
    keys = ("chosen", "y", "regret", "index", "beta", "projected", "W", "rho", "rank", "acc")
    out: dict = {k: [] for k in (*keys, "discard", "kappa", "factor")}
    for t in range(T):
        out["beta"].append(learner.beta())
        out["index"].append(learner.index(acts[t]))
        i = learner.select(acts[t], valid[t])
        x = acts[t, i]
        s, s0 = sigma(w_star @ x)
        y = sample_outcome(s, float(s0), float(u[t]))
        info = learner.update(x, y)
        expected = sigma(acts[t] @ w_star.T)[0] @ r
        out["regret"].append(expected[valid[t]].max() - expected[i])
        out["chosen"].append(i)
        out["y"].append(y)
        out["projected"].append(info["projected"])
        out["W"].append(learner.W.copy())
        out["rho"].append(learner.rho)
        out["rank"].append(learner.rank)
        out["acc"].append(learner.acc)
        out["discard"].append(learner.last_discard)
        out["kappa"].append(learner.last_kappa)
        out["factor"].append(learner.V * np.sqrt(learner.mu))
    return {k: (v if k == "factor" else np.asarray(v)) for k, v in out.items()}
