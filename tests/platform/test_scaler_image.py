"""The scaler's image comes from the stack config and, when a digest is given, is pulled by digest."""

from __future__ import annotations

from typing import Any

import pytest
from charts_helpers import scaler_objects
from gpuburst_platform import parse_settings

DIGEST = "sha256:" + "5e" * 32


def _pod(res: Any) -> dict[str, Any]:
    return dict(scaler_objects(res).one("Deployment", "gpuburst-scaler").body["spec"]["template"]["spec"])


def _image(res: Any) -> str:
    return str(_pod(res)["containers"][0]["image"])


def test_default_image_is_the_released_tag(build: Any) -> None:
    assert _image(build("aws")) == "ghcr.io/gpuburst/scaler:0.1.0"


def test_a_digest_pins_the_image(build: Any) -> None:
    res = build("aws", scaler_image="registry.corp.example/mirror/gpuburst-scaler:0.1.0", scaler_image_digest=DIGEST,
                scaler_image_pull_secrets=["corp-registry"])
    assert _image(res) == f"registry.corp.example/mirror/gpuburst-scaler:0.1.0@{DIGEST}"
    assert _pod(res)["imagePullSecrets"] == [{"name": "corp-registry"}]


def test_a_digest_in_the_image_and_another_in_digest_is_refused() -> None:
    other = "sha256:" + "0" * 64
    with pytest.raises(ValueError, match=r"^Pulumi.aws-prod.yaml: platform: scaler_image_digest sha256:5e.* differs"):
        parse_settings({"scaler_image": f"r/s@{other}", "scaler_image_digest": DIGEST}, "Pulumi.aws-prod.yaml")


def test_a_digest_must_be_sha256() -> None:
    with pytest.raises(ValueError, match=r"platform.scaler_image_digest: String should match pattern"):
        parse_settings({"scaler_image_digest": "latest"}, "x")
