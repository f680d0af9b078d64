"""Pareto arithmetic and MO-ASHA's rung rule, on fake trials (value vectors), without Ray."""

from __future__ import annotations

import math
import random

import pytest
from optuna.pruners._successive_halving import _is_trial_promotable_to_next_rung
from optuna.study import StudyDirection

from tuner.pareto import (
    crowding_distance,
    dominates,
    is_promotable,
    non_dominated_sort,
    pareto_front,
    promotable_count,
    rank,
)

MAX_MIN = (True, False)  # e.g. (val_acc, param_count)


def test_dominance_follows_each_objectives_mode() -> None:
    assert dominates((0.9, 100), (0.8, 200), MAX_MIN)
    assert dominates((0.9, 100), (0.9, 200), MAX_MIN)  # as good on one, better on the other
    assert not dominates((0.9, 100), (0.9, 100), MAX_MIN)  # equal: neither
    assert not dominates((0.9, 200), (0.8, 100), MAX_MIN)  # a trade-off: neither
    assert not dominates((0.8, 100), (0.9, 100), MAX_MIN)
    assert dominates((1.0, 1.0), (2.0, 2.0), (False, False))
    assert dominates((2.0, 2.0), (1.0, 1.0), (True, True))


def test_nan_is_the_worst_value() -> None:
    assert dominates((0.1, 500), (math.nan, 500), MAX_MIN)
    assert not dominates((math.nan, 500), (0.1, 500), MAX_MIN)


def test_lengths_must_match_the_objectives() -> None:
    with pytest.raises(ValueError, match="one value per objective"):
        dominates((1.0,), (1.0, 2.0), MAX_MIN)


def test_non_dominated_sort_splits_points_into_fronts() -> None:
    points = [
        (0.95, 900),  # 0: front 0 (most accurate)
        (0.80, 100),  # 1: front 0 (smallest)
        (0.90, 400),  # 2: front 0 (a trade-off)
        (0.85, 500),  # 3: dominated by 2 only -> front 1
        (0.70, 950),  # 4: dominated by 0, 2 and 3 -> front 2
        (0.90, 400),  # 5: equal to 2 -> front 0 with it
    ]
    assert non_dominated_sort(points, MAX_MIN) == [[0, 1, 2, 5], [3], [4]]
    assert pareto_front([(f"t{i}", p) for i, p in enumerate(points)], MAX_MIN) == [
        "t0",
        "t1",
        "t2",
        "t5",
    ]
    assert pareto_front([], MAX_MIN) == []


def test_crowding_distance_of_a_front() -> None:
    # Oriented (larger is better): (0.9, -100), (0.8, -50), (0.6, -10); spans 0.3 and 90.
    points = [(0.9, 100), (0.8, 50), (0.6, 10)]
    distance = crowding_distance(points, [0, 1, 2], MAX_MIN)
    assert distance[0] == math.inf and distance[2] == math.inf
    assert distance[1] == pytest.approx((0.9 - 0.6) / 0.3 + (100 - 10) / 90)


def test_equal_points_share_their_crowding_distance() -> None:
    points = [(0.9, 100), (0.8, 50), (0.8, 50), (0.6, 10)]
    distance = crowding_distance(points, [0, 1, 2, 3], MAX_MIN)
    assert distance[1] == distance[2] < math.inf


def test_rank_orders_by_front_then_crowding() -> None:
    points = [
        (0.85, 500),  # front 1
        (0.9, 100),  # front 0, boundary
        (0.8, 50),  # front 0, middle (finite crowding)
        (0.6, 10),  # front 0, boundary
    ]
    assert rank(points, MAX_MIN) == [1, 3, 2, 0]


@pytest.mark.parametrize(("population", "factor", "count"), [(1, 3, 1), (5, 3, 1), (6, 3, 2)])
def test_promotable_count(population: int, factor: float, count: int) -> None:
    assert promotable_count(population, factor) == count


