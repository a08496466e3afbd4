"""Record descriptors in the paper's XML, well-formed XML, dicts and JSON, and their errors."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tesseradb.records import DescriptorError, RecordDescriptor
from tesseradb.records._descriptor import TYPES

TAXI_ID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
# The paper's Listing 1 as printed (unquoted array_len, no closing tag), with a real UUID.
TAXI = f"""<?xml version="1.0"?>
<description typeid="{TAXI_ID}"> <!-- UUID -->
<!-- The record format -->
 <field name="medallion" type="char" array_len=33/>
 <field name="license" type="char" array_len=33/>
 <field name="vendor_id" type="char" array_len=4/>
 <field name="rate_code" type="int64_t"/>
 <field name="strfwd_flag" type="char" array_len=2/>
 <field name="pickup_datetime" type="epoch_t"/>
 <field name="dropoff_datetime" type="epoch_t"/>
 <field name="passenger_count" type="int64_t"/>
 <field name="trip_time_in_secs" type="int64_t"/>
 <field name="trip_distance" type="float"/>
 <field name="pickup_longitude" type="float"/>
 <field name="pickup_latitude" type="float"/>
 <field name="dropoff_longitude" type="float"/>
 <field name="dropoff_latitude" type="float"/>
<!-- Fields for indexing -->
 <field name="pickup_latitude"/>
 <field name="pickup_longitude"/>
 <field name="pickup_datetime"/>
 <field name="passenger_count"/>
 <field name="trip_time_in_secs"/>
"""


def test_the_papers_listing_parses() -> None:
    d = RecordDescriptor.parse(TAXI)
    assert d.typeid == TAXI_ID
    assert [f.name for f in d.fields][:3] == ["medallion", "license", "vendor_id"]
    assert d.index == (
        "pickup_latitude",
        "pickup_longitude",
        "pickup_datetime",
        "passenger_count",
        "trip_time_in_secs",
    )
    assert d.field("rate_code").type == "int64" and d.field("pickup_datetime").type == "epoch_t"
    # three strings, a flag, five 64-bit integers (rate_code, two epochs, count, seconds), five floats
    assert d.record_size == 33 + 33 + 4 + 2 + 8 * 5 + 4 * 5 == d.numpy_dtype.itemsize
    assert d.arrow_schema.field("medallion").type == pa.string()
    assert d.arrow_schema.field("pickup_datetime").type == pa.int64()  # epoch seconds, as in SQLite
    assert d.arrow_schema.field("trip_distance").type == pa.float32()


def test_forms_round_trip_and_agree() -> None:
    d = RecordDescriptor.parse(TAXI)
    assert RecordDescriptor.parse(d.to_xml()) == d
    assert RecordDescriptor.parse(d.to_dict()) == d
    assert RecordDescriptor.parse(json.dumps(d.to_dict())) == d
    assert RecordDescriptor.parse(d) is d


def test_a_descriptor_without_typeid_gets_a_stable_one() -> None:
    spec = {
        "fields": [{"name": "t", "type": "epoch_t"}, {"name": "v", "type": "double"}],
        "index": ["t"],
    }
    a, b = RecordDescriptor.parse(spec), RecordDescriptor.parse(dict(spec))
    assert a.typeid == b.typeid
    assert RecordDescriptor.parse({**spec, "index": ["t", "v"]}).typeid != a.typeid


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"fields": [{"name": "x", "type": "int128"}], "index": ["x"]}, "unknown type 'int128'"),
        ({"fields": [{"name": "s", "type": "char"}], "index": ["s"]}, "needs array_len"),
        (
            {"fields": [{"name": "s", "type": "char", "array_len": 4}], "index": ["s"]},
            "is a char field",
        ),
        ({"fields": [{"name": "x", "type": "float"}], "index": ["y"]}, "'y' is not a field"),
        ({"fields": [{"name": "x", "type": "float"}], "index": []}, "no indexing fields"),
        (
            {
                "fields": [{"name": f"f{i}", "type": "int8"} for i in range(10)],
                "index": [f"f{i}" for i in range(10)],
            },
            "at most 9",
        ),
        (
            {
                "fields": [{"name": "x", "type": "int8"}, {"name": "X", "type": "int8"}],
                "index": ["x"],
            },
            "appears twice",
        ),
        ({"fields": [{"name": "x", "type": "int8"}], "index": ["x", "x"]}, "listed twice"),
        ({"fields": [{"name": "1x", "type": "int8"}], "index": ["1x"]}, "no valid name"),
        (
            {"typeid": "...", "fields": [{"name": "x", "type": "int8"}], "index": ["x"]},
            "not a UUID",
        ),
        ({"fields": [], "index": []}, "non-empty list of fields"),
        ('{"fields": [', "JSON is malformed at line 1"),
        (
            "<description><field name='x' type='int8'/><field name='x'/>",
            None,
        ),  # fine: closed for us
        (
            "<description><field name='x' type='int8'><field name='x'/></description>",
            "malformed at line 1",
        ),
        ("<records/>", "root element is <description>"),
        (
            "<description><field name='x'/><field name='y' type='int8'/></description>",
            "comes after the indexing fields",
        ),
        (42, "XML text, JSON text or a dict"),
    ],
)
def test_errors_name_the_field_and_the_problem(source: object, message: str | None) -> None:
    if message is None:
        assert RecordDescriptor.parse(source).index == ("x",)
        return
    with pytest.raises(DescriptorError, match=message):
        RecordDescriptor.parse(source)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(TYPES), st.integers(1, 40)),
        min_size=1,
        max_size=12,
    ),
    st.data(),
)
def test_random_descriptors_round_trip_and_describe_their_binary_form(
    types: list[tuple[str, int]], data: st.DataObject
) -> None:
    fields = [
        {"name": f"f{i}", "type": t, **({"array_len": n} if t == "char" else {})}
        for i, (t, n) in enumerate(types)
    ]
    numeric = [f["name"] for f in fields if f["type"] != "char"]
    if not numeric:
        return
    index = data.draw(
        st.lists(st.sampled_from(numeric), min_size=1, max_size=min(9, len(numeric)), unique=True)
    )
    d = RecordDescriptor.parse({"fields": fields, "index": index})
    assert (
        RecordDescriptor.parse(d.to_xml()) == d == RecordDescriptor.parse(json.dumps(d.to_dict()))
    )
    assert (
        d.numpy_dtype.itemsize
        == d.record_size
        == sum(np.dtype(f.numpy_type).itemsize for f in d.fields)
    )
    assert d.arrow_schema.names == [f["name"] for f in fields]
