"""``python -m api.cli``: the ``strata`` command."""

from api.cli import main

main()
