"""What both HTTP servers (hypercorn_serve.py, uvicorn_serve.py) answer to a request they refuse before
the app has answered it: JSON errors like the app's own (docs/API.md, Connections), each with
`Connection: close`, after which the server closes the connection.
"""

from __future__ import annotations

from lmstfy_py.web.params import MAX_BODY

__all__ = ["BAD_REQUEST", "BODY_TOO_LARGE", "HEAD_TOO_LARGE", "MAX_BODY", "MAX_HEAD_BYTES", "body_for"]

# h11's max_incomplete_event_size under hypercorn, counted by uvicorn_serve.py under uvicorn.
MAX_HEAD_BYTES = 16 * 1024

BAD_REQUEST = b'{"error":"invalid HTTP request"}'
HEAD_TOO_LARGE = b'{"error":"request head too large"}'
BODY_TOO_LARGE = b'{"error":"body too large"}'  # the app's own 413 (web/params.py, read_body)

_BODIES = {413: BODY_TOO_LARGE, 431: HEAD_TOO_LARGE}


def body_for(status: int) -> bytes:
    """The JSON error of a refusal: any other status the parser gives (400; h11's 501 for a
    Transfer-Encoding other than chunked) means the request could not be read."""
    return _BODIES.get(status, BAD_REQUEST)
