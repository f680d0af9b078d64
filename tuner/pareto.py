"""Pareto arithmetic for multi-objective campaigns, pure: dominance, fronts, crowding, and
MO-ASHA's rule for continuing a trial at a rung.

Points are value vectors, one value per objective, with ``maximize[i]`` saying whether
larger is better for objective ``i``. A value that is NaN counts as the worst possible for
its objective (a trial that reported NaN is beaten by any that reported a number).

A point *dominates* another when it is at least as good on every objective and better on
one. Non-dominated sorting (NSGA-II, Deb et al. 2002) splits points into fronts: front 0
holds the points nothing dominates, front 1 those only front 0 dominates, and so on; within
a front, the crowding distance says how isolated a point is (boundary points: infinite).

MO-ASHA (Schmucker et al. 2021, "Multi-objective Asynchronous Successive Halving") ranks
the results at a rung by (front, then crowding distance, larger first) and promotes the
top ``1 / reduction_factor`` of them; :func:`is_promotable` is that rule for one trial
against the others recorded at its rung, the multi-objective twin of Optuna's
``_is_trial_promotable_to_next_rung``. With one objective it is exactly Optuna's rule.

Cost: sorting is O(m n^2) for n results of m objectives, about 0.7 s of the driver's time
per decision at a rung of 1,000 results (0.07 s at 300); a trial dominated by enough of the
rung is stopped in O(n) without sorting.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

__all__ = [
    "crowding_distance",
    "dominates",
    "is_promotable",
    "non_dominated_sort",
    "pareto_front",
    "promotable_count",
    "rank",
]

K = TypeVar("K", bound=Hashable)
Vector = tuple[float, ...]


def _oriented(values: Sequence[float], maximize: Sequence[bool]) -> Vector:
    """``values`` turned so that larger is better on every objective; NaN is -inf."""
    if len(values) != len(maximize):
        raise ValueError(
            f"a point needs one value per objective, but got {len(values)} values for "
            f"{len(maximize)} objectives ({values=})."
        )
    out = []
    for value, up in zip(values, maximize, strict=True):
        v = float(value)
        out.append(-math.inf if math.isnan(v) else (v if up else -v))
    return tuple(out)


def _dominates(a: Vector, b: Vector) -> bool:
    return all(x >= y for x, y in zip(a, b, strict=True)) and a != b


def dominates(a: Sequence[float], b: Sequence[float], maximize: Sequence[bool]) -> bool:
    """Whether ``a`` is at least as good as ``b`` on every objective and better on one."""
    return _dominates(_oriented(a, maximize), _oriented(b, maximize))


def _fronts(points: Sequence[Vector]) -> list[list[int]]:
    """Indices of ``points`` by front (fast non-dominated sort, O(m n^2))."""
    n = len(points)
    beaten_by = [0] * n  # how many points dominate i
    beats: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            if _dominates(points[i], points[j]):
                beats[i].append(j)
                beaten_by[j] += 1
            elif _dominates(points[j], points[i]):
                beats[j].append(i)
                beaten_by[i] += 1
    fronts: list[list[int]] = []
    current = [i for i in range(n) if beaten_by[i] == 0]
    while current:
        fronts.append(current)
        following = []
        for i in current:
            for j in beats[i]:
                beaten_by[j] -= 1
                if beaten_by[j] == 0:
                    following.append(j)
        current = sorted(following)
    return fronts


def non_dominated_sort(
    points: Sequence[Sequence[float]], maximize: Sequence[bool]
) -> list[list[int]]:
    """The fronts of ``points`` as lists of their indices, the best (non-dominated) first."""
    return _fronts([_oriented(p, maximize) for p in points])


def _crowding(points: Sequence[Vector], front: Sequence[int]) -> dict[int, float]:
    """Crowding distance of each point of ``front``; equal points share one distance (so
    that a tie is never broken by the order the points came in)."""
    unique = sorted({points[i] for i in front})
    distance = dict.fromkeys(unique, 0.0)
    if len(unique) <= 2:
        return dict.fromkeys(front, math.inf)
    for k in range(len(unique[0])):
        ordered = sorted(unique, key=lambda p: p[k])
        low, high = ordered[0][k], ordered[-1][k]
        distance[ordered[0]] = distance[ordered[-1]] = math.inf
        span = high - low
        if not math.isfinite(span) or span == 0:
            continue
        for before, point, after in zip(ordered, ordered[1:], ordered[2:], strict=False):
            distance[point] += (after[k] - before[k]) / span
    return {i: distance[points[i]] for i in front}


def crowding_distance(
    points: Sequence[Sequence[float]], front: Sequence[int], maximize: Sequence[bool]
) -> dict[int, float]:
    """NSGA-II's crowding distance of each point of ``front`` (indices into ``points``):
    the sum over objectives of the normalised gap between its neighbours; the extremes of
    each objective get infinity."""
    return _crowding([_oriented(p, maximize) for p in points], front)


def _sort_keys(points: Sequence[Vector]) -> list[tuple[int, float]]:
    """Each point's (front index, -crowding distance): smaller is better."""
    keys: list[tuple[int, float]] = [(0, 0.0)] * len(points)
    for index, front in enumerate(_fronts(points)):
        for i, dist in _crowding(points, front).items():
            keys[i] = (index, -dist)
    return keys


