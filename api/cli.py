"""The ``strata`` command line: the root group; each command family is its own module.

Errors are one clear line on stderr and a non-zero exit; ``--output json`` gives
machine-readable output where a command prints data. Shared options and helpers are
``api.cli_common``. Modules: ``serve`` api.cli_serve; ``topic`` api.cli_topics; ``groups``
api.cli_groups; ``tier``, ``restore``, ``export`` api.cli_tier; ``cluster`` api.cli_cluster;
``users``, ``tokens`` api.cli_users; ``quotas`` api.cli_quotas; ``acl`` api.cli_acl;
``transactions`` api.cli_transactions; ``check`` api.cli_check; ``produce``, ``consume``,
``bench`` api.cli_records_commands (logic: api.cli_records). Each imports its heavy
dependencies inside its commands, so ``strata --help`` and every command start fast.
"""

from __future__ import annotations

import click

from api.cli_acl import acl
from api.cli_check import check
from api.cli_cluster import cluster
from api.cli_groups import groups
from api.cli_quotas import quotas
from api.cli_records_commands import bench_cmd, consume_cmd, produce_cmd
from api.cli_serve import serve
from api.cli_tier import export_cmd, restore, tier
from api.cli_topics import topic
from api.cli_transactions import transactions
from api.cli_users import tokens, users


@click.group()
def main() -> None:
    """Strata: a Kafka-compatible log service with tiered storage."""


for _command in (
    serve,
    topic,
    groups,
    restore,
    export_cmd,
    tier,
    cluster,
    users,
    acl,
    check,
    quotas,
    transactions,
    tokens,
    produce_cmd,
    consume_cmd,
    bench_cmd,
):
    main.add_command(_command)


if __name__ == "__main__":
    main()
