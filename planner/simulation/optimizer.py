"""One optimizer step on flat float arrays: SGD and Adam, as the pipelined simulation applies them.

A step reads the parameters, their (summed) gradients and the optimizer's state and returns the
updated parameters and state, element by element, so the same function updates a whole tensor
(the single-device reference) and one data-parallel rank's shard of a flat buffer (ZeRO 1-3):
the shards of the update are the update of the shards.

* ``sgd``: ``p - lr * g`` (no state);
* ``adam``: Kingma and Ba's Adam from zero moments, ``t`` the step number (1 for the first step):
  ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``, ``p - lr * m_hat / (sqrt(v_hat) + eps)`` with
  ``m_hat = m / (1 - b1^t)`` and ``v_hat = v / (1 - b2^t)``; its two moments are the state (kept in f32 on
  a real device: :data:`planner.stages.cost.ADAM_BYTES_PER_ELEMENT` bytes an element).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.errors import PlanningError

__all__ = ["OPTIMIZERS", "Optimizer", "optimizer_named"]

OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class Optimizer:
    """An optimizer and its hyperparameters (module docstring); ``state_per_element``: arrays of state it keeps
    per parameter element."""

    name: str
    lr: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8

    @property
    def state_per_element(self) -> int:
        return 2 if self.name == "adam" else 0

    def init(self, params: np.ndarray) -> tuple[np.ndarray, ...]:
        """The state before the first step: zero moments for Adam, nothing for SGD."""
        return tuple(np.zeros_like(params) for _ in range(self.state_per_element))

    def step(self, params: np.ndarray, grads: np.ndarray, state: tuple, t: int = 1) -> tuple[np.ndarray, tuple]:
        """``(updated params, updated state)`` after step ``t`` (module docstring)."""
        if self.name == "sgd":
            return params - self.lr * grads, ()
        m, v = state
        m = self.beta1 * m + (1 - self.beta1) * grads
        v = self.beta2 * v + (1 - self.beta2) * grads * grads
        m_hat = m / (1 - self.beta1 ** t)
        v_hat = v / (1 - self.beta2 ** t)
        return params - self.lr * m_hat / (np.sqrt(v_hat) + self.eps), (m, v)


#: The documented defaults: SGD at learning rate 0.1; Adam at 1e-3, betas 0.9 and 0.999, eps 1e-8 (PyTorch's).
DEFAULTS = {"sgd": Optimizer("sgd", 0.1), "adam": Optimizer("adam", 1e-3)}


def optimizer_named(name: str) -> Optimizer:
    """The optimizer ``name`` with its default hyperparameters (:data:`DEFAULTS`)."""
    if name not in DEFAULTS:
        raise PlanningError(f"unknown optimizer {name!r}; use one of {', '.join(OPTIMIZERS)}")
    return DEFAULTS[name]
