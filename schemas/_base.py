"""The strict base model every type that crosses a process or history boundary uses."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """Pydantic v2 model with ``extra="forbid"``: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")
