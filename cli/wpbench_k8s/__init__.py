"""wpbench-k8s: grade WordPress code written by models, on one machine or a Kubernetes cluster."""

__version__ = "0.1.0"
