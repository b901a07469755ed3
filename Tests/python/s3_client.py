"""A tiny boto3 command line for tests: a real S3 client that no one here wrote.

usage: s3_client.py ENDPOINT create-bucket BUCKET
       s3_client.py ENDPOINT get BUCKET KEY OUTFILE      (prints JSON: ETag, ContentLength, ContentType, Metadata)
       s3_client.py ENDPOINT put BUCKET KEY INFILE [METADATA_JSON]
       s3_client.py ENDPOINT head BUCKET KEY
       s3_client.py ENDPOINT list-uploads BUCKET PREFIX    (prints JSON: keys with uploads in progress)
       s3_client.py ENDPOINT upload-parts BUCKET PREFIX    (prints JSON: [{key, uploadId, parts}] of the uploads in progress)
       s3_client.py ENDPOINT sha256-all BUCKET PREFIX      (prints JSON: key -> SHA-256 of its bytes)
       s3_client.py ENDPOINT list-all                      (prints JSON: bucket -> key -> {ETag, Metadata} of every object)
       s3_client.py ENDPOINT put-many BUCKET PREFIX COUNT [START] [TAG]   (COUNT small objects PREFIX<START>…, in parallel)
       s3_client.py ENDPOINT delete-many BUCKET KEY…        (one DeleteObject each)
       s3_client.py ENDPOINT put-keys BUCKET JSON_FILE      (JSON_FILE: [[key, body text], …], any keys, in parallel)
       s3_client.py ENDPOINT notify BUCKET PUSH_URL NAME    (RGW: SNS topic NAME pushing to PUSH_URL, persistent, and the
                                                             bucket's notification configuration for ObjectCreated/ObjectRemoved)
Credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
"""
import json
import os
import sys

import boto3
from botocore.config import Config

os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
os.environ.setdefault("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required")
endpoint, command, *args = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION", "us-east-1"),
                  config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}))
if command == "create-bucket":
    try:
        s3.create_bucket(Bucket=args[0])
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
elif command == "get":
    response = s3.get_object(Bucket=args[0], Key=args[1])
    with open(args[2], "wb") as out:
        out.write(response["Body"].read())
    print(json.dumps({"ETag": response["ETag"], "ContentLength": response["ContentLength"],
                      "ContentType": response.get("ContentType"), "Metadata": response.get("Metadata", {})}))
elif command == "head":
    response = s3.head_object(Bucket=args[0], Key=args[1])
    print(json.dumps({"ETag": response["ETag"], "ContentLength": response["ContentLength"],
                      "ContentType": response.get("ContentType"), "Metadata": response.get("Metadata", {}),
                      "CacheControl": response.get("CacheControl")}))
elif command == "list-uploads":
    response = s3.list_multipart_uploads(Bucket=args[0], Prefix=args[1])
    print(json.dumps([u["Key"] for u in response.get("Uploads", [])]))
elif command == "create-multipart-upload":
    print(s3.create_multipart_upload(Bucket=args[0], Key=args[1])["UploadId"])
elif command == "upload-parts":
    from botocore.exceptions import ClientError
    found = []
    for u in s3.list_multipart_uploads(Bucket=args[0], Prefix=args[1]).get("Uploads", []):
        try:
            parts = s3.list_parts(Bucket=args[0], Key=u["Key"], UploadId=u["UploadId"]).get("Parts", [])
        except ClientError as error:
            # Completed or aborted between the listing and this call (a worker's sweep): not in progress.
            if error.response.get("Error", {}).get("Code") == "NoSuchUpload":
                continue
            raise
        found.append({"key": u["Key"], "uploadId": u["UploadId"], "parts": len(parts)})
    print(json.dumps(found))
elif command == "sha256-all":
    import hashlib
    digests = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=args[0], Prefix=args[1]):
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=args[0], Key=item["Key"])["Body"]
            h = hashlib.sha256()
            for chunk in iter(lambda: body.read(1 << 20), b""):
                h.update(chunk)
            digests[item["Key"]] = h.hexdigest()
    print(json.dumps(digests))
elif command == "list-all":
    everything = {}
    for bucket in s3.list_buckets().get("Buckets", []):
        name = bucket["Name"]
        objects = everything.setdefault(name, {})
        # botocore asks for url-encoded keys and decodes them (keys with control characters survive XML).
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for item in page.get("Contents", []):
                key = item["Key"]
                head = s3.head_object(Bucket=name, Key=key)
                objects[key] = {"ETag": head["ETag"], "Metadata": head.get("Metadata", {}),
                                "CacheControl": head.get("CacheControl"), "ContentType": head.get("ContentType")}
    print(json.dumps(everything))
elif command == "put":
    with open(args[2], "rb") as f:
        metadata = json.loads(args[3]) if len(args) > 3 else {}
        response = s3.put_object(Bucket=args[0], Key=args[1], Body=f.read(), Metadata=metadata)
    print(json.dumps({"ETag": response["ETag"]}))
elif command == "put-many":
    from concurrent.futures import ThreadPoolExecutor
    bucket, prefix, count = args[0], args[1], int(args[2])
    start = int(args[3]) if len(args) > 3 else 0
    tag = args[4] if len(args) > 4 else ""
    def put(i):
        s3.put_object(Bucket=bucket, Key=f"{prefix}{i:04d}", Body=f"object {i}{tag}\n".encode())
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(start, start + count)))
    print(json.dumps({"put": count}))
elif command == "put-keys":
    from concurrent.futures import ThreadPoolExecutor
    with open(args[1], encoding="utf-8") as f:
        pairs = json.load(f)
    def put_pair(pair):
        s3.put_object(Bucket=args[0], Key=pair[0], Body=pair[1].encode())
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put_pair, pairs))
    print(json.dumps({"put": len(pairs)}))
elif command == "delete-many":
    for key in args[1:]:
        s3.delete_object(Bucket=args[0], Key=key)
    print(json.dumps({"deleted": len(args) - 1}))
elif command == "notify":
    sns = boto3.client("sns", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION", "us-east-1"))
    arn = sns.create_topic(Name=args[2], Attributes={"push-endpoint": args[1], "persistent": "true"})["TopicArn"]
    s3.put_bucket_notification_configuration(Bucket=args[0], NotificationConfiguration={"TopicConfigurations": [
        {"Id": args[2], "TopicArn": arn, "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}]})
    print(json.dumps({"topic": arn}))
else:
    sys.exit(f"unknown command {command}")
