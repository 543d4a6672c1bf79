"""Build hook for the optional compiled codecs (everything else is in pyproject.toml).

The hot paths of the protocol and the store have Cython twins (``*/_speedups.pyx``).
They are built by a normal install when a C compiler is there; without one, or with
``ROCKLET_NO_EXTENSIONS=1`` at install time, the install still succeeds and Rocklet runs
its pure-Python code (``rocklet.speedups.active()`` tells which).
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

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


class _BuildExt(build_ext):
    """``build_ext`` that compiles side by side and replaces in-place modules safely.

    The extensions are independent, so they compile in parallel, one per core. An
    editable install copies each built module into the source tree. Copying over
    the file truncates the inode every running Rocklet process has mapped (a SIGBUS
    waiting to happen); unlinking first leaves them the old inode.
    """

    def finalize_options(self):  # type: ignore[no-untyped-def]
        # An explicit ``-j``/``--parallel`` still wins.
        if not self.parallel:
            self.parallel = os.cpu_count() or 1
        super().finalize_options()

    def copy_file(self, infile, outfile, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(outfile).endswith((".so", ".pyd")) and os.path.exists(outfile):
            os.unlink(outfile)
        return super().copy_file(infile, outfile, *args, **kwargs)


setup(ext_modules=_extensions(), cmdclass={"build_ext": _BuildExt})
