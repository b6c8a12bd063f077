"""gpuburst's scaler: a cluster autoscaler for GPU node pools on AWS and Azure."""

__version__ = "0.1.0"
