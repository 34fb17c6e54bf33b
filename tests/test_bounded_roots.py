"""The rest state's numerics (`analysis.bounded_roots`) against closed forms: grouped finite
differences against an analytic Jacobian, `lift` against the position where a load fits, and
both root solvers on a bounded system with a known root."""

from __future__ import annotations

import numpy as np
import pytest

from pathflow.analysis.bounded_roots import bounded_root, grouped_differences, lift, newton_root

N = 30


def chain(x: np.ndarray) -> np.ndarray:
    """F_i = x_i^2 + sin(x_{i+1}) (..., N): each residual reads two neighbours."""
    return x**2 + np.sin(np.roll(x, -1, axis=-1))


def chain_jacobian(x: np.ndarray) -> np.ndarray:
    out = np.diag(2 * x)
    out[np.arange(N), (np.arange(N) + 1) % N] = np.cos(np.roll(x, -1))
    return out


RELATED = (np.eye(N) + np.roll(np.eye(N), 1, axis=1)) > 0  # residual i reads x_i and x_{i+1}


@pytest.mark.parametrize("batched", [False, True])
def test_grouped_differences_are_the_jacobian_in_a_few_evaluations(batched: bool) -> None:
    x = np.linspace(0.2, 0.9, N)
    calls: list[int] = []

    def counted(point: np.ndarray) -> np.ndarray:
        calls.append(1)
        return chain(point)

    jacobian = grouped_differences(counted, RELATED, np.full(N, np.inf), batched)(x)
    np.testing.assert_allclose(jacobian, chain_jacobian(x), rtol=1e-6, atol=1e-7)
    # two columns that no residual reads together are perturbed at once: a ring of 30 needs 2
    # groups (3 for an odd ring), so the point and 2 perturbations, where dense needs 31
    assert len(calls) == (2 if batched else 3)


def test_grouped_differences_step_back_below_an_upper_bound() -> None:
    x = np.full(N, 1.0)
    jacobian = grouped_differences(chain, RELATED, x.copy())(x)  # every x at its bound
    np.testing.assert_allclose(jacobian, chain_jacobian(x), rtol=1e-6, atol=1e-7)


def test_lift_raises_overloaded_positions_to_where_their_load_fits() -> None:
    # load over capacity 2 (1 - y) + 0.5 fits from y = 0.75 on; 3 - y never fits below 1
    def used(y: np.ndarray) -> np.ndarray:
        return np.array([2 * (1 - y[0]) + 0.5, 0.5, 3 - y[2]])

    lifted = lift(np.array([0.1, 0.2, 0.3]), used)
    assert lifted[0] == pytest.approx(0.75, abs=1e-11) and used(lifted)[0] <= 1.0
    assert lifted[1] == 0.2  # not overloaded: left alone
    assert lifted[2] == 1.0  # overloaded at the top: stays there


def quadratic(x: np.ndarray) -> np.ndarray:
    """Root (0.5, 0.5) in [0, 1]^2 (the other, (-0.5, 1.5), outside the bounds)."""
    return np.stack([x[..., 0] ** 2 - 0.25, x[..., 0] + x[..., 1] - 1.0], axis=-1)


@pytest.mark.parametrize("batched", [False, True])
def test_both_solvers_find_the_root_within_the_bounds(batched: bool) -> None:
    low, high = np.zeros(2), np.ones(2)
    related = np.ones((2, 2), bool)
    found = bounded_root(quadratic, np.array([0.9, 0.9]), low, high, related, 1000, batched)
    np.testing.assert_allclose(found, [0.5, 0.5], atol=1e-10)


def test_newton_converges_where_a_root_lies_within_the_bounds() -> None:
    jacobian = grouped_differences(quadratic, np.ones((2, 2), bool), np.ones(2), batched=True)
    found = newton_root(quadratic, jacobian, np.array([0.9, 0.9]), np.zeros(2), np.ones(2))
    assert found is not None
    np.testing.assert_allclose(found, [0.5, 0.5], atol=1e-12)


def test_newton_gives_up_where_no_root_lies_within_the_bounds() -> None:
    def no_root(x: np.ndarray) -> np.ndarray:
        return x**2 + 1.0

    jacobian = grouped_differences(no_root, np.ones((1, 1), bool), np.ones(1), batched=True)
    assert newton_root(no_root, jacobian, np.array([0.5]), np.zeros(1), np.ones(1)) is None


def test_the_least_squares_stops_once_it_has_stalled() -> None:
    """The least squares' residual (`_Watched`) raises once the best sum of squares has fallen
    by less than STALL_GAIN over the last STALL_EVALUATIONS evaluations, keeping the best point:
    falling by 4 % an evaluation (far more than STALL_GAIN) for 300 evaluations, then flat, it
    stops at the first evaluation whose window holds only the flat part, at the 301st point."""
    from pathflow.analysis import bounded_roots

    watched = bounded_roots._Watched(lambda x: x)
    points = [np.array([0.98**i]) for i in range(301)] + [np.array([0.98**300])] * 300
    evaluated = 0
    with pytest.raises(bounded_roots._Stalled):
        for point in points:
            evaluated += 1
            watched(point)
    assert evaluated == 301 + bounded_roots.STALL_EVALUATIONS
    assert watched.point is not None and watched.point[0] == 0.98**300
