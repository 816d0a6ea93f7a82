"""The group APIs of a broker's GroupService driven with kio requests, as a client sends them and the
broker decodes them, without a socket: for the unit tests of broker.groups."""

from __future__ import annotations

import datetime
from typing import Any

from broker import protocol as p
from broker.groups.service import GroupService


async def answer(svc: GroupService, api_key: int, version: int, data: dict[str, Any]) -> Any:
    """Encode a request as a client would, decode it as the broker does, answer, encode the answer."""
    body = p.build_request(api_key, version, data)
    frame = p.encode_request(api_key, version, 7, "client", body)[4:]
    request = p.parse_request(frame, p.VERSIONS)
    response = p.build_response(api_key, version, await svc.handlers()[api_key](request))
    p.encode_response(api_key, version, 7, response)
    return response


def join_data(member_id: str = "", group: str = "g") -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": datetime.timedelta(seconds=10),
        "rebalance_timeout": datetime.timedelta(seconds=5),
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"meta"}],
    }
