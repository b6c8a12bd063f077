"""gpuburst's policy pack: `pulumi preview --policy-pack pulumi/policy` refuses what breaks a rule."""

from gpuburst_policies import policies
from pulumi_policy import EnforcementLevel, PolicyPack

PolicyPack(
    name="gpuburst",
    description="GPU pools from zero with autoscaler tags, protected groups, no static credentials, "
                "non-root containers, verified APIServices",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=policies(),
)
