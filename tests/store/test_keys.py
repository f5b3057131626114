"""The key schema and element packing are a storage format: changing them strands stored jobs."""

from __future__ import annotations

import struct

from lmstfy_py.store import keys


def test_key_spelling_is_pinned() -> None:
    assert keys.job("ns", "q", "ID") == "j/{ns}/q/ID"
    assert keys.ready("ns", "q") == "r/{ns}/q"
    assert keys.dead("ns", "q") == "d/{ns}/q"
    assert keys.timer("ns") == "t/{ns}"
    assert keys.wake("ns", "q") == "w/{ns}/q"
    assert keys.queues("ns") == "qs/{ns}"
    assert keys.tokens("default", "ns") == "tk/default/ns"
    assert (keys.NAMESPACES, keys.DUE_INDEX) == ("nss", "due")
    assert keys.rates("default", 29_000_000) == "rt/default/29000000"
    assert keys.rate_field("p", "ns", "q") == "p/ns/q"
    assert keys.DASHBOARD_SECRET == "ui/secret"
    # Prefixes Lua completes with "<queue>/<id>" or "<queue>" must agree with the full spellings.
    assert keys.job_prefix("ns") + "q/ID" == keys.job("ns", "q", "ID")
    assert keys.ready_prefix("ns") + "q" == keys.ready("ns", "q")
    assert keys.dead_prefix("ns") + "q" == keys.dead("ns", "q")
    assert keys.wake_prefix("ns") + "q" == keys.wake("ns", "q")


def test_elements_use_lmstfys_binary_layout() -> None:
    assert keys.pack_element(3, "AB") == struct.pack("<HH", 3, 2) + b"AB"
    assert keys.unpack_element(keys.pack_element(65535, "X" * 27)) == (65535, "X" * 27)
    member = keys.pack_timer_member("ns", "q", 2, "ID")
    assert member == b"\x02\x00ns\x01\x00q\x02\x00\x02\x00ID"
