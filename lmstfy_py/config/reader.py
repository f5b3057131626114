"""Reading a table of a parsed TOML document: typed, range-checked values, and the file itself."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from lmstfy_py.config.model import UINT16_MAX, ConfigError


def read_toml(path: str | Path) -> dict[str, Any]:
    source = str(path)
    try:
        with open(path, "rb") as file:
            return tomllib.load(file)
    except OSError as exc:
        raise ConfigError(source, f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(source, f"not UTF-8 text (byte {exc.start})") from exc
    except tomllib.TOMLDecodeError as exc:
        # tomllib puts the position at the end, "(at line 3, column 7)"; lead with it instead.
        found = re.fullmatch(r"(.*) \(at (.+)\)", str(exc), re.DOTALL)
        problem = f"invalid TOML at {found[2]}: {found[1]}" if found else f"invalid TOML: {exc}"
        raise ConfigError(source, problem) from exc


class Reader:
    """Takes typed, range-checked values out of one table and complains about leftovers."""

    def __init__(
        self, source: str, section: str | None, table: Mapping[str, Any], label: Callable[[str], str] = str
    ) -> None:
        self.source = source
        self.section = section
        self.table = table
        self.label = label
        self.used: set[str] = set()

    def fail(self, key: str | None, problem: str) -> NoReturn:
        raise ConfigError(self.source, problem, self.section, self.label(key) if key else None)

    def take(self, key: str) -> Any:
        """The raw value of `key` (None when absent), marking the key as known."""
        self.used.add(key)
        return self.table.get(key)

    def string(self, key: str, default: str | None = None, *, empty_ok: bool = False) -> str | None:
        value = self.take(key)
        if value is None:
            return default
        if not isinstance(value, str):
            self.fail(key, f"expected a string, got {toml_type(value)}")
        if not value and not empty_ok:
            self.fail(key, "must not be empty")
        return value

    def required_string(self, key: str, default: str) -> str:
        value = self.string(key, default)
        assert value is not None  # a default was given
        return value

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        value = self.take(key)
        if value is None:
            return default
        # bool is an int in Python but never a valid number in a config file.
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(key, f"expected an integer, got {toml_type(value)}")
        if not low <= value <= high:
            self.fail(key, f"must be between {low} and {high}, got {value}")
        return value

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.required_string(key, default)
        if value not in choices:
            expected = " or ".join(f'"{choice}"' for choice in choices)
            self.fail(key, f'expected {expected}, got "{value}"')
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.take(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {toml_type(value)}")
        return value

    def addresses(self, key: str) -> tuple[str, ...]:
        value = self.take(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.fail(key, f'expected an array of "host:port" strings, got {toml_type(value)}')
        for item in value:
            if not _is_host_port(item):
                self.fail(key, f'expected "host:port" with a port 1..65535, got "{item}"')
        return tuple(value)

    def finish(self) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            self.fail(unknown[0], "unknown key")


def toml_type(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array"}
    return "a table" if isinstance(value, dict) else names.get(type(value), type(value).__name__)


def _is_host_port(text: str) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host.strip("[]")) and port.isdigit() and 1 <= int(port) <= UINT16_MAX
