"""A real S3 client (boto3) as the S3 proxy's tests meet a store: retries off, short timeouts, so a
fault the proxy injects reaches the test instead of being retried away."""

from __future__ import annotations

from typing import Any


def s3_client(endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=f"http://{endpoint}", region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=5, connect_timeout=3),
    )  # fmt: skip
