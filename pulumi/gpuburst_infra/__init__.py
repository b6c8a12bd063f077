"""gpuburst's infrastructure components: the stack model, the AWS and Azure stacks, the offline render.

Imported by `pulumi/__main__.py` (Pulumi puts the program directory on `sys.path`) and by the tests
under `tests/pulumi/`. There is deliberately no `pulumi/__init__.py`: a package named `pulumi`
would shadow the Pulumi SDK.
"""
