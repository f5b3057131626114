"""lmstfy-py: an lmstfy-compatible job-queue server on Redis."""

import os

__version__ = "0.1.0"

# What `serve -sv` says at start and on every GET /ready.
SKIP_TOKEN_CHECK_WARNING = (
    "token checks are OFF (-sv): any client can publish, consume and delete the jobs of every "
    "namespace without a valid token. Development only: never run a shared server so"
)


def build_info() -> dict[str, str]:
    """The version and build (GET /version, `serve -v`); the build from LMSTFY_BUILD_COMMIT and LMSTFY_BUILD_DATE."""
    return {
        "version": __version__,
        "build_commit": os.environ.get("LMSTFY_BUILD_COMMIT") or "unknown",
        "build_date": os.environ.get("LMSTFY_BUILD_DATE") or "unknown",
    }
