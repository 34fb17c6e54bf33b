"""The characteristic equation of a linear system with delays: its rightmost roots and the
margins of its loop (the numerics of `analysis.stability`, issue 12, item 2).

Model
-----
A linear delay-differential system dz/dt = A0 z(t) + sum_c B_c C_c z(t - D_c) (`Linearization`)
has the characteristic matrix T(s) = s I - A0 - B E(s) C, E(s) = diag(exp(-s D_c)), and is
stable when every root of det T(s) = 0 lies in the left half-plane. The roots: eigenvalues of
the infinitesimal generator discretised on Chebyshev nodes over [-max D, 0] (Breda, Maset and
Vermiglio 2005) or, where that matrix would have more than DENSE rows, of the delay-free system
with every delay replaced by its (4, 4) Pade approximant; each polished by Newton on det T(s)
(step 1 / trace(T^-1 T'), through A0's eigendecomposition: det T = det(s I - A0) det(I - G)).
The margins break the loop at the delayed signals, G(s) = C (s I - A0)^-1 B E(s): from its
eigenvalues (the characteristic loci) along the imaginary axis, the phase, delay and gain
margins where a locus crosses the unit circle or the positive real axis (`analysis.stability`'s
docstring says what each means), on a frequency grid refined where the loci move; G's non-zero
eigenvalues computed from an r x r matrix, r the smaller rank of B and C, where r is below the
signals' count (eig(XY) and eig(YX) share their non-zero eigenvalues).

Scope and limitations
---------------------
The rightmost roots only (those the discretisation resolves, |Im s| max D below about the node
count); margins over seven decades of frequency around the loop's mean delay, gain margins
above GAIN_RANGE reported as inf. Where A0's eigenvectors are ill conditioned (cond >= 1e8)
the loci and Newton use solves of T(s) instead.

Validated by tests/test_stability.py: the roots of a delayed scalar loop against Lambert W and
its critical delay, the Pade realisation's phase, the Pade-seeded roots against the
generator's, the margins from the refined loci against a fixed grid of 2,000 frequencies,
every root against T(s) formed whole and the loci's matrix (of the loop's rank) against G(s)
formed whole (a k = 4 fat-tree with ACKs, and loops whose B or C has a lower rank), and through
`analysis.stability` the published verdicts it reproduces.

References
----------
D. Breda, S. Maset, R. Vermiglio, "Pseudospectral differencing methods for characteristic roots
of delay differential equations", SIAM J. Sci. Comput. 27(2), 2005.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import scipy.optimize
import scipy.sparse
from threadpoolctl import threadpool_limits

__all__ = ["GAIN_RANGE", "Linearization", "Margins", "characteristic_roots", "loop_margins"]

DENSE = 2000  # the largest discretised generator whose eigenvalues are all computed
PADE_ORDER = 4  # of the delay-free approximation that seeds Newton on larger systems
GAIN_RANGE = 1e3  # gain margins above it are reported as inf
_Measure = Callable[[Any], Any]  # of a complex number, or elementwise of an array of them


class Linearization(NamedTuple):
    """dz/dt = a0 z(t) + sum_c b[:, c] c[c, :] z(t - delay[c]) around the rest point, z the
    variables' deviations relative to their rest values (and the signals' relative to theirs)."""

    a0: np.ndarray  # (n, n) 1/s
    b: np.ndarray  # (n, m)
    c: np.ndarray  # (m, n)
    delay: np.ndarray  # (m,) s
    variables: list[str]  # (n,) "cwnd[3]", "queue[s0->r0]", ...
    channels: list[str]  # (m,) "mark[3]", ...
    rest: np.ndarray  # (n,) z*: the rest point (the variables' units)


class Margins(NamedTuple):
    """The loop's margins (module docstring), each the smallest over the characteristic loci."""

    phase: float  # degrees (inf: no crossover)
    crossover: float  # rad/s
    delay: float  # s: the extra delay in every signal that reaches instability
    gain: float  # the factor on the loop gain that reaches instability (inf: none)


