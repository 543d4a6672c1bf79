"""Build hook for the optional compiled codecs (everything else is in pyproject.toml).

The hot paths of the protocol and the store have Cython twins (``*/_speedups.pyx``).
They are built by a normal install when a C compiler is there; without one, or with
``ROCKLET_NO_EXTENSIONS=1`` at install time, the install still succeeds and Rocklet runs
its pure-Python code (``rocklet.speedups.active()`` tells which).
"""

import os

from setuptools import Extension, setup

_EXTENSIONS = [
    ("rocklet.protocol._speedups", "protocol/_speedups.pyx"),
    ("rocklet.store._speedups", "store/_speedups.pyx"),
]


def _extensions() -> list[Extension]:
    if os.environ.get("ROCKLET_NO_EXTENSIONS"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:  # built without the build requirements (e.g. --no-build-isolation)
        return []
    modules = [
        Extension(name, [source], optional=True, extra_compile_args=["-O2"])
        for name, source in _EXTENSIONS
        if os.path.exists(source)
    ]
    return cythonize(modules, language_level=3, quiet=True)


setup(ext_modules=_extensions())
