"""The quick check of plain input schemas never lets through what jsonschema would refuse.

`PreparedSchema` accepts arguments with a compiled check before it asks jsonschema; that check may
be unsure (then jsonschema decides), but it must never accept an instance jsonschema rejects, in
any draft. Hypothesis draws schemas from the plain keywords the check knows, and JSON values.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import validators

from proxy.downstream.calls import _validation
from proxy.downstream.calls._validation import PreparedSchema, find_error

real_validator = _validation._validator

pytestmark = pytest.mark.anyio

DRAFTS = ["http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#",
          "https://json-schema.org/draft/2020-12/schema"]
TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-5, 5, allow_nan=False)
    | st.sampled_from(["a", "b", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    max_leaves=8,
)


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3),
        "enum": st.lists(st.sampled_from(["a", "b", 1, True, None]), min_size=1, max_size=3),
        "minimum": st.integers(-3, 3), "maximum": st.integers(-3, 3),
        "minLength": st.integers(0, 2), "maxLength": st.integers(0, 2),
        "minItems": st.integers(0, 2), "maxItems": st.integers(0, 2),
        "description": st.just("annotation only"), "format": st.just("email"),
    })


schemas = st.recursive(
    _leaf(),
    lambda inner: st.builds(
        lambda base, props, required, additional, items: {
            **base, "properties": props, "required": required,
            **({} if additional is None else {"additionalProperties": additional}),
            **({} if items is None else {"items": items})},
        _leaf(),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
        st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
        st.none() | st.booleans() | inner,
        st.none() | inner,
    ),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, instance=json_values, draft=st.sampled_from(DRAFTS))
def test_what_the_quick_check_accepts_jsonschema_accepts(schema: dict[str, Any], instance: Any, draft: str) -> None:
    schema = {"$schema": draft, **schema}
    prepared = PreparedSchema(schema)
    valid = validators.validator_for(schema)(schema).is_valid(instance)
    assert (prepared.first_error(instance) is None) == valid


async def test_a_plain_schema_still_gets_jsonschemas_error(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[object] = []
    monkeypatch.setattr(_validation, "_validator", lambda schema: built.append(schema) or real_validator(schema))
    schema = {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}}, "required": ["size"]}
    prepared = PreparedSchema(schema)
    assert await find_error({"size": 2}, prepared) is None
    assert built == []  # valid arguments of a plain schema: the quick check answered, jsonschema was not needed
    error = await find_error({"size": 0}, prepared)
    assert error is not None and error.validator == "minimum"
    error = await find_error({"size": 1.5}, prepared)
    assert error is not None and error.validator == "type"
    assert built == [schema]  # built once, for the first invalid call
