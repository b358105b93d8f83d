"""Scale benchmark of the cluster path: a real control plane, kwok nodes, the production controller."""
