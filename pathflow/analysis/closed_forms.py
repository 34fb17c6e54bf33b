"""Closed forms of the single-bottleneck rest states, derived with sympy (issue 12, item 1).

Model
-----
N identical long-lived flows share one link of capacity C (packets/s) behind a base round trip
T (s); at rest the link is full with a standing queue q (packets), the round trip is
R = T + q/C and each flow's window W = C R / N (packets). Each function below writes its model's
rest equations (the derivatives of the model's module set to 0, in that module's symbols) as
sympy equations, solves them and returns a `ClosedForm`: the equations, the solution (explicit
where a formula is sensible, else the polynomial or equation whose one root in a stated interval
is the answer) and `numeric(**values)`, the solution in floats.

- `reno_red` (models/reno.py, ``reaction = "mean"``; Misra, Gong, Towsley): below the cap of one
  cut per round trip, dW/dt = 1/(bR) - W/2 (W/R) p = 0 gives p = 2/(b W^2). RED's average equals
  q at rest, p = p_max (q - q_min)/(q_max - q_min) on its ramp, and the rest queue is the root in
  (q_min, q_max) of the cubic b p_max (q - q_min)(C T + q)^2 = 2 N^2 (q_max - q_min); its left
  side grows with q above q_min, so that root is unique.
- `dctcp_step` (models/dctcp.py, ``reaction = "mean"``, marking 1{q > K}): a sliding mode on
  q = K. With theta the fraction of time marked (while marked x p >= 1/R, so lambda = 1/R), the
  time-averaged equations 1/(bR) = W alpha theta/(2R) and alpha = theta give
  alpha* = theta* = sqrt(2/(b W*)), W* = (C T + K)/N: Alizadeh, Javanmard and Prabhakar's
  alpha* = sqrt(2/W*) for b = 1.
- `dctcp_ramp` (the same model behind a linear ramp, e.g. RED with ecn): alpha = p at rest and
  1/(bR) = W p/2 min(W p, 1)/R. The branch W p < 1 needs W p = sqrt(2/b) < 1, i.e. b > 2; the
  branch W p >= 1 gives W p = 2/b, i.e. b <= 2 (the derivation checks both with sympy). The queue
  is the root on the ramp of the quadratic (C T + q) p(q) = N (W p).
- `dcqcn` (models/dcqcn.py; Zhu et al. 2016): R_C = R_T - tau R_AI R_C (c + e)/a = C/N and p the
  root in (0, 1) of alpha a^2 = tau^2 R_AI R_C (c + e)(b + d) (DESIGN §5's a, b, c, d, e at
  R_C = C/N; alpha = 1 - (1-p)^(tau' R_C)); q on the marking line K_min + p/P_max (K_max - K_min).
  `dcqcn_small_p`: the leading order of both sides as p -> 0 (sympy limits: the left side is
  tau' tau^2 R_C^3 p^3 + O(p^4), the right side tau^2 R_AI R_C (1/B + 1/(T R_C))^2 + O(p))
  gives p* = cbrt(R_AI N^2/(tau' C^2) (1/B + N/(T C))^2), the published approximation, tau' in
  the published place.
- `lia_red` (RFC 6356 in the mean-field form of models/mptcp.py; N connections of n subflows,
  all through the link): with I_r = min(a/w_tot, 1/w_r), w_max w_r <= w_tot^2 makes
  I_r = a/w_tot = w_max/w_tot^2 the same for every subflow, so at rest every w_r is equal,
  w_r = w_tot/n, a = 1/n, and (1-p) I_r/b = p w_r/2 gives w_tot^2 = 2 (1-p)/(b p), whatever n:
  the connection takes one Reno flow's share (p = 2/(2 + b w_tot^2); sqrt(2/p) for small p and
  b = 1). With ``acked_only=False`` the increase comes with every packet sent, not only the
  (1-p) acknowledged, as models/mptcp.py (and models/reno.py) grow: p = 2/(b w_tot^2). On a RED
  ramp the queue is again the root of a cubic.

Parameters
----------
Packets, seconds and packets/s throughout: C (packets/s), T (s, the base round trip), N (flows
or connections), b (ACK ratio), K, q_min, q_max, K_min, K_max (packets), p_max, P_max (marking
probability at the ramp's end); DCTCP's g cancels at rest. DCQCN: tau (s, the CNP interval),
tau_p (tau', s, the alpha update interval), F (fast-recovery stages), B (byte counter, packets),
T (s, the rate-increase timer: DCQCN's round trip does not enter its rest state), R_AI
(packets/s). LIA: n (subflows per connection).

Scope and limitations
---------------------
One bottleneck, identical flows, no delay in the rest equations (the rest point does not depend on
it; whether the network stays there is `analysis.stability`'s question). Mean-field forms only,
below the cap of one cut per round trip where stated (`ClosedForm.conditions`, checked by
`numeric`). The ECN step's rest is a sliding mode of the delay-free model: with feedback delay the
fluid model (and the stack) cycles around K instead, so theta* and alpha* are the mean of a sawtooth
only approximately (the 100 Mb/s star of tests/helpers.py, 0.5 ms, K = 40 packets, N = 2 and 8: mean
alpha +1.6 % and -1.3 %, marked fraction +9 % and +4 %). DCQCN: the standard marking curve jumps to
1 above K_max, so its q* holds for p* <= P_max (``extended=True``: the CoNEXT 2016 line, on to 1).
The small-p cube root needs tau R_C p, F T R_C p and F B p all small; with the conext2016 parameters
at 40 Gb/s F B p* is about 39 and F T R_C p* about 0.5 at N = 2, and the cube root is 19 % (N = 2)
and 30 % (N = 10) above the exact p* (as p* -> 0 its error falls in proportion to p*).

Validation
----------
tests/test_closed_forms.py: Reno on one RED link and DCQCN on one 40 Gb/s link against
`analysis.equilibrium` (1e-6), DCQCN's p* against `controller_rest.dcqcn_rest_rate` (C/N at p*), the
cube root against the exact root as p -> 0 (within 1 % at p* ~ 1e-5, its error falling with p*),
DCTCP's step against a direct integration of its delay-free equations (the fluid simulation,
its feedback a round trip late, cycles around K instead), DCTCP's ramp (both branches) and LIA
as models/mptcp.py grows against the fluid simulation's steady state (1e-3), and LIA with the
(1-p) factor against its subflow equations integrated by scipy (1e-4).

References
----------
V. Misra, W. Gong, D. Towsley, "Fluid-based analysis of a network of AQM routers supporting TCP
flows with an application to RED", SIGCOMM 2000.
M. Alizadeh, A. Javanmard, B. Prabhakar, "Analysis of DCTCP: stability, convergence, and
fairness", SIGMETRICS 2011.
Y. Zhu, M. Ghobadi, V. Misra, J. Padhye, "ECN or Delay: Lessons Learnt from Analysis of DCQCN
and TIMELY", CoNEXT 2016.
C. Raiciu, M. Handley, D. Wischik, "Coupled Congestion Control for Multipath Transport
Protocols", RFC 6356, 2011.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mpmath
import scipy.optimize
import sympy as sp

__all__ = ["ClosedForm", "Implicit", "dcqcn", "dcqcn_small_p", "dctcp_ramp", "dctcp_step",
           "lia_red", "reno_red"]


def _positive(names: str) -> tuple[sp.Symbol, ...]:
    return sp.symbols(names, positive=True)


C, T, N, b, q, R, W, p = _positive("C T N b q R W p")
q_min, q_max, p_max = _positive("q_min q_max p_max")


@dataclass(frozen=True)
class Implicit:
    """The one root of `expression` = 0 in the open interval (low, high): a polynomial in the
    unknown where the model gives one, else any expression that changes sign there."""

    expression: sp.Expr
    low: sp.Expr
    high: sp.Expr


@dataclass(frozen=True)
class ClosedForm:
    """A rest state: the sympy `equations` it solves, the `solution` (symbol -> expression in
    the parameters and the symbols before it, or `Implicit`), in the order `numeric` evaluates
    it, and the `conditions` under which the equations hold (checked by `numeric`)."""

    name: str
    equations: tuple[sp.Eq, ...]
    solution: dict[sp.Symbol, sp.Expr | Implicit]
    conditions: tuple[sp.Basic, ...] = field(default=())

    @property
    def parameters(self) -> list[str]:
        """The names `numeric` needs."""
        return sorted(self._symbols().keys() - {str(s) for s in self.solution})

    def _symbols(self) -> dict[str, sp.Symbol]:
        """Every symbol of the solution and the conditions, by name."""
        parts: list[sp.Basic] = list(self.conditions)
        for value in self.solution.values():
            parts += [value.expression, value.low, value.high] if isinstance(value, Implicit) \
                else [value]
        return {str(s): s for part in parts for s in sp.sympify(part).free_symbols}

    def numeric(self, **values: float) -> dict[str, float]:
        """The solution in floats for parameter values in packets, s and packets/s (names as
        `parameters`); ValueError where a condition fails or no root lies in its interval."""
        missing = set(self.parameters) - set(values)
        if missing:
            raise TypeError(f"{self.name}: missing {', '.join(sorted(missing))}")
        symbols = self._symbols()
        known = {symbols[name]: sp.Float(value, 30) for name, value in values.items()
                 if name in symbols}
        for symbol, value in self.solution.items():
            if isinstance(value, Implicit):
                known[symbol] = sp.Float(self._root(symbol, value, known), 30)
            else:
                known[symbol] = sp.Float(sp.N(value.subs(known), 30), 30)
        for condition in self.conditions:
            if not bool(condition.subs(known)):
                raise ValueError(f"{self.name}: {condition} does not hold")
        return {str(symbol): float(known[symbol]) for symbol in self.solution}

    def _root(self, symbol: sp.Symbol, implicit: Implicit, known: dict) -> float:
        low, high = (float(sp.N(sp.sympify(end).subs(known), 30))
                     for end in (implicit.low, implicit.high))
        equation = implicit.expression.subs(known)
        if equation.is_polynomial(symbol):
            roots = [complex(r) for r in sp.Poly(equation, symbol).nroots(n=30, maxsteps=200)]
            inside = [r.real for r in roots
                      if abs(r.imag) <= 1e-12 * abs(r) and low < r.real < high]
            if len(inside) != 1:
                raise ValueError(f"{self.name}: {len(inside)} roots in {symbol} in "
                                 f"({low:g}, {high:g}), not one")
            return inside[0]
        function = sp.lambdify(symbol, equation, "mpmath")
        with mpmath.workdps(40):
            def value(x: float) -> float:
                return float(function(mpmath.mpf(x)))

            span = high - low
            ends = low + 1e-12 * span, high - 1e-12 * span
            if value(ends[0]) * value(ends[1]) > 0:
                raise ValueError(f"{self.name}: no root in {symbol} in ({low:g}, {high:g})")
            return scipy.optimize.brentq(value, *ends, xtol=1e-300, rtol=1e-15, maxiter=500)


def _ramp(level: sp.Expr, start: sp.Expr, end: sp.Expr, top: sp.Expr) -> sp.Expr:
    """The marking probability on a linear ramp from 0 at `start` to `top` at `end`."""
    return top * (level - start) / (end - start)


def _full_link() -> tuple[sp.Eq, sp.Eq]:
    """N windows of W packets per round trip R fill C; R = T + q/C."""
    return sp.Eq(N * W / R, C), sp.Eq(R, T + q / C)


def _on_red(name: str, rest: tuple[sp.Eq, ...], rest_p: sp.Expr,
            extra: dict[sp.Symbol, sp.Expr], conditions: tuple[sp.Basic, ...]) -> ClosedForm:
    """A window control whose rest law is p = rest_p(W), on one RED ramp: the queue is the root
    on the ramp of p_ramp(q) = rest_p(W(q)), W(q) = (C T + q)/N, a polynomial once cleared."""
    full, rtt = _full_link()
    marking = sp.Eq(p, _ramp(q, q_min, q_max, p_max))
    window = sp.solve(full.subs(R, rtt.rhs), W)[0]
    polynomial = sp.expand(sp.numer(sp.together(marking.rhs - rest_p.subs(W, window))))
    solution: dict[sp.Symbol, sp.Expr | Implicit] = {
        q: Implicit(polynomial, q_min, q_max), R: rtt.rhs, W: full.rhs * R / N, p: rest_p}
    return ClosedForm(name, (*rest, full, rtt, marking), {**solution, **extra}, conditions)


def reno_red() -> ClosedForm:
    """Reno, mean-field form, on one RED link (module docstring): q* the root of a cubic on the
    ramp, then R*, W* = C R*/N and p* = 2/(b W*^2), valid while W* p* <= 1 (the cut rate below
    its cap of one per round trip)."""
    rest = sp.Eq(1 / (b * R) - W / 2 * (W / R) * p, 0)
    return _on_red("reno_red", (rest,), sp.solve(rest, p)[0], {}, (W * p <= 1,))


def dctcp_step() -> ClosedForm:
    """DCTCP, mean-field form, on the ECN step at K: the sliding mode q* = K, W* = (C T + K)/N,
    theta* = alpha* = sqrt(2/(b W*)) (module docstring); needs W* >= 2/b (theta* <= 1) and
    W* >= 1 (a marked flow's cut rate at its cap 1/R)."""
    K, alpha, theta, g = _positive("K alpha theta g")
    window = sp.Eq(1 / (b * R) - W * alpha / 2 * theta / R, 0)  # time-averaged dW/dt
    estimate = sp.Eq(g / R * (theta - alpha), 0)  # time-averaged dalpha/dt
    full, rtt = _full_link()
    estimated = sp.solve(estimate, alpha)[0]  # alpha = theta
    fraction = sp.solve(window.subs(alpha, estimated), theta)[0]
    solution: dict[sp.Symbol, sp.Expr | Implicit] = {
        q: K, R: rtt.rhs, W: full.rhs * R / N, theta: fraction, alpha: estimated}
    return ClosedForm("dctcp_step", (window, estimate, full, rtt, sp.Eq(q, K)), solution,
                      (theta <= 1, W >= 1))


def dctcp_ramp() -> ClosedForm:
    """DCTCP, mean-field form, behind a linear ramp (RED with ecn): alpha* = p*, W* p* = 2/b for
    b <= 2, sqrt(2/b) for b > 2 (module docstring); q* the root of a quadratic on the ramp."""
    alpha, u, cut = _positive("alpha u lambda")  # u = W p, lambda the cut rate
    rest = (sp.Eq(1 / (b * R) - W * alpha / 2 * cut, 0), sp.Eq(cut, sp.Min(W * p, 1) / R),
            sp.Eq(alpha, p))
    law = rest[0].subs(alpha, p).subs(W, u / p)
    branches = []
    for rate, holds in ((u / R, u < 1), (1 / R, u >= 1)):  # lambda = min(x p, 1/R), x = W/R
        value = sp.solve(law.subs(cut, rate), u)[0]
        branches.append((value, sp.reduce_inequalities(holds.subs(u, value), b)))
    product = sp.Piecewise(*((value, where) for value, where in reversed(branches)))
    return _on_red("dctcp_ramp", rest, product / W, {alpha: p}, (p <= 1,))


def dcqcn(extended: bool = False) -> ClosedForm:
    """DCQCN's fixed point on one link (module docstring): R_C* = C/N, p* the root in (0, 1) of
    the balance of cuts and increases, alpha*, R_T* and q* on the marking line, which the
    standard curve (``extended=False``) follows only up to P_max."""
    tau, tau_p, F, B, timer, R_AI, R_C, R_T, alpha = _positive(
        "tau tau_p F B T R_AI R_C R_T alpha")
    K_min, K_max, P_max = _positive("K_min K_max P_max")
    g = sp.Symbol("g", positive=True)
    a, byte, cut_free, timed, timer_free = terms = _positive("a b c d e")  # DESIGN §5's
    moving = (
        sp.Eq(g / tau_p * ((1 - (1 - p) ** (tau_p * R_C)) - alpha), 0),
        sp.Eq(-(R_T - R_C) / tau * a + R_AI * R_C * (cut_free + timer_free), 0),
        sp.Eq(-R_C * alpha / (2 * tau) * a + (R_T - R_C) / 2 * R_C * (byte + timed), 0))
    target = sp.solve(moving[1], R_T)[0]
    estimate = sp.solve(moving[0], alpha)[0]
    # dR_C/dt = 0 with R_T at rest, times -2 tau a / R_C: alpha a^2 - tau^2 R_AI R_C (c+e)(b+d)
    balance = sp.factor_terms(sp.expand(moving[2].lhs.subs(R_T, target) * -2 * tau * a / R_C))
    at_rate = dict(zip(terms, _dcqcn_terms(p, R_C, tau, B, F, timer), strict=True))
    marking = sp.Eq(q, K_min + p / P_max * (K_max - K_min))
    solution: dict[sp.Symbol, sp.Expr | Implicit] = {
        R_C: C / N, p: Implicit(balance.subs(alpha, estimate).subs(at_rate), 0, 1), alpha: estimate,
        R_T: target.subs(at_rate), q: marking.rhs}
    definitions = tuple(sp.Eq(symbol, value) for symbol, value in at_rate.items())
    return ClosedForm("dcqcn", (*moving, *definitions, sp.Eq(N * R_C, C), marking), solution,
                      () if extended else (p <= P_max,))


def dcqcn_small_p() -> ClosedForm:
    """DCQCN's rest p* to leading order as p -> 0 (module docstring): the leading terms of
    alpha a^2 (order p^3) and tau^2 R_AI R_C (c + e)(b + d) (order 1) found by sympy limits."""
    tau, tau_p, F, B, timer, R_AI, R_C = _positive("tau tau_p F B T R_AI R_C")
    a, byte, cut_free, timed, timer_free = _dcqcn_terms(p, R_C, tau, B, F, timer)
    cuts = (1 - (1 - p) ** (tau_p * R_C)) * a**2
    increases = tau**2 * R_AI * R_C * (cut_free + timer_free) * (byte + timed)
    leading = sp.Eq(sp.limit(cuts / p**3, p, 0) * p**3, sp.limit(increases, p, 0))
    root = sp.solve(leading, p)[0]
    return ClosedForm("dcqcn_small_p", (leading, sp.Eq(N * R_C, C)),
                      {R_C: C / N, p: sp.simplify(root.subs(R_C, C / N))})


def _dcqcn_terms(p: sp.Symbol, rate: sp.Symbol, tau: sp.Symbol, B: sp.Symbol, F: sp.Symbol,
                 timer: sp.Symbol) -> tuple[sp.Expr, ...]:
    """DESIGN §5's a, b, c, d, e at rate R_C = `rate`."""
    keep = 1 - p
    byte = p / (keep ** (-B) - 1)
    timed = p / (keep ** (-timer * rate) - 1)
    return (1 - keep ** (tau * rate), byte, keep ** (F * B) * byte, timed,
            keep ** (F * timer * rate) * timed)


def lia_red(acked_only: bool = True) -> ClosedForm:
    """N LIA connections of n subflows each, every subflow through one RED link, mean-field
    form (module docstring): every subflow at w_tot/n, p* = 2/(2 + b w_tot^2) (``acked_only``:
    the increase comes with the (1-p) of packets acknowledged, DESIGN §5) or 2/(b w_tot^2)
    (with every packet sent, models/mptcp.py), w_tot* = C R*/N, q* the root of a cubic on the
    ramp; valid while each subflow's cut rate is below its cap, w_r p <= 1."""
    n, w_r = sp.Symbol("n", positive=True, integer=True), sp.Symbol("w_r", positive=True)
    equal = sp.Eq(w_r, W / n)
    coupling = W * w_r / W**2  # a = w_tot max_r w_r / (sum_r w_r)^2 with equal round trips
    increase = coupling / W  # I_r = min(a/w_tot, 1/w_r) = a/w_tot since w_max w_r <= w_tot^2
    acked = 1 - p if acked_only else 1
    rest = sp.Eq(w_r / R * (acked * increase / b - p * w_r / 2), 0)
    rest_p = sp.solve(rest.subs(w_r, equal.rhs), p)[0]
    return _on_red("lia_red" if acked_only else "lia_red_sent", (rest, equal), rest_p,
                   {w_r: W / n}, (w_r * p <= 1,))
