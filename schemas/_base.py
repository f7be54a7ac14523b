"""The strict base model every type that crosses a process or history boundary uses."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = [
    "Model",
]

# The attribute the Temporal SDK looks up on the type of every value it converts, for a
# transfer-type converter (temporalio.converter, ``transfer_type_convertible``). On a pydantic
# model class a missing attribute goes through ``ModelMetaclass.__getattr__``, which builds
# and raises an AttributeError: a few percent of a worker's CPU, once per payload. Present
# and None on ``Model``, the lookup is a plain class attribute read and still finds no converter.
# (So ``transfer_type_convertible`` refuses a ``Model`` subclass; none needs one.)
TRANSFER_TYPE_CONVERTER_ATTRIBUTE = "__temporal_transfer_type_converter"


class Model(BaseModel):
    """Pydantic v2 model with ``extra="forbid"``: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


# Set after the class body: written inside it, the name would be mangled (it starts with "__").
type.__setattr__(Model, TRANSFER_TYPE_CONVERTER_ATTRIBUTE, None)
