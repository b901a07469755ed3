"""Signs requests with botocore's SigV4 implementation at a fixed time.

Reads a JSON list of cases on stdin, writes a JSON list of results on stdout.
Used by FerryS3Tests to compare Ferry's signer with botocore's, stage by stage.
"""
import datetime
import json
import sys
from unittest import mock
from urllib.parse import parse_qsl, urlsplit

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def sign(case):
    fixed = datetime.datetime.strptime(case["amzDate"], "%Y%m%dT%H%M%SZ")
    creds = Credentials(case["accessKeyId"], case["secretAccessKey"], case.get("sessionToken"))
    body = case.get("body", "").encode()
    request = AWSRequest(method=case["method"], url=case["url"], headers=dict(case.get("headers", {})), data=body)
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=fixed):
        if case.get("presignExpires"):
            auth = botocore.auth.S3SigV4QueryAuth(creds, "s3", case["region"], expires=case["presignExpires"])
            auth.add_auth(request)
            query = dict(parse_qsl(urlsplit(request.url).query, keep_blank_values=True))
            return {"url": request.url, "query": query}
        auth = botocore.auth.S3SigV4Auth(creds, "s3", case["region"])
        request.context["timestamp"] = case["amzDate"]
        auth._modify_request_before_signing(request)
        canonical = auth.canonical_request(request)
        string_to_sign = auth.string_to_sign(request, canonical)
        signature = auth.signature(string_to_sign, request)
        return {"canonicalRequest": canonical, "stringToSign": string_to_sign, "signature": signature}


print(json.dumps([sign(c) for c in json.load(sys.stdin)]))
