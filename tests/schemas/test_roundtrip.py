"""Every schema type round-trips through the pydantic data converter (what crosses Temporal)."""

from __future__ import annotations

import functools
import types
import typing
from datetime import datetime, timezone
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AwareDatetime, BaseModel, ValidationError
from temporalio.contrib.pydantic import pydantic_data_converter

from agentrt import schemas
from agentrt.schemas import EVENT_ADAPTER, Event, Message, Model, OutputSpec, SessionConfig

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**9, 10**9) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@functools.cache
def strategy_for(annotation: Any) -> st.SearchStrategy[Any]:
    origin = get_origin(annotation)
    if annotation is Any:
        return JSON
    if origin is typing.Annotated:
        return strategy_for(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return st.one_of([strategy_for(a) for a in get_args(annotation)])
    if origin is Literal:
        return st.sampled_from(get_args(annotation))
    if origin is list:
        return st.lists(strategy_for(get_args(annotation)[0]), max_size=3)
    if origin is tuple:
        return st.tuples(*(strategy_for(a) for a in get_args(annotation)))
    if origin is dict:
        key, value = get_args(annotation)
        return st.dictionaries(strategy_for(key), strategy_for(value), max_size=3)
    if annotation is type(None):
        return st.none()
    if annotation is str:
        return st.text(max_size=30)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers(1, 10**6)
    if annotation is float:
        return st.floats(0.5, 1e6, allow_nan=False)
    if annotation in (datetime, AwareDatetime):
        return st.datetimes(timezones=st.just(timezone.utc))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_strategy(annotation)
    raise NotImplementedError(annotation)


def field_strategy(info: Any) -> st.SearchStrategy[Any]:
    if info.annotation is int:
        low = max([getattr(m, "ge", None) or 0 for m in info.metadata] + [1])
        high = min([getattr(m, "le", None) or 10**6 for m in info.metadata] + [10**6])
        return st.integers(low, high)
    if info.annotation in (float, float | None, Union[float, None]):
        # The field's bounds, as for int: a value outside them would only be drawn to be thrown away.
        low = max([0.5] + [b for m in info.metadata for b in (getattr(m, "ge", None), getattr(m, "gt", None)) if b is not None])
        high = min([1e6] + [b for m in info.metadata for b in (getattr(m, "le", None), getattr(m, "lt", None)) if b is not None])
        exclude_min = any(getattr(m, "gt", None) == low for m in info.metadata)
        exclude_max = any(getattr(m, "lt", None) == high for m in info.metadata)
        floats = st.floats(low, high, allow_nan=False, exclude_min=exclude_min, exclude_max=exclude_max)
        return floats if info.annotation is float else st.none() | floats
    pattern = next((m.pattern for m in info.metadata if getattr(m, "pattern", None)), None)
    if info.annotation is str and pattern:
        return st.from_regex(pattern, fullmatch=True)
    return strategy_for(info.annotation)


# Models whose fields hold rules random values almost never meet (an output spec's JSON Schema).
OUTPUT_SCHEMAS = [
    {"type": "object"},
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}, "required": ["a"]},
    {"type": "object", "$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}},
]


def _output_spec() -> st.SearchStrategy[BaseModel]:
    return st.builds(
        OutputSpec,
        name=st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True),
        description=st.none() | st.text(max_size=20),
        json_schema=st.sampled_from(OUTPUT_SCHEMAS),
        strict=st.booleans(),
        max_attempts=st.integers(1, 10),
    )


@functools.cache
def model_strategy(cls: type[BaseModel]) -> st.SearchStrategy[BaseModel]:
    if cls is OutputSpec:
        return _output_spec()
    fields = {name: field_strategy(info) for name, info in cls.model_fields.items()}

    def build(data: dict[str, Any]) -> BaseModel | None:
        try:
            return cls.model_validate(data)
        except ValidationError:
            return None  # a cross-field rule (e.g. max_output_tokens < context_window) said no

    return st.fixed_dictionaries(fields).map(build).filter(lambda value: value is not None)


MODELS = sorted(
    (obj for obj in vars(schemas).values() if isinstance(obj, type) and issubclass(obj, Model) and obj is not Model),
    key=lambda c: c.__name__,
)


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_model_round_trips_through_the_data_converter(cls: type[BaseModel], data: st.DataObject) -> None:
    value = data.draw(model_strategy(cls))
    payloads = pydantic_data_converter.payload_converter.to_payloads([value])
    (back,) = pydantic_data_converter.payload_converter.from_payloads(payloads, [cls])
    assert back == value


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_event_union_round_trips_by_its_type_tag(data: st.DataObject) -> None:
    event = data.draw(strategy_for(Event))
    payloads = pydantic_data_converter.payload_converter.to_payloads([event])
    (back,) = pydantic_data_converter.payload_converter.from_payloads(payloads, [Event])
    assert back == event and type(back) is type(event)
    assert EVENT_ADAPTER.validate_json(EVENT_ADAPTER.dump_json(event)) == event


def test_unknown_fields_are_rejected_at_the_boundary() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        SessionConfig.model_validate({"session_id": "s", "owner": "a", "workspace": "/w", "surprise": 1})


def test_every_schema_type_is_covered() -> None:
    assert len(MODELS) >= 40


def test_models_answer_the_sdks_transfer_type_lookup_without_the_metaclass() -> None:
    """The SDK looks up a transfer-type converter on every converted value's type; on a pydantic
    model a missing attribute raises from ModelMetaclass.__getattr__ (slow). ``Model`` has it, None."""
    from unittest import mock

    from pydantic._internal._model_construction import ModelMetaclass
    from temporalio.converter import _payload_converter

    from agentrt.schemas._base import TRANSFER_TYPE_CONVERTER_ATTRIBUTE

    assert _payload_converter._TRANSFER_TYPE_CONVERTER_ATTR == TRANSFER_TYPE_CONVERTER_ATTRIBUTE
    with mock.patch.object(ModelMetaclass, "__getattr__", side_effect=AssertionError("metaclass lookup")):
        assert _payload_converter._get_transfer_type_converter(Message) is None
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([Message(role="user", text="hi")])
    assert pydantic_data_converter.payload_converter.from_payloads([payload], [Message]) == [Message(role="user", text="hi")]


@pytest.mark.parametrize("threshold", [0.0, -0.5, 1.5, float("nan"), float("inf")])
def test_a_compaction_threshold_outside_0_to_1_is_refused(threshold: float) -> None:
    with pytest.raises(ValidationError, match="compact_threshold"):
        SessionConfig(session_id="s", owner="o", workspace="/w", compact_threshold=threshold)
