"""The congestion-control models by their scenario name (`[transport] cc`)."""

from __future__ import annotations

from pathflow.models.base import CongestionModel
from pathflow.models.dctcp import Dctcp
from pathflow.models.reno import Reno

MODELS: dict[str, CongestionModel] = {model.name: model for model in (Reno(), Dctcp())}


def get_model(name: str) -> CongestionModel:
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown congestion control {name!r}; allowed: {', '.join(MODELS)}") from None
