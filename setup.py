"""Builds the optional C record walk (hot/_recordwalk.c), fdatasync thread (hot/_syncer.c) and
the Spark scan's record decoder (spark/_decode.c); pyproject.toml holds everything else.

``optional=True``: without a C compiler the install still succeeds and
hot.record_validation uses its pure-Python walk. ``pip install -e .`` builds the module in
place (hot/_recordwalk.*.so), where tests and brokers run from the checkout find it.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "hot._recordwalk",
            ["hot/_recordwalk.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Werror=vla"],
            optional=True,
        ),
        # Record decoding into Arrow buffers for the Spark scan (spark.columnar; optional too).
        Extension(
            "spark._decode",
            ["spark/_decode.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Werror=vla"],
            optional=True,
        ),
        # fdatasync off the GIL for fsync-mode group commit (hot.loop_flush).
        Extension(
            "hot._syncer",
            ["hot/_syncer.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Werror=vla"],
            optional=True,
        ),
    ]
)