def characteristic_roots(lin: Linearization, nodes: int = 32, count: int = 8) -> np.ndarray:
    """The `count` rightmost roots (1/s) of det(s I - A0 - B E(s) C) = 0 with non-negative
    imaginary part, rightmost first: eigenvalues of the Chebyshev discretisation of the
    infinitesimal generator with `nodes` intervals or, where that has more than DENSE rows,
    of the delay-free system with each delay replaced by its Pade approximant (`_rational`),
    each polished by Newton on the exact det T(s)."""
    n = lin.a0.shape[0]
    if n == 0:
        return np.zeros(0, complex)
    span = float(lin.delay.max()) if lin.delay.size else 0.0
    small = _compressed(lin)  # the same roots, fewer channels
    if span <= 0:
        guesses = np.linalg.eigvals(lin.a0 + lin.b @ lin.c)
    elif n * (nodes + 1) <= DENSE:
        guesses = np.linalg.eigvals(_generator(lin, nodes, span).toarray())
    else:
        guesses = np.linalg.eigvals(_rational(small))
    guesses = guesses[(guesses.imag >= 0) & np.isfinite(guesses)]
    # the discretisation resolves roots with |Im s| span below about the node count
    guesses = guesses[np.abs(guesses.imag) * span <= nodes]
    guesses = guesses[np.argsort(-guesses.real)][:3 * count]
    modal = _Modal(small)
    roots = [_newton(modal, s) for s in guesses]
    roots = np.array([complex(s.real, abs(s.imag)) if abs(s.imag) > 1e-9 * abs(s)
                      else complex(s.real, 0.0) for s in roots if np.isfinite(s)])
    unique: list[complex] = []
    for s in roots[np.argsort(-roots.real)]:
        if all(abs(s - u) > 1e-7 * max(abs(u), 1.0) for u in unique):
            unique.append(complex(s))
    return np.array(unique[:count])


def loop_margins(lin: Linearization, points: int | None = None) -> Margins:
    """Phase, delay and gain margins of the loop broken at the delayed signals (module
    docstring), from the characteristic loci of G(j omega) over seven decades of frequency
    (`_loci`; `points`: on a fixed logarithmic grid of that many instead), each crossing
    refined by bisection. Gain margins above GAIN_RANGE are reported as inf."""
    lin = _compressed(lin)
    if lin.c.shape[0] == 0:
        return Margins(math.inf, math.nan, math.inf, math.inf)
    scale = float(np.mean(lin.delay)) if np.any(lin.delay > 0) else 1.0 / max(
        float(np.max(np.abs(np.linalg.eigvals(lin.a0)))), 1e-300)
    modal = _Modal(lin)
    omegas, loci = _loci(modal, 1e-4 / scale, 1e3 / scale, points)  # loci: (points, m)

    def crossings(measure: _Measure, where: np.ndarray) -> list[tuple[int, int]]:
        """(grid point, branch) where `measure` changes sign between a point and the next."""
        values = measure(loci)
        change = (np.sign(values[:-1]) != np.sign(values[1:])) & where[:-1] & where[1:]
        return [(int(i), int(k)) for i, k in zip(*np.nonzero(change), strict=True)]

    def located(i: int, k: int, measure: _Measure) -> tuple[float, complex]:
        return _refine(modal, omegas[i], omegas[i + 1], loci[i, k], loci[i + 1, k], measure)

    def interpolated(i: int, k: int, measure: _Measure) -> tuple[float, complex]:
        low, high = measure(loci[i, k]), measure(loci[i + 1, k])
        share = low / (low - high)
        return (omegas[i] * (omegas[i + 1] / omegas[i]) ** share,
                loci[i, k] + share * (loci[i + 1, k] - loci[i, k]))

    # the unit circle: of all crossings (located on the grid) the one that needs the least
    # extra delay, then refined by bisection
    def magnitude(z: Any) -> Any:
        return np.log(np.abs(z) + 1e-300)

    def extra_delay(i: int, k: int) -> float:
        omega, value = interpolated(i, k, magnitude)
        return math.atan2(value.imag, value.real) / omega

    unit = crossings(magnitude, np.ones_like(loci, bool))
    phase, crossover, delay = math.inf, math.nan, math.inf
    if unit:
        omega, value = located(*min(unit, key=lambda c: extra_delay(*c)), magnitude)
        angle = math.atan2(value.imag, value.real)
        phase, crossover, delay = math.degrees(angle), omega, angle / omega

    # the positive real axis, where the loop gain is within a factor GAIN_RANGE of
    # instability (a locus near 0, where G has rank below its size, never reaches 1); of
    # several crossings the one nearest to 1 (a loop may also go unstable when its gain falls:
    # conditional stability)
    def imaginary(z: Any) -> Any:
        return np.imag(z)

    axis = crossings(imaginary, loci.real > 1.0 / GAIN_RANGE)
    gain = math.inf
    if axis:
        nearest = min(axis, key=lambda c: abs(math.log(max(
            interpolated(*c, imaginary)[1].real, 1e-300))))
        value = located(*nearest, imaginary)[1]
        gain = 1.0 / value.real if value.real > 0 else math.inf
    return Margins(phase, crossover, delay, gain)


