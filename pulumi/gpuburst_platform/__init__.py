"""gpuburst's platform on the cluster (both clouds): the scaler, GPU metrics, HPAs, the bin-packing scheduler."""

from gpuburst_platform.component import Platform, deploy_platform
from gpuburst_platform.settings import PlatformSettings, parse_settings

__all__ = ["Platform", "PlatformSettings", "deploy_platform", "parse_settings"]
