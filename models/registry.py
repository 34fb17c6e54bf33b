"""The congestion-control models by their scenario name (`[transport] cc` and `reaction`)."""

from __future__ import annotations

from pathflow.models.base import CongestionModel
from pathflow.models.dctcp import Dctcp
from pathflow.models.reno import Reno
from pathflow.models.window import REACTIONS, WindowControl

MODELS: dict[str, type[WindowControl]] = {"reno": Reno, "dctcp": Dctcp}


def get_model(name: str, reaction: str | None = None) -> CongestionModel:
    """The model for `cc = name`; `reaction` None keeps the model's default form."""
    if name not in MODELS:
        raise ValueError(f"unknown congestion control {name!r}; allowed: {', '.join(MODELS)}")
    if reaction is None:
        return MODELS[name]()
    if reaction not in REACTIONS:
        raise ValueError(f"unknown reaction {reaction!r}; allowed: {', '.join(REACTIONS)}")
    return MODELS[name](reaction=reaction)
