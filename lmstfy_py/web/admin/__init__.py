"""The admin app (default 127.0.0.1:7778), one module per concern; `app.py` assembles them."""

from lmstfy_py.web.admin.app import create_admin_app

__all__ = ["create_admin_app"]
