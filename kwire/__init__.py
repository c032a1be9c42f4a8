"""Sans-I/O codec for the Kafka wire protocol, as spoken by Strata's Kafka-compatible broker.

Layers, bottom up:

* ``primitives``  bounds-checked ``Reader`` / accumulating ``Writer`` for Kafka primitive types
* ``schema``      declarative message tables (``Annotated`` dataclass fields), compiled per version
* ``messages``    one module per API: the typed frozen request/response dataclasses
* ``apis``        ``APIS``: api key -> ``ApiSpec`` with the exact version ranges we advertise
* ``header``      request/response headers
* ``framing``     ``FrameDecoder`` (INT32 size-prefixed stream) and ``encode_frame``
* ``codec``       ``decode_request`` / ``encode_response`` (server), ``encode_request`` /
                  ``decode_response`` (client), ``api_versions_fallback_response``

Nothing here does I/O; malformed input raises ``ProtocolError`` (an ``InvalidRequestError``)
and nothing else.
"""

from kwire.apis import APIS, ApiKey, ApiSpec, api_versions_response, supported_api_versions
from kwire.codec import (
    api_versions_fallback_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kwire.errors import (
    EncodeError,
    ProtocolError,
    SchemaError,
    UnknownApiKeyError,
)
from kwire.framing import FrameDecoder, encode_frame, frame_bytes
from kwire.header import RequestHeader, ResponseHeader, UnsupportedVersionError
from kwire.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from kwire.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kwire.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
)
from kwire.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kwire.messages.fetch import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
    LeaderIdAndEpoch,
    SnapshotId,
)
from kwire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kwire.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    ListOffsetsTopicResponse,
)
from kwire.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kwire.messages.produce import (
    BatchIndexAndErrorMessage,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    ProduceTopicResponse,
)
from kwire.primitives import Reader, Writer
from kwire.schema import FileRegion, MessageSchema, RecordsData

__all__ = [
    "APIS",
    "AbortedTransaction",
    "ApiKey",
    "ApiSpec",
    "ApiVersion",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "BatchIndexAndErrorMessage",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicConfig",
    "CreatableTopicConfigs",
    "CreatableTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableTopicResult",
    "DeleteTopicState",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResource",
    "DescribeConfigsResourceResult",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "DescribeConfigsSynonym",
    "EncodeError",
    "EpochEndOffset",
    "FetchPartition",
    "FetchPartitionData",
    "FetchRequest",
    "FetchResponse",
    "FetchTopic",
    "FetchableTopicResponse",
    "FileRegion",
    "FinalizedFeatureKey",
    "ForgottenTopic",
    "FrameDecoder",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "LeaderIdAndEpoch",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListOffsetsTopic",
    "ListOffsetsTopicResponse",
    "MessageSchema",
    "MetadataRequest",
    "MetadataRequestTopic",
    "MetadataResponse",
    "MetadataResponseBroker",
    "MetadataResponsePartition",
    "MetadataResponseTopic",
    "ProducePartitionData",
    "ProducePartitionResponse",
    "ProduceRequest",
    "ProduceResponse",
    "ProduceTopicData",
    "ProduceTopicResponse",
    "ProtocolError",
    "Reader",
    "RecordsData",
    "RequestHeader",
    "ResponseHeader",
    "SchemaError",
    "SnapshotId",
    "SupportedFeatureKey",
    "UnknownApiKeyError",
    "UnsupportedVersionError",
    "Writer",
    "api_versions_fallback_response",
    "api_versions_response",
    "decode_request",
    "decode_response",
    "encode_frame",
    "encode_request",
    "encode_response",
    "frame_bytes",
    "supported_api_versions",
]
