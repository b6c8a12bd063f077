"""Entry point of the Pulumi project (Pulumi.yaml: `main: pulumi/`). The components live in gpuburst_infra/."""

from gpuburst_infra.program import main

main()
