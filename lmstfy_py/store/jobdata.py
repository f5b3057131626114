"""A job's data as the scripts store it (field d of its hash): msgpack of [body, attributes]."""

from __future__ import annotations

import msgpack


def encode_data(body: bytes, attributes: dict[str, str] | None) -> bytes:
    packed: bytes = msgpack.packb([body, attributes], use_bin_type=True)
    return packed


def decode_data(data: bytes) -> tuple[bytes, dict[str, str] | None]:
    body, attributes = msgpack.unpackb(data, raw=False)
    return body, attributes
