"""Plain-numpy references for EOFD-MLogB and OFUL-MLogB (one Python iteration per round).

Implements the EOFD-MLogB paper (eofd-mlogb-frequent-directions), Section 3:

* Algorithm 1 (block frequent directions, eq. 12-15): one full SVD per sketch update, with
  ``m_eff = min(m, Kd)`` and a missing ``(m+1)``-th singular value read as 0 (ERRATA 1).
* Algorithm 2: selection by eq. 16 (K = 1) or eq. 19 with Lemma 1's K x K matrix, eq. 18
  (K >= 2); the surrogate Hessian by eq. 20-22 (an SVD); the Woodbury gradient step, eq. 8; the
  Frobenius-ball projection of Lemma 2, eq. 23-25, solved by Newton on ``1/sqrt(f) = 1/S``
  (ERRATA 3) with a bisection fallback.
* The confidence radius: eq. 36 of Appendix B.2 ("theory") or the order form eq. 27 ("order").
* OFUL-MLogB (Section 2.1, eq. 3-5 and 10) with the dense ``Kd x Kd`` Hessian.

These are the independent references that the JAX learners of ``bandits_jax.mlogb`` are tested
against, and the numpy side of speed benchmarks: loops run over rounds only, everything within a
round is batched numpy. Everything is float64.

Conventions: ``vec(W) = W.reshape(-1)`` (C order), so block ``k`` of ``vec(W)`` is row ``k`` of
``W``; ``I_K kron x`` is ``Kd x K``; the Hessian of the loss is ``kron(grad_sigma(Wx), x x^T)``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = ["NumpyEOFD", "NumpyOFUL", "sigma", "grad_sigma", "sample_outcome", "simulate"]

_TIE_RTOL = 1e-9  # selection tie rule: lowest index within this relative distance of the max
_ROOT_RTOL = 1e-13  # projection: | ||w_new|| - S | <= _ROOT_RTOL * S
_ROOT_STEP_CAP = 200


# --------------------------------------------------------------------------------------------
# Multinomial logistic function (Appendix B.1, with exp(z_k) for exp(x_k): ERRATA 5).
# --------------------------------------------------------------------------------------------
def sigma(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic probabilities, computed stably.

    Args:
      z: logits of shape ``(..., K)``.

    Returns:
      ``(s, s0)``: ``s[..., k] = exp(z_k) / (1 + sum_j exp(z_j))`` of shape ``(..., K)`` and the
      probability of outcome 0, ``s0 = 1 / (1 + sum_j exp(z_j))``, of shape ``(...)``.
    """
    z = np.asarray(z, dtype=np.float64)
    zmax = np.maximum(z.max(axis=-1, keepdims=True), 0.0)
    e = np.exp(z - zmax)
    e0 = np.exp(-zmax)
    denom = e0 + e.sum(axis=-1, keepdims=True)
    return e / denom, (e0 / denom)[..., 0]


def grad_sigma(s: np.ndarray) -> np.ndarray:
    """``diag(s) - s s^T`` (batched over leading axes) for probabilities ``s`` of shape (..., K)."""
    k = s.shape[-1]
    return s[..., :, None] * np.eye(k) - s[..., :, None] * s[..., None, :]


def _psd_sqrt_factor(g: np.ndarray) -> np.ndarray:
    """``P D^{1/2}`` with ``P D P^T = eigh(g)`` and ``D`` clipped at 0 (ERRATA 4), eq. 12-13."""
    evals, evecs = np.linalg.eigh(g)
    return evecs * np.sqrt(np.clip(evals, 0.0, None))