def _generator(lin: Linearization, nodes: int, span: float) -> scipy.sparse.csr_matrix:
    """The infinitesimal generator discretised on the Chebyshev points theta_j = span
    (cos(j pi / nodes) - 1) / 2, j = 0..nodes (theta_0 = 0): rows j >= 1 differentiate the
    interpolant, row 0 is the right-hand side with each delay read from the interpolant."""
    n, k = lin.a0.shape[0], nodes
    x = np.cos(np.pi * np.arange(k + 1) / k)
    weights = np.ones(k + 1)
    weights[0] = weights[-1] = 0.5
    weights *= (-1.0) ** np.arange(k + 1)
    difference = x[:, None] - x[None, :] + np.eye(k + 1)
    d = (weights[None, :] / weights[:, None]) / difference
    d -= np.diag(d.sum(axis=1))
    d *= 2.0 / span  # theta = span (x - 1) / 2, so d/dtheta = (2 / span) d/dx
    top = np.zeros((n, n * (k + 1)))
    top[:, :n] = lin.a0
    for delay in np.unique(lin.delay):
        channels = lin.delay == delay
        coupling = lin.b[:, channels] @ lin.c[channels]
        top += np.kron(_interpolation_row(x, weights, 2 * (-delay) / span + 1), coupling)
    below = scipy.sparse.kron(d[1:], scipy.sparse.identity(n))
    return scipy.sparse.vstack([scipy.sparse.csr_matrix(top), below]).tocsr()


def _compressed(lin: Linearization) -> Linearization:
    """The same system with the channels of each delay reduced to the rank of their coupling
    B_D C_D (a Reno flow's mark and rate signals act on its window as one product: rank 1).
    The roots, and the non-zero characteristic loci, are unchanged: G(s) = C R(s) B E(s) and
    R(s) sum_D B_D C_D e^(-s D) have the same non-zero eigenvalues."""
    b, c, delays = [], [], []
    for delay in np.unique(lin.delay):
        group = lin.delay == delay
        across, upper = np.linalg.qr(lin.c[group].T)  # C_D = upper^T across^T
        u, sizes, v = np.linalg.svd(lin.b[:, group] @ upper.T, full_matrices=False)
        keep = sizes > 1e-12 * max(float(sizes.max(initial=0.0)), 1e-300)
        b.append(u[:, keep] * sizes[keep])
        c.append(v[keep] @ across.T)
        delays.append(np.full(int(keep.sum()), delay))
    channels = [f"combined[{i}]" for i in range(sum(d.size for d in delays))]
    n = lin.a0.shape[0]
    return lin._replace(b=np.hstack([np.zeros((n, 0)), *b]), c=np.vstack([np.zeros((0, n)), *c]),
                        delay=np.concatenate([np.zeros(0), *delays]), channels=channels)


def _rational(lin: Linearization, order: int = PADE_ORDER) -> np.ndarray:
    """A delay-free system whose eigenvalues approximate the rightmost roots: each channel's
    delay e^(-s D) replaced by its (order, order) Pade approximant (`_pade_delay`, `order`
    states per channel). Exact as D -> 0; the phase of order 4 is within 0.1 degree at |s| D =
    pi and 10 degrees at 2 pi, so Newton on the true det T(s) starts close to each root near
    the axis."""
    n, k = lin.a0.shape[0], lin.delay.size
    a1, b1, c1, d1 = _pade_delay(order)  # in x = s D, then scaled to s (A / D, B / D)
    size = n + order * k
    matrix = np.zeros((size, size))
    matrix[:n, :n] = lin.a0 + d1 * lin.b @ lin.c
    for i, delay in enumerate(lin.delay):
        rows = slice(n + order * i, n + order * (i + 1))
        matrix[rows, rows] = a1 / delay
        matrix[rows, :n] = (b1 / delay) @ lin.c[i:i + 1]
        matrix[:n, rows] = lin.b[:, i:i + 1] @ c1
    return matrix


