"""What measures lmstfy-py: load benchmarks, their ceilings, and the figures the README quotes.

Each module runs as a program from the checkout's root (`.venv/bin/python -m benchmarks.NAME --help`); the crash test,
the timer and the long-poll benchmarks also offer their measuring function (`run`), which the
test suite calls to assert on the figures. They start their servers with benchmarks/harness/.
"""
