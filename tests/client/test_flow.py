"""SPEC 14 through Client and AsyncClient against a real server: groups, the limits in settings,
promote, and the delay horizon in stats."""

from __future__ import annotations

import pytest

from lmstfy_py.client import BadRequest, Client, Settings


def test_settings_set_and_unset_the_limits(client: Client) -> None:
    assert client.settings("q") == Settings(keep=0, events=0, max_reserved=0, rate=0.0, burst=None)
    limited = client.settings("q", max_reserved=2, rate=0.5, burst=3, group_concurrency=4)
    assert limited == Settings(keep=0, events=0, max_reserved=2, rate=0.5, burst=3, group_concurrency=4)
    assert client.settings("q", burst=None).burst is None  # sent as an empty burst=: back to the default
    assert client.settings("q", rate=1e-05).rate == 1e-05  # sent as 0.00001, the digits the server reads
    assert client.settings("q", rate="2.25").rate == 2.25
    with pytest.raises(BadRequest, match="invalid max_reserved"):
        client.settings("q", rate=7, max_reserved=-1)
    assert client.settings("q") == Settings(0, 0, 2, 2.25, None, 4)  # the refused PUT changed nothing
