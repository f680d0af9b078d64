"""Built-in trainables: PyTorch workloads that follow the tuner trainable contract.

A trainable is any importable ``module:function`` with signature ``fn(config: dict) -> None``
that reports metrics once per epoch with ``ray.tune.report`` and restores from
``ray.tune.get_checkpoint()``. The built-ins below are examples of that contract, not
special cases: a campaign may name one of them or any ``package.module:function`` path.
"""

from __future__ import annotations

BUILTINS: dict[str, str] = {
    "digits_cnn": "trainables.digits:train",
    "tabular_mlp": "trainables.tabular:train",
    "charlm": "trainables.charlm:train",
}

__all__ = ["BUILTINS"]
