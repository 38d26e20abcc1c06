"""Shared helpers for the model-layer tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.errors import ModelError

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
BAD_MODELS = Path(__file__).resolve().parent / "bad_models"


def model_error(fn, *args, **kwargs) -> ModelError:
    """Call ``fn`` and return the ModelError it must raise."""
    with pytest.raises(ModelError) as info:
        fn(*args, **kwargs)
    return info.value
