"""kube-scheduler as the planners apply it: the node-level predicates (`predicates`: resources, node
affinity, taints), the other filters (`filters`: topology spread, pod affinity, ports, volumes), the
scoring profiles (`scoring`) and CSI attach limits (`attach`)."""