def test_the_first_trial_at_a_rung_continues() -> None:
    assert is_promotable((0.1, 10_000), [], 3, MAX_MIN)


def test_a_dominated_trial_stops_and_a_front_trial_continues() -> None:
    rung = [(0.95, 900), (0.80, 100), (0.90, 400), (0.85, 500), (0.82, 600)]
    # Six results, factor 3: two continue. Dominated by most of the rung: stops.
    assert not is_promotable((0.70, 950), rung, 3, MAX_MIN)
    # Smallest of all: a new boundary of front 0, ahead of nothing but tied with nothing.
    assert is_promotable((0.60, 20), rung, 3, MAX_MIN)
    # On front 0 but in its crowded middle: the two boundaries rank ahead of it.
    assert not is_promotable((0.91, 450), rung, 3, MAX_MIN)


def test_minimise_and_maximise_mixes_flip_the_decision() -> None:
    rung = [(0.9, 100.0), (0.5, 900.0)]
    # (0.5, 950): less accurate and larger than (0.9, 100): stops when accuracy is
    # maximised and size minimised...
    assert not is_promotable((0.5, 950.0), rung, 3, (True, False))
    # ... and dominates both when accuracy is minimised and size maximised.
    assert is_promotable((0.5, 950.0), rung, 3, (False, True))
    assert not is_promotable((0.95, 50.0), rung, 3, (False, True))
    assert is_promotable((0.95, 50.0), rung, 3, (True, False))


def test_ties_at_the_cut_continue() -> None:
    rung = [(0.9, 100.0), (0.9, 100.0), (0.5, 900.0), (0.4, 950.0), (0.3, 990.0)]
    # Six results, two continue; the candidate ties with the two best: none is ahead of it.
    assert is_promotable((0.9, 100.0), rung, 3, MAX_MIN)
    # One objective: ties likewise.
    assert is_promotable((0.9,), [(0.9,), (0.9,), (0.9,)], 3, (True,))


@pytest.mark.parametrize("maximize", [True, False])
@pytest.mark.parametrize("factor", [2, 3, 4])
def test_one_objective_is_optunas_successive_halving_rule(maximize: bool, factor: int) -> None:
    direction = StudyDirection.MAXIMIZE if maximize else StudyDirection.MINIMIZE
    rng = random.Random(factor * 10 + maximize)
    for _ in range(300):
        others = [float(rng.randint(0, 6)) for _ in range(rng.randint(0, 12))]
        value = float(rng.randint(0, 6))
        expected = _is_trial_promotable_to_next_rung(value, [*others, value], factor, direction)
        got = is_promotable((value,), [(v,) for v in others], factor, (maximize,))
        assert got == expected, (value, others)


def test_reduction_factor_must_exceed_one() -> None:
    with pytest.raises(ValueError, match=r"`reduction_factor > 1` must hold"):
        is_promotable((1.0,), [], 1, (True,))


@pytest.mark.parametrize("objectives", [2, 3])
def test_is_promotable_agrees_with_ranking_the_whole_rung(objectives: int) -> None:
    # The reference: rank every result by (front, crowding) and count those strictly ahead.
    rng = random.Random(objectives)
    maximize = tuple(rng.random() < 0.5 for _ in range(objectives))
    for _ in range(300):
        rung = [
            tuple(float(rng.randint(0, 4)) for _ in range(objectives))
            for _ in range(rng.randint(0, 14))
        ]
        value = tuple(float(rng.randint(0, 4)) for _ in range(objectives))
        points = [value, *rung]
        fronts = non_dominated_sort(points, maximize)
        key = {}
        for index, front in enumerate(fronts):
            for i, dist in crowding_distance(points, front, maximize).items():
                key[i] = (index, -dist)
        ahead = sum(1 for i in range(1, len(points)) if key[i] < key[0])
        expected = ahead < promotable_count(len(points), 3)
        assert is_promotable(value, rung, 3, maximize) == expected, (value, rung)
