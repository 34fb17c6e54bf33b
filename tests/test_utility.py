"""The price maps of the MPTCP family from the models' own code (pathflow.analysis.utility)
against their closed forms, and which of them are the gradients of a utility: Reno's per
subflow (uncoupled) and Reno's of the connection's total (OLIA at equal round trips) are;
LIA's and BALIA's are not (Peng, Walid, Hwang and Low 2016)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pathflow.analysis.utility import asymmetry, olia_utility, price_map, reno_utility
from pathflow.models.mptcp import Balia, Lia, Olia, Uncoupled
from pathflow.models.window import WindowControl, WindowParams

# two connections: subflows 0, 1 and 2 of connection 0 (unequal round trips), 3 and 4 of 1
RATES = np.array([3000.0, 1200.0, 700.0, 500.0, 2500.0])  # packets/s
RTT = np.array([0.010, 0.013, 0.008, 0.020, 0.020])  # s
CONNECTION = np.array([0, 0, 0, 1, 1])
ACK_RATIO = 2.0


def _params(size: int, ack_ratio: float = ACK_RATIO) -> WindowParams:
    return WindowParams(jnp.full(size, ack_ratio), jnp.full(size, 10.0), jnp.full(size, 2.0),
                        jnp.full(size, jnp.inf))


def _map(model: WindowControl, rates: np.ndarray = RATES, rtt: np.ndarray = RTT,
         connection: np.ndarray = CONNECTION, **extra: np.ndarray) -> np.ndarray:
    extras = {key: jnp.asarray(value) for key, value in extra.items()} or None
    return np.asarray(price_map(model, _params(rates.size), jnp.asarray(rates),
                                jnp.asarray(rtt), jnp.asarray(connection), extras))


def _per_connection(values: np.ndarray, reduce: np.ufunc = np.add) -> np.ndarray:
    out = np.zeros(CONNECTION.max() + 1) if reduce is np.add else np.full(2, -np.inf)
    reduce.at(out, CONNECTION, values)
    return out[CONNECTION]


def _best_largest(rates: np.ndarray = RATES, rtt: np.ndarray = RTT) -> dict[str, np.ndarray]:
    """OLIA's extra state with each connection's best subflows among its largest (its eps term
    zero): packets since a loss rising with the window faster than tau^2."""
    window = rates * rtt
    return {"since_loss": window**2 * rtt**2 * 1e6, "last_interval": np.zeros(rates.size)}


def test_price_maps_are_the_closed_forms() -> None:
    """The price at which each subflow rests, read off the models' `derivative` (mean field),
    against the rest laws of their per-ACK and per-loss rules (analysis.utility), with an ACK
    ratio b = 2: uncoupled 2 / (b tau^2 x^2); OLIA 2 / (b tau_r^2 y^2) (eps zero); LIA
    2 min(w_r M / Y^2, 1) / (b w_r^2), M = max w / tau^2, Y = sum w / tau; BALIA (1 + a)(4 + a)
    / (5 b tau_r^2 y^2 min(a, 1.5)), a = max x / x_r; y the connection's total rate."""
    b, x, tau = ACK_RATIO, RATES, RTT
    y, window = _per_connection(x), x * tau
    np.testing.assert_allclose(_map(Uncoupled(reaction="mean")), 2 / (b * tau**2 * x**2),
                               rtol=1e-12)
    np.testing.assert_allclose(_map(Olia(reaction="mean"), **_best_largest()),
                               2 / (b * tau**2 * y**2), rtol=1e-12)
    best = _per_connection(window / tau**2, np.maximum)
    lia = 2 * np.minimum(window * best / y**2, 1.0) / (b * window**2)
    np.testing.assert_allclose(_map(Lia(reaction="mean")), lia, rtol=1e-12)
    a = _per_connection(x, np.maximum) / x
    balia = (1 + a) * (4 + a) / (5 * b * tau**2 * y**2 * np.minimum(a, 1.5))
    np.testing.assert_allclose(_map(Balia(reaction="mean")), balia, rtol=1e-12)


def test_uncoupled_and_olia_maps_are_their_utilities_gradients() -> None:
    """Uncoupled subflows rest where the prices are the gradient of Reno's utility per subflow,
    sum -2 / (b tau^2 x); OLIA's connection, its paths sharing a round trip, where they are the
    gradient of Reno's utility of its total, -2 / (b tau^2 y): their Jacobians symmetric. With
    round trips that differ OLIA's is not."""
    b, rates = ACK_RATIO, jnp.asarray(RATES)
    gradient = jax.grad(reno_utility(jnp.asarray(RTT), b))(rates)
    np.testing.assert_allclose(_map(Uncoupled(reaction="mean")), gradient, rtol=1e-12)
    one = np.zeros(3, dtype=int)
    same = np.full(3, 0.012)
    x = RATES[:3]
    olia = _map(Olia(reaction="mean"), x, same, one, **_best_largest(x, same))
    np.testing.assert_allclose(olia, jax.grad(olia_utility(0.012, b))(jnp.asarray(x)),
                               rtol=1e-12)
    params = _params(3)
    for model, rtt, extra in ((Uncoupled(reaction="mean"), RTT[:3], None),
                              (Olia(reaction="mean"), same, _best_largest(x, same))):
        assert asymmetry(model, params, x, rtt, one, extra) < 1e-12
    unequal = asymmetry(Olia(reaction="mean"), params, x, RTT[:3], one, _best_largest(x, RTT[:3]))
    assert unequal > 0.1


def test_lia_and_balia_maps_are_no_gradient() -> None:
    """LIA at equal round trips with x_1 = 2 x_2: d phi_2 / d x_1 is half d phi_1 / d x_2 (the
    closed form of analysis.utility), so no utility has LIA's rest as optimum; on the line x_1
    = 3 x_2 alone the two agree (a local test: symmetric at a point is not a gradient). BALIA's
    Jacobian is asymmetric too."""
    params, pair, rtt = _params(2), np.zeros(2, dtype=int), np.full(2, 0.01)
    lia = Lia(reaction="mean")

    def jacobian(rates: np.ndarray) -> np.ndarray:
        return np.asarray(jax.jacfwd(lambda r: price_map(lia, params, r, jnp.asarray(rtt),
                                                         jnp.asarray(pair)))(jnp.asarray(rates)))

    across = jacobian(np.array([2000.0, 1000.0]))
    assert across[1, 0] / across[0, 1] == pytest.approx(0.5, rel=1e-12)
    assert asymmetry(lia, params, np.array([2000.0, 1000.0]), rtt, pair) == pytest.approx(1 / 3)
    assert asymmetry(lia, params, np.array([3000.0, 1000.0]), rtt, pair) < 1e-12
    for model in (lia, Balia(reaction="mean")):
        assert asymmetry(model, params, np.array([2000.0, 400.0]), rtt, pair) > 0.1
