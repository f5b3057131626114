"""lmstfy-py: an lmstfy-compatible job-queue server on Redis."""

__version__ = "0.1.0"
