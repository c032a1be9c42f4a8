"""The test S3 endpoint is a real HTTP S3: ranges and conditional writes behave as on AWS/MinIO."""

from __future__ import annotations

import pytest

from tests.brokers import S3Endpoint


def test_ranges_and_conditional_puts(s3_endpoint: S3Endpoint, s3_bucket: str) -> None:
    from botocore.exceptions import ClientError

    c = s3_endpoint.client()
    etag = c.put_object(Bucket=s3_bucket, Key="k", Body=b"hello")["ETag"]  # type: ignore[attr-defined]
    assert c.get_object(Bucket=s3_bucket, Key="k", Range="bytes=1-3")["Body"].read() == b"ell"  # type: ignore[attr-defined]
    with pytest.raises(ClientError, match="PreconditionFailed"):
        c.put_object(Bucket=s3_bucket, Key="k", Body=b"x", IfNoneMatch="*")  # type: ignore[attr-defined]
    with pytest.raises(ClientError, match="PreconditionFailed"):
        c.put_object(Bucket=s3_bucket, Key="k", Body=b"x", IfMatch='"nope"')  # type: ignore[attr-defined]
    c.put_object(Bucket=s3_bucket, Key="k", Body=b"x", IfMatch=etag)  # type: ignore[attr-defined]
