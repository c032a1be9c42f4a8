"""Direct GETs (``tiering.s3_direct``) against moto's S3 server, including one that verifies
every request's SigV4 signature the way S3 and MinIO do."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import botocore.credentials
import pytest

from hot.errors import InvalidConfigError, ObjectNotFoundError, ObjectStoreError, RetriableObjectStoreError
from tests.brokers import S3Endpoint
from tiering.s3_direct import DirectGet
from tiering.s3_store import S3Store
from tiering.store import InvalidRangeError, open_store


def _s3(url: str) -> S3Store:
    store = open_store(url, connect_timeout=1, read_timeout=2, max_attempts=1)
    assert isinstance(store, S3Store)
    return store


def _direct(store: S3Store) -> DirectGet:
    store._sync_client()  # the direct path is made with the blocking client
    direct = store.direct_get
    assert direct is not None, "this botocore's client lacks what the direct path reuses"
    return direct


def _signed_store(endpoint: S3Endpoint, bucket: str, access: str, secret: str) -> S3Store:
    store = open_store(
        f"s3://{bucket}/p",
        endpoint_url=endpoint.url,
        region="us-east-1",
        access_key=access,
        secret_key=secret,
    )
    assert isinstance(store, S3Store)
    return store


async def test_direct_gets_serve_gets_ranges_and_views(s3_bucket: str) -> None:
    store = _s3(f"s3://{s3_bucket}/some/prefix")
    try:
        small, large = b"0123456789", bytes(range(256)) * 4096  # 1 MiB: a pooled view
        await store.put("dir/small.log", small)
        await store.put("dir/large.log", large)
        direct = _direct(store)
        assert await store.get("dir/small.log") == small
        assert await store.get("dir/small.log", start=3, end=7) == small[3:7]
        assert await store.get("dir/small.log", start=8) == small[8:]
        assert await store.get_view("dir/large.log") == large
        assert await store.get_view("dir/large.log", start=1000, end=300_000) == large[1000:300_000]
        assert direct.enabled and direct.served == 5 and direct.passed_on == 0
    finally:
        await store.close()


async def test_anything_but_success_is_the_clients_to_answer(s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    store = _s3(f"s3://{s3_bucket}/p")
    try:
        await store.put("k", b"abc")
        direct = _direct(store)
        with pytest.raises(ObjectNotFoundError, match="nope"):
            await store.get("nope")
        with pytest.raises(InvalidRangeError):
            await store.get("k", start=10, end=20)
        assert direct.served == 0 and direct.passed_on == 2
        assert direct.enabled  # a 404 or 416 says nothing about signing
        s3_endpoint.stop()
        try:
            with pytest.raises(RetriableObjectStoreError, match=s3_bucket):
                await store.get("k")
            assert direct.passed_on == 3
        finally:
            s3_endpoint.start()
        assert await store.get("k") == b"abc" and direct.served == 1 and direct.enabled
    finally:
        await store.close()


@pytest.fixture
def verifying_s3(s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str, str]]:
    """(bucket, access key, secret key) on an endpoint that checks every request's
    signature and the key's IAM permissions (moto's auth, on once the user exists)."""
    import moto.settings

    iam = boto3.client(
        "iam",
        endpoint_url=s3_endpoint.url,
        aws_access_key_id="setup",
        aws_secret_access_key="setup",
        region_name="us-east-1",
    )
    user = f"strata-direct-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    access, secret = key["AccessKeyId"], key["SecretAccessKey"]
    s3 = boto3.client(
        "s3",
        endpoint_url=s3_endpoint.url,
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        region_name="us-east-1",
    )
    bucket = s3.create_bucket(Bucket=f"strata-signed-{uuid.uuid4().hex[:8]}")["Location"].strip("/")
    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    with pytest.raises(Exception, match="SignatureDoesNotMatch"):  # the check is on
        boto3.client(
            "s3",
            endpoint_url=s3_endpoint.url,
            aws_access_key_id=access,
            aws_secret_access_key="not-the-secret",
            region_name="us-east-1",
        ).list_objects_v2(Bucket=bucket)
    yield bucket, access, secret


async def test_direct_gets_are_signed_as_s3_verifies(
    s3_endpoint: S3Endpoint, verifying_s3: tuple[str, str, str]
) -> None:
    bucket, access, secret = verifying_s3
    store = _signed_store(s3_endpoint, bucket, access, secret)
    try:
        data = bytes(range(256)) * 2048
        key = "ab12/orders-0f9e_1.x/0/00000000000000000000-0a1b2c3d.log"  # keys' own characters
        await store.put(key, data)
        assert await store.get_view(key) == data
        assert await store.get(key, start=5, end=300_000) == data[5:300_000]
        direct = _direct(store)
        assert direct.served == 2 and direct.passed_on == 0
    finally:
        await store.close()


async def test_small_file_puts_are_direct_and_signed_as_s3_verifies(
    s3_endpoint: S3Endpoint, verifying_s3: tuple[str, str, str], tmp_path: Path
) -> None:
    bucket, access, secret = verifying_s3
    store = _signed_store(s3_endpoint, bucket, access, secret)
    try:
        src = tmp_path / "00000000000000000000.index"
        src.write_bytes(bytes(range(256)) * 64)
        key = "ab12/orders-0f9e_1.x/0/00000000000000000000-0a1b2c3d.index"
        etag = await store.put_file(key, src, offset=10, length=1000)
        direct = _direct(store)
        assert direct.puts == 1 and direct.passed_on == 0
        info = await store.head(key)
        assert info is not None and info.etag == etag and info.size == 1000
        assert await store.get(key) == src.read_bytes()[10:1010]
        # A conditional put is the client's (no direct path for If-Match / If-None-Match).
        await store.put("cas", b"v1", if_none_match=True)
        assert direct.puts == 1
    finally:
        await store.close()


async def test_payloads_signed_or_not_pass_s3_verification(
    s3_endpoint: S3Endpoint,
    verifying_s3: tuple[str, str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """UNSIGNED-PAYLOAD (the default, with x-amz-checksum-crc32c) and, with
    STRATA_S3_SIGN_PAYLOAD, the SHA-256 payload signature: both verified by the endpoint."""
    bucket, access, secret = verifying_s3
    big = tmp_path / "big.log"
    big.write_bytes(bytes(range(256)) * (8 << 12))  # 8 MiB: the blocking client's PUT
    for flag in ("", "true"):
        monkeypatch.setenv("STRATA_S3_SIGN_PAYLOAD", flag)
        store = _signed_store(s3_endpoint, bucket, access, secret)
        try:
            assert store._sign_payload is (flag == "true")
            await store.put("small", b"abc")
            await store.put_file("big.log", big)
            assert await store.get("big.log") == big.read_bytes()
        finally:
            await store.close()
    monkeypatch.setenv("STRATA_S3_SIGN_PAYLOAD", "perhaps")
    with pytest.raises(InvalidConfigError, match="STRATA_S3_SIGN_PAYLOAD"):
        _signed_store(s3_endpoint, bucket, access, secret)


async def test_a_signing_difference_turns_the_direct_path_off(
    s3_endpoint: S3Endpoint, verifying_s3: tuple[str, str, str], caplog: pytest.LogCaptureFixture
) -> None:
    bucket, access, secret = verifying_s3
    store = _signed_store(s3_endpoint, bucket, access, secret)
    try:
        await store.put("k", b"signed")
        direct = _direct(store)
        # Stand-in for a signing quirk of some provider: a signature the endpoint refuses.
        direct._credentials = botocore.credentials.Credentials(access, "not-the-secret")
        assert await store.get("k") == b"signed"  # 403 here, then the client's GET
        assert not direct.enabled and direct.passed_on == 1
        assert "direct S3 GETs got 403" in caplog.text
        assert await store.get("k", start=1) == b"igned"
        assert direct.passed_on == 1 and direct.served == 0  # not tried any more
    finally:
        await store.close()


async def test_a_real_denial_keeps_the_direct_path(
    s3_endpoint: S3Endpoint, verifying_s3: tuple[str, str, str]
) -> None:
    bucket, access, _ = verifying_s3
    store = _signed_store(s3_endpoint, bucket, access, "not-the-secret")  # the client's GETs are refused too
    try:
        with pytest.raises(ObjectStoreError, match="SignatureDoesNotMatch") as ei:
            await store.get("k")
        assert not ei.value.retriable
        direct = _direct(store)
        assert direct.enabled and direct.passed_on == 1
    finally:
        await store.close()
