"""boto3 as a benchmark peer: the classic s3transfer manager or the CRT one.

usage: boto3_bench.py classic|crt upload-file  FILE BUCKET KEY PART_SIZE CONCURRENCY
       boto3_bench.py classic|crt download-file BUCKET KEY FILE PART_SIZE CONCURRENCY
       boto3_bench.py classic|crt upload-dir   DIR BUCKET PREFIX CONCURRENCY
       boto3_bench.py classic|crt download-dir BUCKET PREFIX DIR CONCURRENCY
Endpoint and credentials from AWS_ENDPOINT_URL / AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
"""
import os
import sys

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

mode, command, *args = sys.argv[1:]
concurrency = int(args[-1])
# Fair to every peer: no additional checksum (RGW ignores them), pools as wide as the concurrency.
os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
os.environ.setdefault("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required")
client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1",
                      config=Config(s3={"addressing_style": "path"}, max_pool_connections=max(10, concurrency * 2)))


def transfer_config(part_size):
    return TransferConfig(multipart_threshold=part_size, multipart_chunksize=part_size, max_concurrency=concurrency,
                          preferred_transfer_client="crt" if mode == "crt" else "classic")


def manager(part_size):
    if mode == "crt":
        return crt_manager(part_size)
    from boto3.s3.transfer import create_transfer_manager
    return create_transfer_manager(client, transfer_config(part_size))


def crt_manager(part_size):
    """s3transfer's CRT manager, the one boto3 picks with preferred_transfer_client="crt".
    boto3 builds it with use_ssl=True and no endpoint (AWS only); here it gets the
    plain-HTTP loopback endpoint. The CRT sizes its own connection pool (target throughput)."""
    import botocore.session
    from s3transfer.crt import (BotocoreCRTCredentialsWrapper, BotocoreCRTRequestSerializer, CRTTransferManager,
                                create_s3_crt_client)
    session = botocore.session.Session()
    provider = BotocoreCRTCredentialsWrapper(session.get_credentials()).to_crt_credentials_provider()
    crt = create_s3_crt_client("us-east-1", crt_credentials_provider=provider, part_size=part_size, use_ssl=False)
    serializer = BotocoreCRTRequestSerializer(session, {"region_name": "us-east-1", "endpoint_url": os.environ["AWS_ENDPOINT_URL"],
                                                        "config": Config(s3={"addressing_style": "path"})})
    return CRTTransferManager(crt, serializer)


if command == "upload-file":
    path, bucket, key, part = args[0], args[1], args[2], int(args[3])
    with manager(part) as m:
        m.upload(path, bucket, key).result()
elif command == "download-file":
    bucket, key, path, part = args[0], args[1], args[2], int(args[3])
    with manager(part) as m:
        m.download(bucket, key, path).result()
elif command == "upload-dir":
    directory, bucket, prefix = args[0], args[1], args[2]
    with manager(8 << 20) as m:
        futures = []
        for root, _, names in os.walk(directory):
            for name in names:
                path = os.path.join(root, name)
                futures.append(m.upload(path, bucket, prefix + os.path.relpath(path, directory)))
        for f in futures:
            f.result()
elif command == "download-dir":
    bucket, prefix, directory = args[0], args[1], args[2]
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for o in page.get("Contents", [])]
    with manager(8 << 20) as m:
        futures = []
        for key in keys:
            path = os.path.join(directory, key[len(prefix):])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            futures.append(m.download(bucket, key, path))
        for f in futures:
            f.result()
else:
    sys.exit(f"unknown command {command}")
