"""Bounded roots of the rest state's equations: least squares with Newton first, Jacobians by
grouped finite differences, and lifting stalled positions (the numerics of
`analysis.equilibrium`, which holds the network's equations).

Model
-----
A system F(x) = 0 with bounds low <= x <= high (the links' positions along their queues, and
coupled windows), each residual depending on a few unknowns only (`related`: residuals x
unknowns). `bounded_root` runs scipy's trust-region reflective least squares, or first, where
the residual takes a batch of points, Newton with step halving (`newton_root`; the
Fischer-Burmeister system of the rest state is semismooth: quadratic convergence near a root).
Both take their Jacobian from `grouped_differences`: forward differences in which unknowns that
no residual shares are perturbed together (Curtis, Powell and Reid 1974), one evaluation per
group. The least squares stops once its sum of squares falls by less than 1 % in 100
evaluations (a stall: the caller tries another start or reports the residual). `lift` raises
the positions of links that stay overloaded to where their load fits, a start from which a
stalled least squares answers again.

Scope and limitations
---------------------
Dense Jacobians (the k = 8 fat-tree's few hundred unknowns); forward differences of relative
step 1.49e-8, so residuals below about 1e-11 are rounding. BLAS threads are held to one inside
(on matrices this small they cost more than they bring).

Validated by tests/test_bounded_roots.py (the grouped differences against an analytic
Jacobian, `lift` against a closed form, both solvers on a bounded system with a known root, the
stall rule) and,
through `analysis.equilibrium`, by its tests.

References
----------
A. R. Curtis, M. J. D. Powell, J. K. Reid, "On the estimation of sparse Jacobian matrices",
J. Inst. Maths Applics 13, 1974.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.optimize
from threadpoolctl import threadpool_limits

from pathflow.scenario import ScenarioError

__all__ = ["NEWTON_STEPS", "bounded_root", "grouped_differences", "lift", "newton_root"]

# Newton steps before the least squares takes over: where it converged it took 4 to 23 (k = 4
# and 8 fat-trees, Reno and DCTCP, 14 hash seeds and controls); from the first start on the
# k = 8 fat-tree it crawls (damped steps), and the least squares found the rest
NEWTON_STEPS = 25

# the least squares stops where it has stalled: its sum of squares fell by less than
# STALL_GAIN over its last STALL_EVALUATIONS evaluations (OLIA on the k = 4 fat-tree, two
# subflows: at 6.3e-3 after 200 of its 2,000 evaluations, each with a Jacobian of 89 more, and
# no lower at the end: 70 s a stage, six stages a start)
STALL_EVALUATIONS, STALL_GAIN = 100, 0.01


class _Stalled(Exception):
    """Raised inside the least squares once it has stalled (`_Watched`)."""


class _Watched:
    """The residual, keeping the best point evaluated and raising `_Stalled` once the best sum
    of squares has fallen by less than STALL_GAIN over the last STALL_EVALUATIONS
    evaluations."""

    def __init__(self, residual: Callable[[np.ndarray], np.ndarray]) -> None:
        self.residual = residual
        self.best: list[float] = []  # the best sum of squares after each evaluation
        self.point: np.ndarray | None = None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        value = self.residual(x)
        merit = float(value @ value)
        if not self.best or merit < self.best[-1]:
            self.point = x.copy()
        self.best.append(min(merit, self.best[-1]) if self.best else merit)
        if (len(self.best) > STALL_EVALUATIONS
                and self.best[-1] > (1 - STALL_GAIN) * self.best[-1 - STALL_EVALUATIONS]):
            raise _Stalled
        return value


def bounded_root(residual: Callable[[np.ndarray], np.ndarray], start: np.ndarray,
                 low: np.ndarray, high: np.ndarray, related: np.ndarray, budget: int,
                 batched: bool = False) -> np.ndarray:
    """The root of `residual` within [low, high] from `start` by least squares (scipy's
    trust-region reflective method, the Jacobian by `grouped_differences`), at most `budget`
    evaluations and none after it has stalled (`_Watched`); `batched`: the residual takes a
    batch of points, and Newton (`newton_root`) is tried first."""
    jacobian = grouped_differences(residual, related, high, batched)
    try:
        # BLAS threads cost more than they bring on matrices this small (k = 8 fat-tree: 20 %)
        with threadpool_limits(1):
            # Newton first, which from a near start (single paths: the rest with ACKs from
            # the one without) takes a fifth of the least squares' steps (the k = 8
            # fat-tree, hash seed 1: 20 Jacobians against 108); the least squares where
            # it fails
            found = newton_root(residual, jacobian, start, low, high) if batched else None
            if found is not None:
                return found
            watched = _Watched(residual)
            try:
                return scipy.optimize.least_squares(
                    watched, start, bounds=(low, high), method="trf",
                    jac=jacobian, xtol=1e-14, ftol=1e-14, gtol=1e-14, max_nfev=budget).x
            except _Stalled:
                assert watched.point is not None
                return watched.point
    except np.linalg.LinAlgError as why:
        raise ScenarioError(f"the rest state was not found: the root solver failed ({why}) "
                            f"on {start.size} unknowns") from None


def newton_root(residual: Callable[[np.ndarray], np.ndarray],
                jacobian: Callable[[np.ndarray], np.ndarray], start: np.ndarray,
                low: np.ndarray, high: np.ndarray) -> np.ndarray | None:
    """The root of `residual` within [low, high] by Newton from `start` (the Fischer-Burmeister
    system is semismooth: quadratic convergence near a root), each step halved until the
    largest residual falls; None where that fails above 1e-11 (the differences' rounding) or
    takes more than NEWTON_STEPS steps."""
    x, value = start.copy(), residual(start)
    now = float(np.max(np.abs(value), initial=0.0))
    for _ in range(NEWTON_STEPS):
        if now <= 1e-13:
            return x
        try:
            step = np.linalg.solve(jacobian(x), -value)
        except np.linalg.LinAlgError:
            return None
        for _ in range(20):
            tried = np.clip(x + step, low, high)
            at_tried = residual(tried)
            at = float(np.max(np.abs(at_tried), initial=0.0))
            if at < now:
                break
            step = step / 2
        else:  # no decrease: at the differences' rounding, or stuck
            return x if now <= 1e-11 else None
        x, value, now = tried, at_tried, at
    return x if now <= 1e-13 else None



def grouped_differences(function: Callable[[np.ndarray], np.ndarray], related: np.ndarray,
                        upper: np.ndarray, batched: bool = False
                        ) -> Callable[[np.ndarray], np.ndarray]:
    """The Jacobian of `function` by forward differences, columns whose rows (`related`: rows x
    columns, where an entry may be non-zero) do not meet perturbed together, one evaluation per
    group (Curtis, Powell and Reid 1974), the step turned back below the `upper` bounds;
    `batched`: `function` takes the groups' points as one batch (groups, unknowns), which on
    the k = 8 fat-tree's 30 groups costs about what two single evaluations do."""
    groups: list[list[int]] = []
    rows: list[np.ndarray] = []
    for column in range(related.shape[1]):
        free = next((g for g, taken in enumerate(rows) if not (taken & related[:, column]).any()),
                    None)
        if free is None:
            groups.append([])
            rows.append(np.zeros(related.shape[0], bool))
            free = len(groups) - 1
        groups[free].append(column)
        rows[free] |= related[:, column]

    def jacobian(x: np.ndarray) -> np.ndarray:
        at = function(x)
        out = np.zeros((at.size, x.size))
        moved = np.repeat(x[None, :], len(groups), axis=0)
        steps = []
        for g, group in enumerate(groups):
            step = 1.49e-8 * np.maximum(1.0, np.abs(x[group]))
            step = np.where(x[group] + step > upper[group], -step, step)
            moved[g, group] += step
            steps.append(step)
        changes = (function(moved) if batched else np.array([function(m) for m in moved])) - at
        for group, step, change in zip(groups, steps, changes, strict=True):
            for column, h in zip(group, step, strict=True):
                hit = related[:, column]
                out[hit, column] = change[hit] / h
        return out

    return jacobian


def lift(y: np.ndarray, used: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The positions y whose `used` (load over capacity at positions y, one per unknown)
    exceeds 1 raised, each by bisection with the others held, to the least position at which
    its load fits (those overloaded at the top stay there): where the least squares stalls, a
    start from which the links' balances answer their positions again."""
    y = y.copy()
    over = np.flatnonzero(used(y) > 1.0)
    low, high = np.maximum(y[over], 0.0), np.ones(over.size)
    for _ in range(40):
        y[over] = 0.5 * (low + high)
        fits = used(y)[over] <= 1.0
        low, high = np.where(fits, low, y[over]), np.where(fits, y[over], high)
    y[over] = high
    return y