def _pade_delay(order: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(A, B, C, D) with C (x I - A)^-1 B + D = N(-x) / N(x), the (order, order) Pade
    approximant of e^(-x), in controller canonical form (scipy.signal.tf2ss's; written out
    here because importing scipy.signal, and with it scipy.stats, took a third of a second of
    `pathflow analyze`)."""
    # N's coefficients, highest power first, divided by the leading one
    n = np.array([math.factorial(2 * order - j) * math.factorial(order)
                  / (math.factorial(2 * order) * math.factorial(j) * math.factorial(order - j))
                  for j in range(order, -1, -1)])
    n = n / n[0]
    flipped = n * (-1.0) ** np.arange(order, -1, -1)  # N(-x), over the same leading one
    a = np.eye(order, k=-1)
    a[0] = -n[1:]
    b = np.zeros((order, 1))
    b[0, 0] = 1.0
    d = float(flipped[0])
    return a, b, (flipped[1:] - d * n[1:])[None, :], d


def _interpolation_row(x: np.ndarray, weights: np.ndarray, point: float) -> np.ndarray:
    """The Lagrange basis on the nodes x at `point` (barycentric, second form)."""
    gap = point - x
    exact = np.flatnonzero(np.abs(gap) < 1e-14)
    if exact.size:
        row = np.zeros_like(x)
        row[exact[0]] = 1.0
        return row
    terms = weights / gap
    return terms / terms.sum()


class _Modal:
    """T(s) = s I - A0 - B E(s) C and the loop G(s) = C (s I - A0)^-1 B E(s) through A0's
    eigendecomposition A0 = V diag(mu) V^-1: G(s) = L diag(1 / (s - mu)) R E(s), L = C V,
    R = V^-1 B, and det T(s) = det(s I - A0) det(I - G(s)): products of m x n matrices
    rather than solves of n x n ones (the k = 8 fat-tree's part: n = 284, m = 128). Where V is
    ill conditioned (cond V >= 1e8), the solves."""

    def __init__(self, lin: Linearization) -> None:
        self.lin = lin
        self.modes, vectors = np.linalg.eig(lin.a0)
        self.diagonal = bool(np.linalg.cond(vectors) < 1e8)
        if self.diagonal:
            self.left, self.right = lin.c @ vectors, np.linalg.solve(vectors, lin.b)
            self._factors = _low_rank_loop(self.left, self.right)

    def loop(self, s: np.ndarray) -> np.ndarray:
        """At each of `s` (points,), a matrix with the non-zero eigenvalues of G(s) and no
        others but zeros: G(s) itself (points, m, m) or, where L or R has rank r < m, the
        r x r product that shares them (`_low_rank_loop`; the k = 8 fat-tree's part: Reno
        r = 116 of 128, 0.82 of the eigensolver's time; DCTCP 82 of 116, 0.65)."""
        s = s[:, None, None]
        lin = self.lin
        if not self.diagonal:
            n = lin.a0.shape[0]
            loop = lin.c @ np.linalg.solve(s * np.eye(n) - lin.a0, lin.b)
            return loop * np.exp(-s * lin.delay[None, :])
        first, middle, last, delayed_first = self._factors
        inverse = 1.0 / (s - self.modes[None, None, :])
        exp = np.exp(-s * lin.delay[None, :])
        # the product through the m channels last: r m n + r m r operations, not r m n + r n r
        if delayed_first:  # K E (L D W): first (r, m), middle (m, n), last (n, r)
            return np.matmul(first * exp, np.matmul(middle * inverse, last))
        # (H D R) (E J): first (r, n), middle (n, m), last (m, r)
        return np.matmul(np.matmul(first * inverse, middle), np.swapaxes(exp, 1, 2) * last)

    def log_derivative(self, s: complex) -> complex:
        """d/ds log det T(s) = trace(T(s)^-1 T'(s)) (raises LinAlgError where T(s) is
        singular)."""
        lin = self.lin
        exp = np.exp(-s * lin.delay)
        if self.diagonal:
            with np.errstate(divide="ignore", invalid="ignore"):  # s on a mode: below
                inverse = 1.0 / (s - self.modes)
                scaled = self.left * inverse
                loop = (scaled @ self.right) * exp
                slope = -((scaled * inverse) @ self.right) * exp - loop * lin.delay
                m = loop.shape[0]
                found = complex(inverse.sum()
                                - np.trace(np.linalg.solve(np.eye(m) - loop, slope)))
            if math.isfinite(abs(found)):
                return found
        n = lin.a0.shape[0]  # s on a mode of A0, or V ill conditioned
        t = s * np.eye(n) - lin.a0 - (lin.b * exp) @ lin.c
        derivative = np.eye(n) + (lin.b * (lin.delay * exp)) @ lin.c
        return complex(np.trace(np.linalg.solve(t, derivative)))


def _low_rank_loop(left: np.ndarray, right: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Factors of G(s) = L D(s) R E(s) (D = diag(1 / (s - mu)), E = diag(exp(-s delay))) whose
    product in turn is r x r, r the smaller rank of L and R, with G's non-zero eigenvalues
    (eig(XY) and eig(YX) share them): R = W K gives K E L D W (flag True: E acts on the
    first factor), L = J H gives H D R E J (flag False). A flow whose window does not move
    with its signals, or signals that move together, lower the rank."""
    def split(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # matrix = outer @ inner
        u, sizes, vh = np.linalg.svd(matrix, full_matrices=False)
        keep = sizes > 1e-12 * max(float(sizes.max(initial=0.0)), 1e-300)
        return u[:, keep] * sizes[keep], vh[keep]

    w, k = split(right)
    j, h = split(left)
    if k.shape[0] <= h.shape[0]:
        return k, left, w, True
    return h, right, j, False


def _newton(modal: _Modal, s: complex) -> complex:
    """A root of det T(s) = 0 near s (NaN where Newton does not settle)."""
    for _ in range(50):
        try:
            trace = modal.log_derivative(s)
        except np.linalg.LinAlgError:
            return s  # T(s) singular: s is a root
        if trace == 0:
            return complex(math.nan, math.nan)
        step = 1.0 / trace
        s = s - step
        if abs(step) <= 1e-12 * max(abs(s), 1e-300):
            return s
    return complex(math.nan, math.nan)


def _loci(modal: _Modal, low: float, high: float, points: int | None = None
          ) -> tuple[np.ndarray, np.ndarray]:
    """(omegas, the eigenvalues of G(j omega) at each, matched point to point into branches)
    from `low` to `high` rad/s, on a fixed logarithmic grid of `points` where given. Else up to
    8 signals on a fixed grid of 4,000 points; beyond, where each eigenproblem costs more, on a
    grid refined where it matters: START points, then each interval halved (in log omega)
    while a branch within a factor SPAN of the unit circle moves across it by more than MOVE of
    its size, down to 1 % in omega. On the largest parts of 16 rest states (k = 4 to 8
    fat-trees, Reno and DCTCP, with ACKs and without; 12 to 238 signals) every margin is that
    of a fixed grid of 2,000 points within 1e-11, from 95 to 194 points where a fixed grid of
    400 had been needed (300 missed a gain crossing once)."""
    eigenvalues = _loop_eigenvalues(modal)
    if points is not None or modal.lin.c.shape[0] <= 8:
        omegas = np.geomspace(low, high, points or 4000)
        return omegas, _branches(omegas, dict(zip(omegas, eigenvalues(omegas), strict=True)))
    start = np.geomspace(low, high, START)
    values = dict(zip(start, eigenvalues(start), strict=True))
    orders: dict[tuple[float, float], np.ndarray] = {}  # the matchings found on the way
    pending = list(itertools.pairwise(start))
    while pending:
        split = [(a, b) for a, b in pending if b / a > 1.01 and _moves(values, a, b, orders)]
        if not split:
            break
        middle = np.sqrt([a * b for a, b in split])
        values.update(zip(middle, eigenvalues(middle), strict=True))
        pending = [pair for (a, b), m in zip(split, middle, strict=True)
                   for pair in ((a, m), (m, b))]
    omegas = np.array(sorted(values))
    return omegas, _branches(omegas, values, orders)


# `_loci`'s refinement: the first grid, the branches that matter and how far they may move
START, SPAN, MOVE = 60, 30.0, 0.2


def _moves(values: dict[float, np.ndarray], a: float, b: float,
           orders: dict[tuple[float, float], np.ndarray]) -> bool:
    """Whether a branch within SPAN of the unit circle moves by more than MOVE of its size
    from omega a to b (the matching kept in `orders`)."""
    before = values[a]
    orders[a, b] = _matching(before, values[b])
    after = values[b][orders[a, b]]
    size = np.minimum(np.abs(before), np.abs(after))
    near = (np.maximum(np.abs(before), np.abs(after)) > 1 / SPAN) & (size < SPAN)
    return bool(np.any(np.abs(after - before)[near] > MOVE * size[near]))


def _matching(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """The order of `after` in which each entry continues the branch of `before`'s nearest to
    it (the assignment of least total distance)."""
    if before.size == 1:  # one branch (the 4,000-point grids of one-signal parts): no match
        return np.zeros(1, int)
    return scipy.optimize.linear_sum_assignment(np.abs(before[:, None] - after[None, :]))[1]


def _branches(omegas: np.ndarray, values: dict[float, np.ndarray],
              orders: dict[tuple[float, float], np.ndarray] | None = None) -> np.ndarray:
    """(points, m): the eigenvalues at `omegas`, each point's ordered to continue the
    branches of the one before (`orders`: matchings already found)."""
    orders = orders or {}
    loci = np.empty((omegas.size, values[omegas[0]].size), complex)
    order = np.arange(loci.shape[1])
    loci[0] = values[omegas[0]]
    for i, (a, b) in enumerate(itertools.pairwise(omegas), start=1):
        found = orders.get((a, b))
        order = (_matching(values[a], values[b]) if found is None else found)[order]
        loci[i] = values[b][order]
    return loci


def _loop_eigenvalues(modal: _Modal) -> Callable[[np.ndarray], np.ndarray]:
    """The eigenvalues of G(j omega) at each of a list of omegas (points, m), unordered."""

    def values_at(omegas: np.ndarray) -> np.ndarray:
        return np.linalg.eigvals(modal.loop(1j * omegas))

    def eigenvalues(omegas: np.ndarray) -> np.ndarray:
        if modal.lin.c.shape[0] <= 8:  # small eigenproblems: threads would cost more
            return np.concatenate([values_at(omegas[first:first + 64])
                                   for first in range(0, omegas.size, 64)])
        # LAPACK's eigensolver gains little from BLAS threads at this size: a share of the
        # points per core, each on one BLAS thread, is about twice as fast on two cores
        from pathflow.cost import usable_cpus

        cores = usable_cpus()
        shares = [share for share in np.array_split(omegas, cores) if share.size]
        with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(cores) as pool:
            return np.concatenate(list(pool.map(values_at, shares)))

    return eigenvalues


def _refine(modal: _Modal, low: float, high: float, at_low: complex, at_high: complex,
            measure: _Measure) -> tuple[float, complex]:
    """The root of `measure` on a branch between two grid points where it changes sign, by the
    Illinois method in log omega (regula falsi whose kept end's value is halved when it is kept
    twice: a handful of eigenproblems where bisection took forty); the branch is followed as
    the eigenvalue nearest its value interpolated across the bracket."""
    m_low, m_high = measure(at_low), measure(at_high)
    small = 1e-14 * max(abs(m_low), abs(m_high))  # a value this near 0 is the root
    kept = 0  # the end kept by the last step: -1 low, +1 high
    for _ in range(100):
        share = m_low / (m_low - m_high) if m_low != m_high else 0.5
        share = min(max(share, 1e-3), 1 - 1e-3)  # strictly inside the bracket
        middle = low * (high / low) ** share
        values = np.linalg.eigvals(modal.loop(np.array([1j * middle]))[0])
        guess = at_low + (at_high - at_low) * share
        value = complex(values[np.argmin(np.abs(values - guess))])
        found = measure(value)
        if abs(found) <= small:
            return middle, value
        if math.copysign(1.0, found) == math.copysign(1.0, m_low):
            low, at_low, m_low = middle, value, found
            m_high = m_high / 2 if kept == 1 else m_high
            kept = 1
        else:
            high, at_high, m_high = middle, value, found
            m_low = m_low / 2 if kept == -1 else m_low
            kept = -1
        if high / low - 1 < 1e-12:
            break
    return math.sqrt(low * high), (at_low + at_high) / 2
