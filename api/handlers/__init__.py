"""The Kafka APIs' handlers: one module per API family, each API handled exactly once.

``HANDLERS`` maps every API key the codec advertises (kwire.APIS) to its handler;
api.kafka_server wraps each in its ACL guard (``GUARDS``, api.security.guards) and Produce
and Fetch in their byte-rate quotas (api.handlers.quotas). A handler translates wire
messages to the broker's calls and errors to Kafka codes; the behaviour itself lives
below, in the broker, the replica manager, the controller, the group coordinator and
api.security.

=================  ==========================================================
module             APIs
=================  ==========================================================
``versions``       ApiVersions
``sasl``           SaslHandshake, SaslAuthenticate
``topics``         Metadata, CreateTopics, DeleteTopics, CreatePartitions
``produce``        Produce
``fetch``          Fetch (consumer and replica/follower fetches)
``offsets``        ListOffsets, OffsetForLeaderEpoch
``configs``        DescribeConfigs, AlterConfigs, IncrementalAlterConfigs
``reassignment``   AlterPartitionReassignments, ListPartitionReassignments
``groups``         FindCoordinator and the consumer-group APIs, TxnOffsetCommit
``producer_ids``   InitProducerId (idempotent), DescribeProducers
``txn_coordinator`` InitProducerId (transactional), AddPartitionsToTxn, AddOffsetsToTxn,
                   EndTxn, DescribeTransactions, ListTransactions
``acls``           DescribeAcls, CreateAcls, DeleteAcls
``quotas``         DescribeClientQuotas, AlterClientQuotas (and the byte-rate throttles)
``txn_markers``    WriteTxnMarkers
``share``          ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge,
                   DescribeShareGroupOffsets
``share_state``    ReadShareGroupState, WriteShareGroupState (between brokers)
=================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from api.handlers.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from api.handlers.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from api.handlers.consumer_groups import handle_consumer_group_describe, handle_consumer_group_heartbeat
from api.handlers.delete_records import handle_delete_records
from api.handlers.elections import handle_elect_leaders
from api.handlers.fetch import handle_fetch
from api.handlers.groups import (
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_fetch,
    handle_sync_group,
    handle_txn_offset_commit,
)
from api.handlers.log_dirs import handle_describe_log_dirs
from api.handlers.offsets import handle_list_offsets, handle_offset_for_leader_epoch
from api.handlers.produce import handle_produce
from api.handlers.producer_ids import handle_describe_producers, handle_init_producer_id
from api.handlers.quotas import handle_alter_client_quotas, handle_describe_client_quotas
from api.handlers.reassignment import (
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
)
from api.handlers.sasl import handle_sasl_authenticate, handle_sasl_handshake
from api.handlers.scram_users import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from api.handlers.share import (
    handle_describe_share_group_offsets,
    handle_share_acknowledge,
    handle_share_fetch,
    handle_share_group_describe,
    handle_share_group_heartbeat,
)
from api.handlers.share_offsets import handle_alter_share_group_offsets, handle_delete_share_group_offsets
from api.handlers.share_state import (
    handle_delete_share_group_state,
    handle_read_share_group_state,
    handle_write_share_group_state,
)
from api.handlers.topic_partitions import handle_describe_topic_partitions
from api.handlers.topics import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
    handle_metadata,
)
from api.handlers.txn_coordinator import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
)
from api.handlers.txn_markers import handle_write_txn_markers
from api.handlers.versions import handle_api_versions
from api.security.group_guards import GROUP_GUARDS
from api.security.guards import TOPIC_GUARDS, UNGUARDED
from api.security.share_guards import SHARE_GUARDS
from kwire import APIS, ApiKey, RequestHeader

if TYPE_CHECKING:
    from api.handlers.context import Connection

Handler = Callable[["Connection", RequestHeader, Any], Awaitable[Any]]

# The ACL check in front of each API (api.security.guards, api.security.group_guards).
GUARDS = {**TOPIC_GUARDS, **GROUP_GUARDS, **SHARE_GUARDS}

HANDLERS: dict[int, Handler] = {
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.METADATA: handle_metadata,
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
    ApiKey.ELECT_LEADERS: handle_elect_leaders,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: handle_describe_topic_partitions,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: handle_alter_client_quotas,
    ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers,
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.END_TXN: handle_end_txn,
    ApiKey.DESCRIBE_TRANSACTIONS: handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: handle_list_transactions,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: handle_consumer_group_describe,
    ApiKey.SHARE_GROUP_HEARTBEAT: handle_share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: handle_share_group_describe,
    ApiKey.SHARE_FETCH: handle_share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: handle_share_acknowledge,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: handle_describe_share_group_offsets,
    ApiKey.READ_SHARE_GROUP_STATE: handle_read_share_group_state,
    ApiKey.WRITE_SHARE_GROUP_STATE: handle_write_share_group_state,
    ApiKey.DELETE_SHARE_GROUP_STATE: handle_delete_share_group_state,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: handle_alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: handle_delete_share_group_offsets,
}

# Every API the codec advertises must have a handler, and vice versa.
assert set(HANDLERS) == set(APIS), set(HANDLERS) ^ set(APIS)
# every API is checked by a guard unless listed, with its reason, in UNGUARDED
assert set(APIS) == set(GUARDS) | UNGUARDED, set(APIS) ^ (set(GUARDS) | UNGUARDED)
