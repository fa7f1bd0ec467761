# The suite is a pytest plugin (fixtures/plugin.py). Installed (.ci/bootstrap), pytest loads it
# through its pytest11 entry point; from a bare checkout, this file loads it.
from importlib.metadata import entry_points

_installed = any(ep.value == "fixtures.plugin" for ep in entry_points(group="pytest11"))
pytest_plugins = [] if _installed else ["fixtures.plugin"]
