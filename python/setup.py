"""The wheel of the `poseidon` package: the folder CMake builds
(<build>/python/poseidon, the compiled extension and the Python files),
packed by setuptools as it is. python/make_wheel.sh runs it with Debian's
python3-build, offline (no isolated environment, nothing from PyPI)."""
import os

from setuptools import Distribution, setup


class CompiledDistribution(Distribution):
    """The wheel carries a compiled extension: tagged for this Python and platform."""

    def has_ext_modules(self):
        return True


setup(
    name="poseidon",
    version=os.environ["POSEIDON_VERSION"],
    description="Poseidon: a layer-graph deep-learning engine with distributed training built in",
    packages=["poseidon"],
    package_data={"poseidon": ["_poseidon*.so"]},
    install_requires=["numpy"],
    python_requires=">=3.9",
    distclass=CompiledDistribution,
    zip_safe=False,
)
