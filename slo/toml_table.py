"""Reading TOML tables key by key, with errors that name the file, the key, the value and the fix.

Generic: the scenario parser and the profiles both read their files through ``Table``, which
also reports keys nobody read (a misspelt key must not be silently ignored).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slo.errors import ScenarioFileError, UnitError
from slo.units import Dimension, example_quantity, parse_quantity


class Table:
    """A TOML table being read: tracks the keys used so unknown keys are reported."""

    def __init__(self, path: str, prefix: str, data: Mapping[str, Any]) -> None:
        self.path, self.prefix, self.data = path, prefix, data
        self.used: set[str] = set()

    def key(self, k: str) -> str:
        return f"{self.prefix}.{k}" if self.prefix else k

    def error(self, k: str, value: object, expected: str) -> ScenarioFileError:
        return ScenarioFileError(self.path, self.key(k), value, expected)

    def get(
        self, k: str, typ: type | tuple[type, ...], default: Any = ..., expected: str = ""
    ) -> Any:
        self.used.add(k)
        if k not in self.data:
            if default is ...:
                raise self.error(k, None, f"missing; expected {expected or _type_name(typ)}")
            return default
        v = self.data[k]
        # bool is an int in Python; a TOML true is never a number here.
        if not isinstance(v, typ) or (isinstance(v, bool) and bool not in _as_tuple(typ)):
            raise self.error(k, v, f"expected {expected or _type_name(typ)}")
        return v

    def table(self, k: str, *, required: bool = False) -> Table:
        v = self.get(k, dict, default=... if required else {}, expected="a table")
        return Table(self.path, self.key(k), v)

    def quantity(self, k: str, dim: Dimension, default: Any = ...) -> Any:
        v = self.get(k, (str, int, float), default=default, expected="a quantity with a unit")
        if v is default and k not in self.data:
            return default
        if isinstance(v, (int, float)) and dim is not Dimension.RATIO:
            raise self.error(k, v, f'needs a unit, e.g. "{example_quantity(dim, str(v))}"')
        try:
            return parse_quantity(str(v), dim, what=self.key(k))
        except UnitError as e:
            raise self.error(k, v, str(e)) from None

    def positive_int(
        self,
        k: str,
        default: Any = ...,
        minimum: int = 1,
        maximum: int | None = None,
        why_maximum: str = "",
    ) -> Any:
        v = self.get(k, int, default=default, expected=f"an integer >= {minimum}")
        if isinstance(v, int) and v < minimum:
            raise self.error(k, v, f"expected an integer >= {minimum}")
        return v if maximum is None else self.at_most(k, v, maximum, why_maximum)

    def at_most(self, k: str, v: Any, maximum: int, why: str = "") -> Any:
        """``why``: the reason for the bound and the fix, after "at most N"."""
        if isinstance(v, int) and v > maximum:
            raise self.error(k, v, f"at most {maximum}{why}")
        return v

    def choice(self, k: str, choices: tuple[str, ...], default: Any = ...) -> Any:
        v = self.get(k, str, default=default, expected=f"one of {', '.join(choices)}")
        if v not in choices:
            raise self.error(k, v, f"expected one of {', '.join(choices)}")
        return v

    def done(self) -> None:
        extra = sorted(set(self.data) - self.used)
        if extra:
            k = extra[0]
            known = ", ".join(sorted(self.used))
            raise self.error(k, self.data[k], f"unknown key; known keys here: {known}")


def _as_tuple(typ: type | tuple[type, ...]) -> tuple[type, ...]:
    return typ if isinstance(typ, tuple) else (typ,)


def _type_name(typ: type | tuple[type, ...]) -> str:
    names = {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        dict: "a table",
        list: "a list",
    }
    return " or ".join(names.get(t, t.__name__) for t in _as_tuple(typ))


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ScenarioFileError(str(path), "", None, "file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioFileError(str(path), "", None, f"not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise ScenarioFileError(
            str(path), "", None, f"not UTF-8 text ({e}); TOML files are UTF-8: save it as UTF-8"
        ) from None
    except OSError as e:
        raise ScenarioFileError(
            str(path), "", None, f"cannot be read ({e.strerror}): pass a readable .toml file"
        ) from None
