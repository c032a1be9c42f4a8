"""Builds the optional C record walk (hot/_recordwalk.c); pyproject.toml holds everything else.

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
        )
    ]
)
