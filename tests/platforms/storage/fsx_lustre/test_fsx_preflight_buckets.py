"""preflight reads each bucket the spec's associations link by repository_path, against moto: it exists, it is in
the file system's Region when FSx imports from it automatically, no event notification overlaps an importing prefix,
and an SSE-KMS key lets FSx's data-repository role use it (docs/preflight.md, "Data repository buckets")."""

from __future__ import annotations

import json

import boto3
import pytest
from helpers.aws import REGION, make_ctx, make_spec, preflight_checks

from fmcluster.platforms.storage.fsx_lustre.preflight import check_repository_bucket

pytestmark = pytest.mark.usefixtures("moto")
BUCKET = "team-corpus"


def spec_linking(*associations):
    fsx = {"deployment_type": "PERSISTENT_2", "storage_capacity_gib": 1200, "throughput_per_tib": 250,
           "data_repository_associations": list(associations)}
    return make_spec(storage={"fsx": fsx})


IMPORTING = {"file_system_path": "/corpus", "repository_path": f"s3://{BUCKET}/text/"}
EXPORT_ONLY = {"file_system_path": "/out", "repository_path": f"s3://{BUCKET}/out/", "auto_import": [],
               "auto_export": ["NEW"]}


def check(spec):
    return check_repository_bucket(make_ctx(spec), bucket=BUCKET)


def test_preflight_plans_one_check_per_linked_bucket():
    spec = spec_linking(IMPORTING, EXPORT_ONLY)
    assert [p.id for p in preflight_checks(spec) if p.id.startswith("repository:")] == [f"repository:{BUCKET}"]
    assert not [p for p in preflight_checks(make_spec()) if p.id.startswith("repository:")]


def test_a_missing_bucket_fails_naming_the_field():
    out = check(spec_linking(IMPORTING))
    assert out.status == "fail" and "does not exist" in out.observed and "repository_path" in out.remedy


def test_automatic_import_needs_the_file_systems_region_an_export_only_link_does_not():
    boto3.client("s3", region_name="us-west-2").create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    out = check(spec_linking(IMPORTING))
    assert out.status == "fail" and out.observed == f"s3://{BUCKET} is in us-west-2" and "auto_import: []" in out.remedy
    assert check(spec_linking(EXPORT_ONLY)).status == "pass"


def test_an_overlapping_event_notification_is_a_warning_naming_it():
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    assert check(spec_linking(IMPORTING)).status == "pass"
    boto3.client("sqs", region_name=REGION).create_queue(QueueName="ingest")
    arn = f"arn:aws:sqs:{REGION}:123456789012:ingest"
    s3.put_bucket_notification_configuration(Bucket=BUCKET, NotificationConfiguration={"QueueConfigurations": [
        {"Id": "ingest", "QueueArn": arn, "Events": ["s3:ObjectCreated:*"],
         "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "text/"}]}}}]})
    out = check(spec_linking(IMPORTING))
    assert out.status == "warn" and "ingest (s3:ObjectCreated:* on 'text/')" in out.observed
    assert check(spec_linking({**IMPORTING, "repository_path": f"s3://{BUCKET}/images/"})).status == "pass"


def test_a_customer_key_that_does_not_let_fsx_in_is_a_warning_with_the_statement_to_add():
    s3, kms = boto3.client("s3", region_name=REGION), boto3.client("kms", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    key = kms.create_key()["KeyMetadata"]["KeyId"]
    s3.put_bucket_encryption(Bucket=BUCKET, ServerSideEncryptionConfiguration={"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key}}]})
    out = check(spec_linking(IMPORTING))
    assert out.status == "warn" and f"SSE-KMS key {key} whose policy does not name AWSServiceRoleForFSxS3Access" in (
        out.observed) and "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*" in out.remedy
    policy = json.loads(kms.get_key_policy(KeyId=key, PolicyName="default")["Policy"])
    policy["Statement"].append({"Sid": "Fsx", "Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                                "Resource": "*", "Principal": {"AWS": "*"}, "Condition": {"ArnLike": {
                                    "aws:PrincipalArn": "arn:aws:iam::123456789012:role/aws-service-role/"
                                    "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"}}})
    kms.put_key_policy(KeyId=key, PolicyName="default", Policy=json.dumps(policy))
    assert check(spec_linking(IMPORTING)).status == "pass"
