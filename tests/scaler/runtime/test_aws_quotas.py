"""EC2 vCPU quotas read through Service Quotas and DescribeInstances (botocore's Stubber: moto serves
no EC2 quotas), in the shapes the real APIs return; and the planner's answer to them."""

from __future__ import annotations

from pathlib import Path

import boto3
from botocore.stub import Stubber

from scaler.configfile import load_config
from scaler.providers.aws_quotas import QuotaReader

CFG = load_config(Path(__file__).resolve().parents[3] / "examples" / "pools-aws.yaml")
SPOT_G = "All G and VT Spot Instance Requests"


def quota(code: str, name: str, value: float) -> dict[str, object]:
    return {"Quota": {"ServiceCode": "ec2", "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
                      "QuotaArn": f"arn:aws:servicequotas:us-east-1:123456789012:ec2/{code}", "QuotaCode": code,
                      "QuotaName": name, "Value": value, "Unit": "None", "Adjustable": True, "GlobalQuota": False}}


def instance(iid: str, itype: str, cores: int, spot: bool) -> dict[str, object]:
    return {"InstanceId": iid, "InstanceType": itype, "CpuOptions": {"CoreCount": cores, "ThreadsPerCore": 2},
            **({"InstanceLifecycle": "spot"} if spot else {})}


def reader(clock: list[float]) -> tuple[QuotaReader, Stubber, Stubber]:
    session = boto3.session.Session(region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    sq, ec2 = session.client("service-quotas"), session.client("ec2")
    return QuotaReader(sq, ec2, lambda: clock[0]), Stubber(sq), Stubber(ec2)


def test_running_spot_instances_use_up_the_spot_g_quota_and_on_demand_is_counted_apart() -> None:
    clock = [1000.0]
    r, sq, ec2 = reader(clock)
    sq.add_response("get_service_quota", quota("L-DB2E81BA", "Running On-Demand G and VT instances", 64.0),
                    {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"})
    sq.add_response("get_service_quota", quota("L-3819A6DF", "All G and VT Spot Instance Requests", 8.0),
                    {"ServiceCode": "ec2", "QuotaCode": "L-3819A6DF"})
    ec2.add_response("describe_instances", {"Reservations": [{"Instances": [
        instance("i-1", "g6.xlarge", 2, True), instance("i-2", "g6.xlarge", 2, True),
        instance("i-3", "g6.48xlarge", 96, False), instance("i-4", "m6i.large", 1, False)]}]})
    with sq, ec2:
        got = r.for_pools(p for p in CFG.pools if p.name.startswith("gpu1"))
    by_quota = {(q.name, q.headroom) for q in got.values()}
    assert by_quota == {(SPOT_G, 0), ("Running On-Demand G and VT instances", 64 - 192)}
    spot = {p.name for p in CFG.pools if p.capacity_type == "spot" and p.name.startswith("gpu1")}
    assert spot and all(got[n].name == SPOT_G for n in spot)
    clock[0] += 299  # read at most every five minutes: no call now (a Stubber with no response would fail)
    assert r.for_pools(p for p in CFG.pools if p.name.startswith("gpu1")) == got


def test_a_quota_that_cannot_be_read_caps_nothing() -> None:
    r, sq, _ec2 = reader([0.0])
    sq.add_client_error("get_service_quota", "AccessDeniedException", "User is not authorized", 400)
    with sq:
        assert r.for_pools(CFG.pools) == {}
