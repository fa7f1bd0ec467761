"""Hardware profiles (``profiles.toml``): which model and machine thresholds were set for.

A profile may inherit from another (``parent = "NAME"``): what it leaves out comes from the
parent, its engine args and environment are laid over the parent's. A team's own file
(``--slo-profiles``) adds profiles to the bundled ones; they may inherit a bundled one, and a
name the bundled file has is an error, not an override.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from slo.errors import ScenarioFileError
from slo.objectives import parse_objective
from slo.schema import Profile
from slo.toml_table import Table, read_toml

PROFILES_FILE = Path(__file__).parent / "profiles.toml"


def load_profiles(path: Path = PROFILES_FILE, extra: Path | None = None) -> dict[str, Profile]:
    """All profiles in the file, with ``parent =`` inheritance resolved; with ``extra`` (a
    team's own file) its profiles too, which may inherit the first file's."""
    out = _read_file(path, {})
    if extra is not None:
        out.update(_read_file(extra, out))
    return out


def _read_file(path: Path, known: Mapping[str, Profile]) -> dict[str, Profile]:
    """One file's profiles; a parent may be one of the file's own or one of ``known``."""
    p = str(path)
    raw = read_toml(path)
    out: dict[str, Profile] = {}
    for name in raw:
        if name in known:
            # Refused rather than overridden: a report's "profile cpu-tiny" must mean one thing.
            raise ScenarioFileError(
                p,
                name,
                f"[{name}]",
                f"a bundled profile has this name; give yours another name and inherit it: "
                f'[my-{name}] with parent = "{name}"',
            )

    def resolve(name: str, chain: tuple[str, ...]) -> Profile:
        if name in out:
            return out[name]
        if name in known:
            return known[name]
        if name in chain:
            raise ScenarioFileError(
                p, f"{name}.parent", name, f"inheritance loop: {' -> '.join((*chain, name))}"
            )
        data = raw.get(name)
        if not isinstance(data, dict):
            raise ScenarioFileError(p, name, data, "expected a table [NAME] for each profile")
        t = Table(p, name, data)
        parent_name = t.get("parent", str, default=None)
        if parent_name is not None and parent_name not in raw and parent_name not in known:
            raise t.error(
                "parent",
                parent_name,
                f"no such profile; known: {', '.join(sorted({*raw, *known}))}",
            )
        base = resolve(parent_name, (*chain, name)) if parent_name else None
        prof = _read_profile(t, name, base)
        t.done()
        out[name] = prof
        return prof

    for name in raw:
        resolve(name, ())
    return out


def _read_profile(t: Table, name: str, base: Profile | None) -> Profile:
    """One profile's table, what it leaves out taken from ``base`` (its parent)."""
    p = t.path
    server = dict(base.server) if base else {}
    server.update(t.table("server").data)
    t.used.add("server")
    confidence = t.get("confidence", float, default=base.confidence if base else 0.95)
    if not 0.5 <= confidence < 1:
        raise t.error("confidence", confidence, "expected a level in [0.5, 1), e.g. 0.95")
    obj_t = t.table("objectives")
    objectives = tuple(parse_objective(p, obj_t.prefix, k, v) for k, v in obj_t.data.items()) or (
        base.objectives if base else ()
    )
    obj_t.used.update(obj_t.data)
    return Profile(
        name=name,
        description=t.get("description", str, default=base.description if base else ""),
        model=t.get("model", str, default=base.model if base else ...),
        device=t.choice("device", ("cpu", "cuda"), default=base.device if base else "cpu"),
        confidence=confidence,
        inconclusive=t.choice(
            "inconclusive", ("fail", "warn"), default=base.inconclusive if base else "fail"
        ),
        server=server,
        env=_env(t, base),
        server_cpus=_cpus(t, "server_cpus", base),
        client_cpus=_cpus(t, "client_cpus", base),
        objectives=objectives,
        source=p,
    )


def _env(t: Table, base: Profile | None) -> dict[str, str]:
    env = dict(base.env) if base else {}
    env_t = t.table("env")
    for k, v in env_t.data.items():
        env_t.used.add(k)
        if not isinstance(v, str):
            raise env_t.error(k, v, 'expected a string (environment values are text), e.g. "1"')
        env[k] = v
    return env


def _cpus(t: Table, k: str, base: Profile | None) -> tuple[int, ...]:
    value = t.get(
        k,
        list,
        default=list(getattr(base, k)) if base else [],
        expected="a list of CPU ids, e.g. [0]",
    )
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in value):
        raise t.error(k, value, "expected a list of CPU ids (integers >= 0), e.g. [0]")
    return tuple(value)


def load_profile(name: str, path: Path = PROFILES_FILE, extra: Path | None = None) -> Profile:
    profiles = load_profiles(path, extra)
    try:
        return profiles[name]
    except KeyError:
        raise ScenarioFileError(
            str(extra or path),
            "profile",
            name,
            f"no such profile; known: {', '.join(sorted(profiles))} "
            "(choose one with --slo-profile or SLO_PROFILE, or add it to the file)",
        ) from None
