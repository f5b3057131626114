"""The HTTP layer: two Starlette apps built around one Runtime.

`create_data_app` serves lmstfy's data plane (default port 7777), `create_admin_app` its
admin API (default 127.0.0.1:7778). Handlers only parse, make one engine (or token store)
call and shape the answer; errors become responses in `errors.py` alone. `lmstfy-py serve`
serves the data app behind `hot.HotRoutes`, which answers its four hot routes without
Starlette's stack (server.py).
"""

from lmstfy_py.web.admin import create_admin_app
from lmstfy_py.web.data import create_data_app

__all__ = ["create_admin_app", "create_data_app"]