def _kron_col(f: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``kron(f, x[:, None])`` for ``f`` (K, K) and ``x`` (d,): the ``Kd x K`` block factor."""
    k = f.shape[0]
    return (f[:, None, :] * x[None, :, None]).reshape(k * x.shape[0], f.shape[1])


def sample_outcome(p_outcomes: np.ndarray, s0: float, u: float) -> int:
    """Outcome from a uniform ``u`` in [0, 1), shared with the JAX environment.

    ``y = min(searchsorted(cumsum([s0, s_1..s_K]), u, side="right"), K)``.
    """
    p = np.concatenate([[s0], np.asarray(p_outcomes, dtype=np.float64)])
    k = p.shape[0] - 1
    return int(min(np.searchsorted(np.cumsum(p), u, side="right"), k))


# --------------------------------------------------------------------------------------------
# Lemma 2: projection onto the Frobenius ball in the Ztilde norm.
# --------------------------------------------------------------------------------------------
def project_spectral(
    w_prime: np.ndarray, vt: np.ndarray, mut: np.ndarray, lam: float, radius: float
) -> tuple[np.ndarray, float, int, bool]:
    """``argmin_{||w|| <= S} ||w - w'||^2_Ztilde`` with ``Ztilde = lam I + Vt diag(mut) Vt^T``.

    Lemma 2: if ``||w'|| <= S`` the answer is ``w'``; else ``w = (Ztilde + nu I)^{-1} Ztilde w'``
    (eq. 23) with ``nu > 0`` the root of ``f(nu) = S^2`` (eq. 24-25). The residual coefficient
    ``||w'||^2 - ||Vt^T w'||^2`` is clipped at 0 (ERRATA 2). The root is found by Newton on the
    concave increasing ``h(nu) = 1/sqrt(f(nu)) - 1/S`` from ``nu = 0`` (monotone from below,
    ERRATA 3), inside the bracket ``[0, (max(mut) + lam)(||w'||/S - 1)]`` (where ``f <= S^2``)
    with bisection whenever a Newton step stalls or leaves the bracket. Convergence is judged on
    the norm: ``|sqrt(f(nu)) - S| <= 1e-13 S``.

    Args:
      w_prime: the unprojected point ``vec(W')`` of shape (Kd,).
      vt: orthonormal columns ``Vtilde`` of shape (Kd, q).
      mut: eigenvalues ``mutilde >= 0`` of shape (q,).
      lam: the ridge ``lam > 0``.
      radius: the ball radius ``S > 0``.

    Returns:
      ``(w_new, nu, steps, projected)``.
    """
    nrm2 = float(w_prime @ w_prime)
    if math.sqrt(nrm2) <= radius:
        return w_prime.copy(), 0.0, 0, False
    c = vt.T @ w_prime
    c2 = c * c
    r0 = max(nrm2 - float(c2.sum()), 0.0)
    b = mut + lam  # eigenvalues of Ztilde on the span of Vt

    def f_df(nu: float) -> tuple[float, float]:
        q0 = lam / (lam + nu)
        qi = b / (b + nu)
        t0 = r0 * q0 * q0
        ti = c2 * qi * qi
        f = t0 + float(ti.sum())
        df = -2.0 * (t0 / (lam + nu) + float((ti / (b + nu)).sum()))
        return f, df

    tol = _ROOT_RTOL * radius
    lo = 0.0
    bmax = float(b.max()) if b.size else lam
    hi = max(bmax, lam) * (math.sqrt(nrm2) / radius - 1.0)
    nu = 0.0
    steps = 0
    while steps < _ROOT_STEP_CAP:
        f, df = f_df(nu)
        root_f = math.sqrt(f)
        if abs(root_f - radius) <= tol:
            # One polishing Newton step (quadratic convergence: to rounding level), kept only if
            # it does not worsen the norm residual.
            h = 1.0 / root_f - 1.0 / radius
            dh = -df / (2.0 * f * root_f)
            if h != 0.0 and dh > 0.0:
                nu_p = nu - h / dh
                if math.isfinite(nu_p) and nu_p >= 0.0:
                    f_p, _ = f_df(nu_p)
                    if abs(math.sqrt(f_p) - radius) <= abs(root_f - radius):
                        nu = nu_p
                        steps += 1
            break
        if root_f > radius:
            lo = nu
        else:
            hi = nu
        steps += 1
        # Newton on h = f^{-1/2} - 1/S: h' = -f'/(2 f^{3/2}).
        h = 1.0 / root_f - 1.0 / radius
        dh = -df / (2.0 * f * root_f)
        nu_next = nu - h / dh if dh > 0.0 else math.nan
        if not (math.isfinite(nu_next) and lo < nu_next < hi):
            nu_next = 0.5 * (lo + hi)
            if not lo < nu_next < hi:  # bracket at float resolution
                nu = nu_next
                break
        nu = nu_next
    w_new = (lam / (lam + nu)) * w_prime + (nu / (lam + nu)) * (vt @ (mut / (lam + nu + mut) * c))
    return w_new, float(nu), steps, True


# --------------------------------------------------------------------------------------------
# Learners.
# --------------------------------------------------------------------------------------------
def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_positive(name: str, value: object) -> float:
    v = float(value)
    if not (math.isfinite(v) and v > 0.0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


class _NumpyMLogB:
    """Shared parts of EOFD-MLogB and OFUL-MLogB: radius, scores, selection, update skeleton."""

    def __init__(
        self,
        num_outcomes: int,
        dim: int,
        *,
        lam: float,
        eta: float,
        S: float,
        rewards: np.ndarray | None = None,
        beta: float | str = 1.0,
        beta_scale: float = 1.0,
        delta: float = 0.01,
        action_bound: float = 1.0,
        lipschitz: float = 1.0,
    ) -> None:
        self.K = _check_int("num_outcomes", num_outcomes, 1)
        self.d = _check_int("dim", dim, 1)
        self.D = self.K * self.d
        self.lam = _check_positive("lam", lam)
        self.eta = _check_positive("eta", eta)
        self.S = _check_positive("S", S)
        if rewards is None:
            r = np.ones(self.K)
        else:
            r = np.asarray(rewards, dtype=np.float64).reshape(-1)
            if r.shape != (self.K,):
                raise ValueError(
                    f"rewards must have length num_outcomes={self.K}, got shape {np.shape(rewards)}"
                )
            if not np.all(np.isfinite(r)):
                raise ValueError(f"rewards must be finite, got {r}")
        self.rewards = r
        if isinstance(beta, str):
            if beta not in ("theory", "order"):
                raise ValueError(f"beta must be a float >= 0, 'theory' or 'order', got {beta!r}")
            self.beta_mode = beta
            self.beta_value = math.nan
        else:
            b = float(beta)
            if not (math.isfinite(b) and b >= 0.0):
                raise ValueError(f"beta must be a float >= 0, 'theory' or 'order', got {beta!r}")
            self.beta_mode = "fixed"
            self.beta_value = b
        self.beta_scale = float(beta_scale)
        if not (math.isfinite(self.beta_scale) and self.beta_scale >= 0.0):
            raise ValueError(f"beta_scale must be a finite number >= 0, got {beta_scale!r}")
        self.delta = float(delta)
        if not 0.0 < self.delta < 1.0:
            raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
        self.action_bound = _check_positive("action_bound", action_bound)
        self.lipschitz = float(lipschitz)
        if not (math.isfinite(self.lipschitz) and self.lipschitz >= 0.0):
            raise ValueError(f"lipschitz must be a finite number >= 0, got {lipschitz!r}")
        self.W = np.zeros((self.K, self.d))
        self.n = 0
        self.acc = 0.0

    # -- subclass hooks ------------------------------------------------------------------------
    def _sketch_stats(self) -> tuple[int, float]:  # (m_eff, rho)
        raise NotImplementedError

    def a_matrix(self, actions: np.ndarray) -> np.ndarray:
        """``A(x) = (I_K kron x)^T Z^{-1} (I_K kron x)`` for actions (N, d): shape (N, K, K)."""
        raise NotImplementedError

    def _znorm2(self, v: np.ndarray) -> float:  # ||v||_Z^2 with the current Z
        raise NotImplementedError

    def _step_and_project(
        self, w: np.ndarray, g: np.ndarray, gs: np.ndarray, x: np.ndarray
    ) -> tuple[np.ndarray, float, int, bool]:
        raise NotImplementedError

    def _absorb(self, gs_new: np.ndarray, x: np.ndarray) -> None:
        raise NotImplementedError

    # -- confidence radius -----------------------------------------------------------------------
    def beta(self) -> float:
        """The confidence radius ``beta_t`` after ``n`` completed updates.

        "theory": eq. 36 with ``t -> n``, ``W_1 = 0`` and ``ln Delta^{lam/2}`` read as
        ``ln(1 + 2 rho / lam)``, plus the running sum ``acc`` of its last line, scaled by
        ``beta_scale`` and clipped at 0. "order": eq. 27 with ``ln K -> ln(K+1)`` and
        ``ln t -> ln(n+1)``, scaled by ``beta_scale``.
        """
        if self.beta_mode == "fixed":
            return self.beta_value
        K, d, n, lam = self.K, self.d, self.n, self.lam
        m_eff, rho = self._sketch_stats()
        big_delta = 1.0 + rho / lam
        lk = math.log(K + 1)
        if self.beta_mode == "order":
            val = (
                big_delta
                * lk
                * (lk + math.log(n + 1))
                * (m_eff * math.log(n + 1) + K * d * math.log(big_delta) + math.log(1 / self.delta))
            )
            return self.beta_scale * val
        eta, S, dx = self.eta, self.S, self.action_bound
        t1 = lam * S * S
        t2 = (
            2.0
            * eta
            * (dx * S + lk + 2.0 * math.log((K + 1) * n + 2))
            * (1.25 + 4.0 * math.log(math.sqrt(1.0 + 2.0 * n) / self.delta))
        )
        t3 = 2.0 * eta * (2.0 + lk)
        t4 = (
            (math.sqrt(6.0) * eta / (12.0 * K * d))
            * lam
            * big_delta
            * (
                K * d * math.log(1.0 + 2.0 * rho / lam)
                + m_eff * math.log(1.0 + 2.0 * dx * dx * n / (m_eff * lam))
            )
        )
        return max(self.beta_scale * (t1 + t2 + t3 + t4 + self.acc), 0.0)

    # -- selection -------------------------------------------------------------------------------
    def _as_actions(self, actions: np.ndarray) -> np.ndarray:
        x = np.asarray(actions, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"actions must have shape (N, {self.d}), got {x.shape}")
        return x

    def index(self, actions: np.ndarray) -> np.ndarray:
        """Selection index per action: the logit of eq. 16 (K = 1) or ``R_t(x)`` of eq. 19."""
        x = self._as_actions(actions)
        beta = self.beta()
        a = self.a_matrix(x)
        z = x @ self.W.T  # (N, K)
        if self.K == 1:
            return z[:, 0] + math.sqrt(beta) * np.sqrt(np.maximum(a[:, 0, 0], 0.0))
        s, _ = sigma(z)
        r = self.rewards
        g = s * r - s * (s @ r)[:, None]  # grad_sigma(W x) @ r
        quad = np.einsum("ni,nij,nj->n", g, a, g)
        lam_max = np.linalg.eigvalsh(a)[:, -1]
        return (
            s @ r
            + math.sqrt(beta) * np.sqrt(np.maximum(quad, 0.0))
            + 0.5 * float(np.abs(r).sum()) * beta * lam_max
        )

    def scores(self, actions: np.ndarray) -> np.ndarray:
        """Optimistic rewards ``R_t(x)`` (eq. 5 / eq. 19); for K = 1 the sigmoid of the index."""
        idx = self.index(actions)
        if self.K == 1:
            return sigma(idx[:, None])[0][:, 0]
        return idx

    def select(self, actions: np.ndarray, mask: np.ndarray | None = None) -> int:
        """Index of the chosen action: the lowest valid ``i`` with ``v_i >= vmax - 1e-9 |vmax|``."""
        values = self.index(actions)
        valid = np.ones(values.shape, bool) if mask is None else np.asarray(mask, bool)
        if valid.shape != values.shape:
            raise ValueError(f"mask must have shape {values.shape}, got {valid.shape}")
        valid = valid & ~np.isnan(values)
        if not valid.any():
            raise ValueError("select needs at least one valid (masked-in, non-NaN) action")
        vmax = values[valid].max()
        cand = valid & (values >= vmax - _TIE_RTOL * abs(vmax))
        return int(np.argmax(cand))

    # -- update (Algorithm 2, after the feedback) ------------------------------------------------
    def update(self, x: np.ndarray, y: int) -> dict:
        """One round of Algorithm 2 after observing outcome ``y`` in {0, ..., K} for action ``x``.

        Returns:
          ``{"projected": bool, "nu": float, "newton_steps": int}``.
        """
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.d,):
            raise ValueError(f"x must have shape ({self.d},), got {x.shape}")
        if isinstance(y, bool) or not isinstance(y, numbers.Integral) or not 0 <= y <= self.K:
            raise ValueError(f"y must be an integer in [0, {self.K}], got {y!r}")
        w = self.W.reshape(-1)
        s, _ = sigma(self.W @ x)
        e_y = np.zeros(self.K)
        if y >= 1:
            e_y[y - 1] = 1.0
        g = np.outer(s - e_y, x).reshape(-1)  # gradient of the loss at W_t
        w_new, nu, steps, projected = self._step_and_project(w, g, grad_sigma(s), x)
        dw = w_new - w
        w_new_mat = w_new.reshape(self.K, self.d)
        dz = (w_new_mat - self.W) @ x
        self.acc += 2.0 * math.sqrt(6.0) * self.eta * self.lipschitz * self.S * float(dz @ dz) + (
            24.0 * self.eta * self.K * self.d / self.lam - 1.0
        ) * self._znorm2(dw)
        s_new, _ = sigma(w_new_mat @ x)
        self._absorb(grad_sigma(s_new), x)  # Hessian at the NEW estimate W_{t+1}
        self.W = w_new_mat.copy()
        self.n += 1
        return {"projected": projected, "nu": nu, "newton_steps": steps}


class NumpyEOFD(_NumpyMLogB):
    """EOFD-MLogB (Algorithm 2) with the block-FD sketch of Algorithm 1.

    Attributes:
      W: estimate (K, d). V: sketch directions (Kd, m_eff), orthonormal. mu: sketch eigenvalues
      (m_eff,). rho: cumulative discarded mass ``rho_{1:t}``. n: completed updates. acc: running
      sum of eq. 36's last line.
    """

    def __init__(
        self,
        num_outcomes: int,
        dim: int,
        sketch_size: int,
        **hparams: Any,
    ) -> None:
        # hparams: the base class's keyword-only hyperparameters (lam, eta, S, rewards, ...).
        super().__init__(num_outcomes, dim, **hparams)
        self.m = _check_int("sketch_size", sketch_size, 1)
        self.m_eff = min(self.m, self.D)  # ERRATA 1
        self.V = np.eye(self.D)[:, : self.m_eff].copy()
        self.mu = np.zeros(self.m_eff)
        self.rho = 0.0

    def _sketch_stats(self) -> tuple[int, float]:
        return self.m_eff, self.rho

    def z_dense(self) -> np.ndarray:
        """``Z = lam I + V diag(mu) V^T`` as a dense matrix (for checks only)."""
        return self.lam * np.eye(self.D) + (self.V * self.mu) @ self.V.T

    def a_matrix(self, actions: np.ndarray) -> np.ndarray:
        """Lemma 1, eq. 18: ``A_ij = sum_k c_k <x,u_ki><x,u_kj> + ||x||^2/lam delta_ij``.

        ``c_k = 1/(mu_k + lam) - 1/lam``, evaluated as ``-mu_k / (lam (lam + mu_k))`` (the same
        number without the cancellation).
        """
        x = self._as_actions(actions)
        K, d, m = self.K, self.d, self.m_eff
        # u[a, i, k] = V[i*d + a, k]; proj[n, i, k] = <x_n, u_ki>.
        u = self.V.reshape(K, d, m).transpose(1, 0, 2).reshape(d, K * m)
        proj = (x @ u).reshape(-1, K, m)
        c = -self.mu / (self.lam * (self.lam + self.mu))
        a = (proj * c) @ proj.transpose(0, 2, 1)
        a = 0.5 * (a + a.transpose(0, 2, 1))
        a += (np.einsum("na,na->n", x, x) / self.lam)[:, None, None] * np.eye(K)
        return a

    def _znorm2(self, v: np.ndarray) -> float:
        p = self.V.T @ v
        return self.lam * float(v @ v) + float(self.mu @ (p * p))

    def _step_and_project(
        self, w: np.ndarray, g: np.ndarray, gs: np.ndarray, x: np.ndarray
    ) -> tuple[np.ndarray, float, int, bool]:
        # Eq. 20-22: Ztilde = lam I + Vt diag(mut) Vt^T from one SVD. The left singular vectors
        # of C are the right singular vectors of C^T in eq. 21.
        f = math.sqrt(self.eta) * _psd_sqrt_factor(gs)  # P (eta D)^{1/2}
        c = np.concatenate([self.V * np.sqrt(self.mu), _kron_col(f, x)], axis=1)
        vt, sv, _ = np.linalg.svd(c, full_matrices=False)
        mut = sv * sv
        # Eq. 8 by Woodbury: Ztilde^{-1} = (I - Vt diag(mut/(lam+mut)) Vt^T) / lam.
        zinv_g = (g - vt @ (mut / (self.lam + mut) * (vt.T @ g))) / self.lam
        w_prime = w - self.eta * zinv_g
        return project_spectral(w_prime, vt, mut, self.lam, self.S)

    def _absorb(self, gs_new: np.ndarray, x: np.ndarray) -> None:
        # Algorithm 1 (eq. 12-15), one SVD; sigma_{m+1} := 0 when it does not exist.
        b = _kron_col(_psd_sqrt_factor(gs_new), x)
        c = np.concatenate([self.V * np.sqrt(self.mu), b], axis=1)
        u, sv, _ = np.linalg.svd(c, full_matrices=False)
        m = self.m_eff
        tail = float(sv[m] ** 2) if sv.shape[0] > m else 0.0
        self.mu = sv[:m] ** 2 - tail
        self.V = np.ascontiguousarray(u[:, :m])
        self.rho += tail


class NumpyOFUL(_NumpyMLogB):
    """OFUL-MLogB (Section 2.1) with the dense Hessian ``H`` (Kd x Kd).

    Attributes:
      W: estimate (K, d). H: ``lam I + sum of absorbed Hessians``. n, acc: as in NumpyEOFD.
    """

    def __init__(
        self,
        num_outcomes: int,
        dim: int,
        **hparams: Any,
    ) -> None:
        # hparams: the base class's keyword-only hyperparameters (lam, eta, S, rewards, ...).
        super().__init__(num_outcomes, dim, **hparams)
        self.H = self.lam * np.eye(self.D)
        self._hinv: np.ndarray | None = None

    def _sketch_stats(self) -> tuple[int, float]:
        return self.D, 0.0

    def z_dense(self) -> np.ndarray:
        """``Z = H`` (for checks only)."""
        return self.H.copy()

    def a_matrix(self, actions: np.ndarray) -> np.ndarray:
        """``A_ij(x) = x^T (H^{-1})_{ij} x`` with ``(H^{-1})_{ij}`` the (i, j) d x d block."""
        x = self._as_actions(actions)
        K, d = self.K, self.d
        if self._hinv is None:
            hinv = np.linalg.inv(self.H)
            hinv = 0.5 * (hinv + hinv.T)
            # hb[a, (i, j, b)] = Hinv[i*d + a, j*d + b]
            self._hinv = hinv.reshape(K, d, K, d).transpose(1, 0, 2, 3).reshape(d, K * K * d)
        n = x.shape[0]
        out = np.empty((n, K, K))
        chunk = max(1, (1 << 22) // (K * K * d))  # bound the (chunk, K, K, d) temporary
        for lo in range(0, n, chunk):
            xc = x[lo : lo + chunk]
            t = (xc @ self._hinv).reshape(-1, K, K, d)
            out[lo : lo + chunk] = np.einsum("nijb,nb->nij", t, xc)
        return 0.5 * (out + out.transpose(0, 2, 1))

    def _znorm2(self, v: np.ndarray) -> float:
        return float(v @ self.H @ v)

    def _step_and_project(
        self, w: np.ndarray, g: np.ndarray, gs: np.ndarray, x: np.ndarray
    ) -> tuple[np.ndarray, float, int, bool]:
        h_tilde = self.H + self.eta * np.kron(gs, np.outer(x, x))
        w_prime = w - self.eta * np.linalg.solve(h_tilde, g)
        if float(np.linalg.norm(w_prime)) <= self.S:
            return w_prime, 0.0, 0, False
        e, q = np.linalg.eigh(h_tilde)
        return project_spectral(w_prime, q, e - self.lam, self.lam, self.S)

    def _absorb(self, gs_new: np.ndarray, x: np.ndarray) -> None:
        self.H = self.H + np.kron(gs_new, np.outer(x, x))
        self._hinv = None


# --------------------------------------------------------------------------------------------
# Simulation loop.
# --------------------------------------------------------------------------------------------
def simulate(
    learner: _NumpyMLogB,
    W_star: np.ndarray,
    actions: np.ndarray,
    mask: np.ndarray | None,
    uniforms: np.ndarray,
    rewards: np.ndarray | None = None,
) -> dict:
    """Plays ``T`` rounds: select, sample ``y`` from ``sigma(W* x)`` with ``uniforms[t]``, update.

    Args:
      learner: a ``NumpyEOFD`` or ``NumpyOFUL`` (mutated in place).
      W_star: the true parameter (K, d).
      actions: (T, N, d) action sets.
      mask: (T, N) bool validity mask, or None for all valid.
      uniforms: (T,) uniforms in [0, 1) driving the outcome sampling (see ``sample_outcome``).
      rewards: (K,) reward vector for the regret; defaults to ``learner.rewards``.

    Returns:
      ``{"chosen": (T,) int, "y": (T,) int, "regret": (T,), "W": (T+1, K, d)}`` where ``W[0]``
      is the estimate before the first round and the regret of a round is
      ``max_{valid x} r.sigma(W* x) - r.sigma(W* x_t)``.
    """
    K, d = learner.K, learner.d
    w_star = np.asarray(W_star, dtype=np.float64)
    if w_star.shape != (K, d):
        raise ValueError(f"W_star must have shape ({K}, {d}), got {w_star.shape}")
    acts = np.asarray(actions, dtype=np.float64)
    if acts.ndim != 3 or acts.shape[2] != d:
        raise ValueError(f"actions must have shape (T, N, {d}), got {acts.shape}")
    T, N = acts.shape[:2]
    valid = np.ones((T, N), bool) if mask is None else np.asarray(mask, bool)
    if valid.shape != (T, N):
        raise ValueError(f"mask must have shape ({T}, {N}), got {valid.shape}")
    u = np.asarray(uniforms, dtype=np.float64)
    if u.shape != (T,):
        raise ValueError(f"uniforms must have shape ({T},), got {u.shape}")
    r = learner.rewards if rewards is None else np.asarray(rewards, dtype=np.float64)
    if r.shape != (K,):
        raise ValueError(f"rewards must have length {K}, got shape {r.shape}")

    chosen = np.zeros(T, dtype=np.int64)
    ys = np.zeros(T, dtype=np.int64)
    regret = np.zeros(T)
    ws = np.zeros((T + 1, K, d))
    ws[0] = learner.W
    for t in range(T):
        i = learner.select(acts[t], valid[t])
        x = acts[t, i]
        s, s0 = sigma(w_star @ x)
        y = sample_outcome(s, float(s0), float(u[t]))
        learner.update(x, y)
        expected = sigma(acts[t] @ w_star.T)[0] @ r
        regret[t] = expected[valid[t]].max() - expected[i]
        chosen[t], ys[t] = i, y
        ws[t + 1] = learner.W
    return {"chosen": chosen, "y": ys, "regret": regret, "W": ws}
