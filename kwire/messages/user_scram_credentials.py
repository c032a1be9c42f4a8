"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), version 0,
flexible 0+ (KIP-554): SASL/SCRAM users managed through the Kafka protocol.

``mechanism`` is 1 for SCRAM-SHA-256 and 2 for SCRAM-SHA-512 (0: unknown). An upsertion
carries the client's salt and its SaltedPassword (PBKDF2 of the password), never the
password itself; the broker derives the stored and server keys from them.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Final

from kwire.schema import ARRAY, BYTES, INT8, INT16, INT32, STRING, W

SCRAM_SHA_256: Final = 1
SCRAM_SHA_512: Final = 2
MECHANISM_NAMES: Final = {SCRAM_SHA_256: "SCRAM-SHA-256", SCRAM_SHA_512: "SCRAM-SHA-512"}


@dataclass(frozen=True, slots=True, kw_only=True)
class UserName:
    name: Annotated[str, W(STRING)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeUserScramCredentialsRequest:
    users: Annotated[Sequence[UserName] | None, W(ARRAY(UserName), nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CredentialInfo:
    mechanism: Annotated[int, W(INT8)]
    iterations: Annotated[int, W(INT32)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeUserScramCredentialsResult:
    user: Annotated[str, W(STRING)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    credential_infos: Annotated[Sequence[CredentialInfo], W(ARRAY(CredentialInfo))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeUserScramCredentialsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None
    results: Annotated[
        Sequence[DescribeUserScramCredentialsResult], W(ARRAY(DescribeUserScramCredentialsResult))
    ] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialDeletion:
    name: Annotated[str, W(STRING)]
    mechanism: Annotated[int, W(INT8)]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialUpsertion:
    name: Annotated[str, W(STRING)]
    mechanism: Annotated[int, W(INT8)]
    iterations: Annotated[int, W(INT32)]
    salt: Annotated[bytes, W(BYTES)]
    salted_password: Annotated[bytes, W(BYTES)]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterUserScramCredentialsRequest:
    deletions: Annotated[Sequence[ScramCredentialDeletion], W(ARRAY(ScramCredentialDeletion))] = ()
    upsertions: Annotated[Sequence[ScramCredentialUpsertion], W(ARRAY(ScramCredentialUpsertion))] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterUserScramCredentialsResult:
    user: Annotated[str, W(STRING)]
    error_code: Annotated[int, W(INT16)] = 0
    error_message: Annotated[str | None, W(STRING, nullable="0+")] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterUserScramCredentialsResponse:
    throttle_time_ms: Annotated[int, W(INT32)] = 0
    results: Annotated[
        Sequence[AlterUserScramCredentialsResult], W(ARRAY(AlterUserScramCredentialsResult))
    ] = ()
