"""Build the Cython kernels (``ldcore``) and the cffi RocksDB binding (``logdevice._rocksdb``).

Cython directives are set once here for every kernel.  ``LDCORE_DEBUG=1`` turns bounds
and wraparound checks back on (and keeps line tracing info) for chasing a crash.
``LDCORE_MODULES=scd,window`` builds only the named kernels (handy while one of them is
being edited and another does not compile yet).  ``LD_NO_EXTENSIONS=1`` builds none: the
editable install (``ci/python-deps.sh``) uses it, because ``make build`` compiles every
extension in place right after, and compiling them for the install too doubled the time.
"""

import os
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
DEBUG = os.environ.get("LDCORE_DEBUG") == "1"

# Kernels that link a C library besides libc.
LIBRARIES = {"codec": ["zstd"]}

DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": not DEBUG,
    "embedsignature": True,
}


def kernel_extensions():
    only = {m for m in os.environ.get("LDCORE_MODULES", "").split(",") if m}
    for pyx in sorted((HERE / "src" / "ldcore").glob("*.pyx")):
        name = pyx.stem
        if only and name not in only:
            continue
        yield Extension(
            f"ldcore.{name}",
            [str(pyx.relative_to(HERE))],
            include_dirs=[numpy.get_include()],
            libraries=LIBRARIES.get(name, []),
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            extra_compile_args=["-O3"] + (["-O0", "-g"] if DEBUG else []),
        )


if os.environ.get("LD_NO_EXTENSIONS") == "1":
    setup()
else:
    setup(
        ext_modules=cythonize(
            list(kernel_extensions()),
            compiler_directives=DIRECTIVES,
            include_path=["src"],
            nthreads=os.cpu_count() or 1,
            quiet=True,
        ),
        cffi_modules=["_ext/build_rocksdb.py:ffi"],
    )
