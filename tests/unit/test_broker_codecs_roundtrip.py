"""Every version of every API the broker accepts round-trips through its codecs, against kio.

Requests go through `encode_request` (what the broker's own clients send) and `parse_request` (what
the server reads); responses through `encode_response` and `parse_response`. Bodies come from kio's
own hypothesis strategies for each version's classes, so every field of every version is exercised.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import Records, TZAware, i64Timedelta

from broker import protocol as p

# kio leaves record batches opaque (as the broker does): any bytes, or none
st.register_type_strategy(Records, st.binary(max_size=64).map(Records))
# kio's own strategy draws durations up to timedelta.max, which its reader (microseconds in an
# int64) cannot hold, nor hold exactly; Kafka's int64 millisecond fields carry -1 or real durations.
st.register_type_strategy(
    i64Timedelta,
    st.integers(-(2**40), 2**40).map(lambda ms: i64Timedelta.parse(datetime.timedelta(milliseconds=ms))),
)

# kio's own strategy draws timestamps in any time zone up to datetime.max, some of which (zone
# gaps and folds, the far end of the range) do not compare equal after the int64 millisecond round
# trip. Draw what Kafka's timestamps hold: UTC instants (kio's TZAware has whole seconds).
st.register_type_strategy(
    TZAware,
    st.integers(0, 2**33).map(lambda s: TZAware.parse(datetime.datetime.fromtimestamp(s, tz=datetime.UTC))),
)

ACCEPTED = p.VERSIONS
CASES = [(key, version) for key, (low, high) in sorted(ACCEPTED.items()) for version in range(low, high + 1)]
SETTINGS = settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))


def _id(case: tuple[int, int]) -> str:
    return f"{p.api_name(case[0])}-v{case[1]}"


@pytest.mark.parametrize("case", CASES, ids=_id)
@SETTINGS
@given(data=st.data())
def test_request_round_trips(case: tuple[int, int], data: st.DataObject) -> None:
    api_key, version = case
    body: Any = data.draw(st.from_type(p.request_class(api_key, version)))
    frame = p.encode_request(api_key, version, 77, "client-ü", body)
    request = p.parse_request(frame[4:], ACCEPTED)
    assert (request.api_key, request.api_version, request.correlation_id) == (api_key, version, 77)
    assert request.client_id == "client-ü"
    assert request.body == body


@pytest.mark.parametrize("case", CASES, ids=_id)
@SETTINGS
@given(data=st.data())
def test_response_round_trips(case: tuple[int, int], data: st.DataObject) -> None:
    api_key, version = case
    body: Any = data.draw(st.from_type(p.response_class(api_key, version)))
    frame = p.encode_response(api_key, version, 78, body)
    assert p.SIZE.unpack_from(frame)[0] == len(frame) - 4
    correlation_id, parsed = p.parse_response(api_key, version, frame[4:])
    assert (correlation_id, parsed) == (78, body)


def test_every_accepted_version_has_kio_classes() -> None:
    for api_key, version in CASES:
        assert p.request_class(api_key, version).__version__ == version
        assert p.response_class(api_key, version).__version__ == version


@pytest.mark.parametrize("version", [0, 1, 2, 14])
def test_produce_outside_the_accepted_range_is_unsupported(version: int) -> None:
    import struct

    frame = struct.pack(">hhi", p.API_PRODUCE, version, 9) + b"\xff\xff"
    with pytest.raises(p.UnsupportedVersion) as info:
        p.parse_request(frame, ACCEPTED)
    assert str(info.value) == f"Produce (api 0) v{version} is not supported: this broker accepts v3-v13"


def test_api_versions_lists_produce_from_v0_as_kafka_4_does() -> None:
    advertised = p.advertised_versions(ACCEPTED)
    assert advertised[p.API_PRODUCE] == (0, 13)
    assert {k: v for k, v in advertised.items() if k != p.API_PRODUCE} == {
        k: v for k, v in ACCEPTED.items() if k != p.API_PRODUCE
    }
