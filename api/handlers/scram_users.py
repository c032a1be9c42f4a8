"""DescribeUserScramCredentials and AlterUserScramCredentials v0 (KIP-554): SCRAM users of the
metadata store managed by admin clients (broker.security.scram_admin). DESCRIBE / ALTER on
the cluster are checked by the guards (api.security.guards)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security import scram_admin
from broker.security.stored import StoredUsers
from hot.errors import StrataError
from kwire import RequestHeader
from kwire import error_table as E
from kwire.error_table import kafka_code
from kwire.messages.user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)

if TYPE_CHECKING:
    from api.handlers.context import Connection

_NO_STORE = "this broker has no users store loaded"


async def handle_describe_user_scram_credentials(
    conn: Connection, header: RequestHeader, req: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    users = conn.broker.users
    if users is None:
        return DescribeUserScramCredentialsResponse(
            error_code=E.UNKNOWN_SERVER_ERROR, error_message=_NO_STORE
        )
    names = None if req.users is None else [u.name for u in req.users]
    results = []
    for name, found in scram_admin.describe(users.reload(), names):
        if isinstance(found, StrataError):
            code, message = kafka_code(found), str(found)
            res = DescribeUserScramCredentialsResult(user=name, error_code=code, error_message=message)
            results.append(res)
        else:
            infos = tuple(CredentialInfo(mechanism=m, iterations=i) for m, i in found)
            results.append(DescribeUserScramCredentialsResult(user=name, credential_infos=infos))
    return DescribeUserScramCredentialsResponse(results=tuple(results))


async def handle_alter_user_scram_credentials(
    conn: Connection, header: RequestHeader, req: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    users = conn.broker.users
    named = [d.name for d in req.deletions] + [u.name for u in req.upsertions]
    if not isinstance(users, StoredUsers):
        return AlterUserScramCredentialsResponse(
            results=tuple(
                AlterUserScramCredentialsResult(
                    user=n, error_code=E.UNKNOWN_SERVER_ERROR, error_message=_NO_STORE
                )
                for n in dict.fromkeys(named)
            )
        )
    try:
        out = await scram_admin.alter(
            users,
            [(d.name, d.mechanism) for d in req.deletions],
            [
                scram_admin.Upsertion(
                    u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password)
                )
                for u in req.upsertions
            ],
        )
    except StrataError as exc:  # the store could not be written: every user fails alike
        out = dict.fromkeys(named, exc)
    results = []
    for user, err in out.items():
        if err is None:
            results.append(AlterUserScramCredentialsResult(user=user))
        else:
            code, message = kafka_code(err), str(err)
            results.append(AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message))
    return AlterUserScramCredentialsResponse(results=tuple(results))
