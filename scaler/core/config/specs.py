"""The small specs a pools file spells inline: taints (`key=value:Effect`) and catalogue entries."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from scaler.core.model.errors import FieldError
from scaler.core.model.objects import Taint, TaintEffect

LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, allow_inf_nan=False)


class TaintSpec(StrictModel):
    key: str
    value: str = ""
    effect: TaintEffect = "NoSchedule"

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if not LABEL_KEY.match(v):
            raise ValueError(f"{v!r} is not a valid taint key")
        return v

    def to_taint(self) -> Taint:
        return Taint(self.key, self.value, self.effect)

    @classmethod
    def parse(cls, text: str) -> TaintSpec:
        """`key=value:Effect` or `key:Effect`, as kubectl and the kubelet flag write them."""
        body, _, effect = text.rpartition(":")
        if not body:
            raise ValueError(f"taint {text!r} must look like key=value:Effect")
        key, _, value = body.partition("=")
        return cls.model_validate({"key": key, "value": value, "effect": effect})


class InstanceTypeSpec(StrictModel):
    """A catalogue entry given in a pools file (override or addition)."""

    vcpu: int = Field(gt=0)
    memory_gib: float = Field(gt=0)
    gpus: int = Field(default=0, ge=0)
    gpu_model: str | None = None
    gpu_memory_gib: int = 0
    price_per_hour: float = Field(ge=0)
    arch: Literal["amd64", "arm64"] = "amd64"


def taint_spec(taint: Any, index: int) -> Any:
    """A taint written `key=value:Effect` as its spec; a mapping is left to the model."""
    if not isinstance(taint, str):
        return taint
    try:
        return TaintSpec.parse(taint)
    except ValidationError as err:
        first = err.errors()[0]
        raise FieldError(("taints", f"[{index}]", *(str(p) for p in first["loc"])),
                         f"{taint!r}: {first['msg'].removeprefix('Value error, ')}") from None
    except ValueError as err:
        raise FieldError(("taints", f"[{index}]"), str(err)) from None
