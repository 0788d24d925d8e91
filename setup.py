"""Maps the repository's two top-level folders to one installed import name: conformance/ is
gpt2_conformance and backends/ is gpt2_conformance.backends, so the wheel puts nothing but
gpt2_conformance into site-packages (generic names like `backends` would shadow, or be
shadowed by, a user's own). Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

PACKAGE_DIR = {"gpt2_conformance": "conformance", "gpt2_conformance.backends": "backends"}


def packages() -> list[str]:
    out = []
    for name, folder in PACKAGE_DIR.items():
        out += [name] + [f"{name}.{sub}" for sub in find_packages(folder) if not sub.startswith("backends")]
    return out


setup(package_dir=PACKAGE_DIR, packages=packages())