def rank(points: Sequence[Sequence[float]], maximize: Sequence[bool]) -> list[int]:
    """Indices of ``points`` best first: by front, then by crowding distance (larger first),
    then by index."""
    keys = _sort_keys([_oriented(p, maximize) for p in points])
    return sorted(range(len(points)), key=lambda i: (keys[i], i))


def pareto_front(items: Iterable[tuple[K, Sequence[float]]], maximize: Sequence[bool]) -> list[K]:
    """The keys of the items no other item dominates, in the order given."""
    pairs = list(items)
    if not pairs:
        return []
    front = set(non_dominated_sort([v for _, v in pairs], maximize)[0])
    return [key for i, (key, _) in enumerate(pairs) if i in front]


def promotable_count(population: int, reduction_factor: float) -> int:
    """How many of ``population`` results at a rung continue: the top ``1 /
    reduction_factor``, at least one (as Optuna's successive halving counts)."""
    return max(1, int(population // reduction_factor))


def is_promotable(
    value: Sequence[float],
    competing: Sequence[Sequence[float]],
    reduction_factor: float,
    maximize: Sequence[bool],
) -> bool:
    """Whether a trial with ``value`` at a rung continues, against the ``competing`` values
    the others recorded there (its own not among them).

    The rung's results (``competing`` and ``value``) are ranked by front and crowding
    distance; the trial continues when fewer than :func:`promotable_count` of them rank
    strictly ahead of it, so a tie at the cut continues (as in Optuna's rule). With one
    objective this is Optuna's ``_is_trial_promotable_to_next_rung``.

    Args:
        value: The trial's values at the rung, one per objective.
        competing: The other trials' values at the rung.
        reduction_factor: ASHA's reduction factor (> 1).
        maximize: Per objective, whether larger is better.
    """
    if reduction_factor <= 1:
        raise ValueError(f"`reduction_factor > 1` must hold, but got {reduction_factor=}.")
    points = [_oriented(value, maximize), *(_oriented(c, maximize) for c in competing)]
    count = promotable_count(len(points), reduction_factor)
    # Whatever dominates the trial is on an earlier front, so ranks ahead of it: enough of
    # them stop it without sorting the rung (O(n), where sorting is O(n^2)).
    if sum(1 for p in points[1:] if _dominates(p, points[0])) >= count:
        return False
    keys = _sort_keys(points)
    ahead = sum(1 for key in keys[1:] if key < keys[0])
    return ahead < count
